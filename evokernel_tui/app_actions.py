"""What the keys and the command palette do in `EvoKernelApp`: steps, decisions, views, saving, themes, quitting.

A mixin of `EvoKernelApp` (evokernel_tui/app.py); the session calls themselves start in `SessionCalls`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from textual.app import SystemCommand
from textual.screen import Screen

from evokernel_tui.screens.main import MainScreen
from evokernel_tui.screens.prompts import ConfirmPrompt, NumberPrompt, PathPrompt
from evokernel_tui.screens.task_picker import TaskPickerScreen
from evokernel_tui.session_calls import _pending_text, _version_text
from evokernel_tui.themes import (
    DEFAULT_THEME,
    THEME_NAMES,
    next_theme,
    save_theme_name,
    short_name,
    textual_name,
)
from evokernel_tui.view import source_of
from evokernel_tui.widgets.kernel_pane import KernelPane

MAX_RUN_STEPS = 100


PALETTE = (
    ("Step", "Run one draft or refine step with the model", "step"),
    ("Run N steps", "Run several steps in a row (pause stops after the current one)", "run_steps"),
    ("Pause", "Stop a run after the current step", "pause"),
    ("Accept refinement", "Make the pending refinement the current kernel", "accept"),
    ("Reject refinement", "Drop the pending refinement", "reject"),
    ("Reverify", "Run all gates on the current kernel again", "reverify"),
    ("Edit in $EDITOR", "Open the kernel in your editor, then verify your edit", "edit_external"),
    ("Switch stage", "Switch between draft and refine", "switch_stage"),
    ("Open task", "Open a built-in task or a task file", "open_task"),
    ("Task view", "The task: reference source, input shapes and dtypes, init arguments, tolerance, eager time",
     "show_task"),
    ("Save kernel", "Save the best feasible kernel (or the current one, with a warning) to a file", "export"),
    ("Versions", "Every kernel version with its outcome, timing and decision; save the best", "show_versions"),
    ("Switch theme", "Cycle dark → light → high-contrast", "switch_theme"),
    ("Zoom kernel", "Give the kernel pane the whole screen, or bring the other panes back", "zoom"),
)


def _builtin_task_rows() -> list[tuple[str, str]]:
    """(name, description) of the built-in tasks from their index (no task file is read)."""
    try:
        from core.tasks import TaskError, builtin_index
    except ImportError:
        return []
    try:
        return [(meta.name, meta.description) for meta in builtin_index()]
    except TaskError:
        return []


class AppActions:
    """`action_*` methods (key bindings and palette commands) of `EvoKernelApp`."""

    def action_step(self) -> None:
        if not self._needs_model("A step") or self._pending_blocks("A step"):
            return
        if self.session is not None and str(self.session.stage) == "done":
            self._report("The session is done; switch stage (g) to keep working on it.", "warning")
            return
        self._start("step", self._model_step)

    def action_run_steps(self) -> None:
        if not self._needs_model("Running steps") or self.session is None or self._pending_blocks("Running steps"):
            return
        busy = self._busy_with()
        if busy:
            self._report(f"Refused: run not started while {busy} is still running.", "warning")
            return
        self.push_screen(NumberPrompt("Run how many steps?", 4, 1, MAX_RUN_STEPS), self.run_steps)

    def action_pause(self) -> None:
        if self.running and self.running.startswith("run"):
            self._pause_requested = True
            self._report("Pausing after the current step.", "information")
        elif self.running:
            self._report(f"{self.running} cannot be paused midway; it will finish on its own.", "warning")
        else:
            self._report("Nothing is running.", "information")

    def action_accept(self) -> None:
        if self.session is not None and source_of(self.session.pending) is None:
            self._report("No refinement is pending.", "warning")
            return
        self._start("accept", self._plain_call("accept_pending"))

    def action_reject(self) -> None:
        if self.session is not None and source_of(self.session.pending) is None:
            self._report("No refinement is pending.", "warning")
            return
        self._start("reject", self._plain_call("reject_pending"))

    def action_reverify(self) -> None:
        s = self.session
        if s is not None and not getattr(s, "history", None) and s.current_source:
            # nothing recorded yet: the kernel on screen is the starter, so verify that
            self.submit_edit(s.current_source, "the starter kernel")
            return
        self._start("reverify", self._plain_call("reverify"))

    def action_switch_stage(self) -> None:
        if self.session is None:
            self._report("No session open: press o to open a task.", "warning")
            return
        target = "draft" if str(self.session.stage) == "refine" else "refine"
        self._start(f"switch to {target}", self._plain_call("set_stage", target))

    def action_open_task(self) -> None:
        if self._open_session is None:
            self._report("Opening another task is not available here; start `evokernel tui TASK`.", "warning")
            return
        if self._busy_with():
            self._report("Refused: wait for the running call to finish before opening a task.", "warning")
            return
        self.push_screen(TaskPickerScreen(_builtin_task_rows()), self.open_task)

    def open_task(self, task: str | None) -> None:
        if task:
            self.activity.note(f"opening {task}…")
            self.opening = task
            self._create_session(task)

    def export_choice(self) -> tuple[str | None, str, str]:
        """(source, what it is, warning): the best feasible kernel when there is one, else the current
        kernel with a warning that it has not passed the gates; unsubmitted pane edits are never saved."""
        best = getattr(self.session, "best", None) if self.session is not None else None
        warning = ""
        if self._kernel_pane_edited():
            warning = "The kernel pane has edits that were not submitted (ctrl+s); they are not saved. "
        if best is not None and getattr(best, "source", None):
            return best.source, _version_text(best, "the best feasible kernel"), warning
        source = self.view.source or (self.session.current_source if self.session is not None else "")
        if not source:
            return None, "", warning
        return source, "the current kernel", warning + "No kernel has passed the gates yet: this one may not build."

    def _kernel_pane_edited(self) -> bool:
        try:
            return bool(self.main_screen.query_one(KernelPane).edited)
        except Exception:  # no main screen (replay) or not mounted yet
            return False

    def action_export(self) -> None:
        source, what, warning = self.export_choice()
        if source is None:
            self._report("There is no kernel to save yet.", "warning")
            return
        if warning:
            self._report(warning.strip(), "warning")
        default = f"{self.view.task or 'kernel'}_kernel.py"
        self.push_screen(PathPrompt(f"Save {what} to", default), lambda target: self.export_kernel(target, source))

    def export_kernel(self, target: str | None, source: str | None = None) -> None:
        if not target:
            return
        if source is None:
            source = self.export_choice()[0] or self.view.source
        path = Path(target).expanduser()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(source)
        except OSError as exc:
            self._report(f"Could not save to {path}: {exc.strerror or exc}. Pick another path.")
            return
        self._report(f"Saved the kernel to {path}.", "information")

    async def action_quit(self) -> None:
        """Quit; with a refinement still pending, ask first. The session id and how to resume are
        printed once the screen is gone."""
        pending = self.session.pending if self.session is not None else None
        if source_of(pending) is not None and not isinstance(self.screen, ConfirmPrompt):
            def answered(yes: bool | None) -> None:
                if yes:
                    self.exit(message=self.exit_message())

            self.push_screen(ConfirmPrompt(f"{_pending_text(pending).capitalize()} is pending (not accepted or "
                                           "rejected). Quit anyway? It stays pending in the session."), answered)
            return
        self.exit(message=self.exit_message())

    def exit_message(self) -> str | None:
        """`Session ID saved in PATH; continue with: evokernel tui --session ID` (None without a session)."""
        s = self.session
        sid = getattr(s, "id", None)
        if s is None or not sid or self._replay_events is not None:
            return None
        pending = source_of(getattr(s, "pending", None)) is not None
        note = f" ({_pending_text(s.pending)} is still pending)" if pending else ""
        from core.shell import runnable

        return runnable(f"Session {sid} saved in {s.path}{note}; continue with: evokernel tui --session {sid}")

    def action_zoom(self) -> None:
        self.main_screen.action_zoom()

    def action_show_versions(self) -> None:
        """Every kernel version: author, outcome, median, spread, runs, speedup, accepted/rejected."""
        from evokernel_tui.screens.versions import (
            VersionsScreen,
            compare_in_session,
            session_events,
            version_rows,
        )

        if self.session is None:
            self._report("No session open: press o to open a task.", "warning")
            return
        rows = version_rows(self.session, session_events(self.session))
        if not rows:
            self._report("No kernel version recorded yet: verify one (v, ctrl+s) or take a step (s).", "information")
            return
        best = getattr(self.session, "best", None)
        self.push_screen(VersionsScreen(rows, getattr(best, "source", None), compare_in_session(self.session)))

    def action_show_task(self) -> None:
        """The Task view: reference source, shapes and dtypes, init arguments, tolerance, eager time."""
        from evokernel_tui.screens.task_view import TaskViewScreen

        task = getattr(self.session, "task", None) if self.session is not None else None
        if task is None or not getattr(task, "source", None):
            self._report("No task is open: press o to open one.", "warning")
            return
        self.push_screen(TaskViewScreen(task, eager_ms=self.view.reference_ms,
                                        config=getattr(self.session, "verify_config", None),
                                        degenerate=self.view.degenerate))

    def _theme_changed(self, theme: Any) -> None:
        name = short_name(theme.name)
        if name == self._theme_name:
            return
        self._theme_name = name
        try:
            save_theme_name(name)
        except OSError as exc:
            self.notify(f"Theme not remembered: {exc}", severity="warning")

    def action_switch_theme(self) -> None:
        self.apply_theme(next_theme(self._theme_name))

    def apply_theme(self, name: str, remember: bool = True) -> None:
        """Switch colours; Textual adds the `-theme-evokernel-NAME` class the theme's tcss is scoped by.
        `name` is one of ours or any registered Textual theme; an unknown one falls back to the default."""
        target = textual_name(name)
        if target not in self.available_themes:
            name, target = DEFAULT_THEME, textual_name(DEFAULT_THEME)
        self._theme_name = name
        self.theme = target
        if remember:
            try:
                save_theme_name(name)
            except OSError as exc:
                self.notify(f"Theme not remembered: {exc}", severity="warning")

    @property
    def theme_name(self) -> str:
        return self._theme_name

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        if isinstance(screen, MainScreen):
            for title, help_text, action in PALETTE:
                yield SystemCommand(title, help_text, getattr(self, f"action_{action}"))
            yield SystemCommand("Toggle diff", "Show the diff against the previous version or the pending refinement",
                                screen.action_toggle_diff)
            yield SystemCommand("Toggle C++ view", "Show the C++ the kernel compiles, numbered like the compiler's "
                                "diagnostics, with the failing lines marked", screen.action_toggle_cpp)
        for name in THEME_NAMES:
            yield SystemCommand(f"Theme: {name}", f"Switch to the {name} theme and remember it",
                                lambda name=name: self.apply_theme(name))
