"""What the keys and the command palette do in `EvoKernelApp` beyond session calls: opening a task, saving the
kernel, the versions and task views, quitting, and the palette's commands.

`AppActions` is a collaborator `EvoKernelApp` (evokernel_tui/app.py) holds, not a mixin: the app's `action_*`
methods (what Textual's bindings and the palette call by name) hand over to it, or to `SessionCalls`
(evokernel_tui/session_calls.py) for the actions that are session calls. What it uses of the app is named in
`ActionsHost`, so this file reads alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from textual.app import SystemCommand
from textual.screen import Screen

from evokernel_tui.screens.main import MainScreen
from evokernel_tui.screens.prompts import ConfirmPrompt, PathPrompt
from evokernel_tui.screens.task_picker import TaskPickerScreen
from evokernel_tui.session_calls import _pending_text, _version_text
from evokernel_tui.themes import THEME_NAMES
from evokernel_tui.view import SessionView, source_of
from evokernel_tui.widgets.kernel_pane import KernelPane

if TYPE_CHECKING:
    from core.session.port import SessionPort


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


class ActionsHost(Protocol):
    """What the actions use of the app: the open session and its view, whether it can open another task and
    whether a call runs, the panes, Textual's screens and exit, and the theme switch."""

    session: SessionPort | None
    view: SessionView
    opening: str | None

    @property
    def main_screen(self) -> MainScreen: ...
    @property
    def activity(self) -> Any: ...
    @property
    def screen(self) -> Screen: ...

    def can_open_tasks(self) -> bool: ...
    def busy_with(self) -> str | None: ...
    def is_replay(self) -> bool: ...
    def _create_session(self, task: str | None) -> Any: ...
    def _report(self, text: str, severity: str = "error") -> None: ...
    def push_screen(self, screen: Any, callback: Any = None) -> Any: ...
    def exit(self, result: Any = None, return_code: int = 0, message: Any = None) -> None: ...
    def apply_theme(self, name: str, remember: bool = True) -> None: ...


class AppActions:
    """The app's actions that are not session calls (see the module docstring)."""

    def __init__(self, host: ActionsHost) -> None:
        self._host = host

    def open_task(self) -> None:
        """Pick a task (built-in, or a task file) and open a session for it in a worker."""
        host = self._host
        if not host.can_open_tasks():
            host._report("Opening another task is not available here; start `evokernel tui TASK`.", "warning")
            return
        if host.busy_with():
            host._report("Refused: wait for the running call to finish before opening a task.", "warning")
            return
        host.push_screen(TaskPickerScreen(_builtin_task_rows()), self.open_picked)

    def open_picked(self, task: str | None) -> None:
        host = self._host
        if task:
            host.activity.note(f"opening {task}…")
            host.opening = task
            host._create_session(task)

    def export_choice(self) -> tuple[str | None, str, str]:
        """(source, what it is, warning): the best feasible kernel when there is one, else the current
        kernel with a warning that it has not passed the gates; unsubmitted pane edits are never saved."""
        host = self._host
        best = getattr(host.session, "best", None) if host.session is not None else None
        warning = ""
        if self._kernel_pane_edited():
            warning = "The kernel pane has edits that were not submitted (ctrl+s); they are not saved. "
        if best is not None and getattr(best, "source", None):
            return best.source, _version_text(best, "the best feasible kernel"), warning
        source = host.view.source or (host.session.current_source if host.session is not None else "")
        if not source:
            return None, "", warning
        return source, "the current kernel", warning + "No kernel has passed the gates yet: this one may not build."

    def _kernel_pane_edited(self) -> bool:
        host = self._host
        try:
            return bool(host.main_screen.query_one(KernelPane).edited)
        except Exception:  # no main screen (replay) or not mounted yet
            return False

    def export(self) -> None:
        host = self._host
        source, what, warning = self.export_choice()
        if source is None:
            host._report("There is no kernel to save yet.", "warning")
            return
        if warning:
            host._report(warning.strip(), "warning")
        default = f"{host.view.task or 'kernel'}_kernel.py"
        host.push_screen(PathPrompt(f"Save {what} to", default), lambda target: self.export_kernel(target, source))

    def export_kernel(self, target: str | None, source: str | None = None) -> None:
        host = self._host
        if not target:
            return
        if source is None:
            source = self.export_choice()[0] or host.view.source
        path = Path(target).expanduser()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(source)
        except OSError as exc:
            host._report(f"Could not save to {path}: {exc.strerror or exc}. Pick another path.")
            return
        host._report(f"Saved the kernel to {path}.", "information")

    def quit(self) -> None:
        """Quit; with a refinement still pending, ask first. The session id and how to resume are
        printed once the screen is gone."""
        host = self._host
        pending = host.session.pending if host.session is not None else None
        if source_of(pending) is not None and not isinstance(host.screen, ConfirmPrompt):
            def answered(yes: bool | None) -> None:
                if yes:
                    host.exit(message=self.exit_message())

            host.push_screen(ConfirmPrompt(f"{_pending_text(pending).capitalize()} is pending (not accepted or "
                                           "rejected). Quit anyway? It stays pending in the session."), answered)
            return
        host.exit(message=self.exit_message())

    def exit_message(self) -> str | None:
        """`Session ID saved in PATH; continue with: evokernel tui --session ID` (None without a session)."""
        host = self._host
        s = host.session
        sid = getattr(s, "id", None)
        if s is None or not sid or host.is_replay():
            return None
        pending = source_of(getattr(s, "pending", None)) is not None
        note = f" ({_pending_text(s.pending)} is still pending)" if pending else ""
        from core.shell import runnable

        return runnable(f"Session {sid} saved in {s.path}{note}; continue with: evokernel tui --session {sid}")

    def show_versions(self) -> None:
        """Every kernel version: author, outcome, median, spread, runs, speedup, accepted/rejected."""
        from evokernel_tui.screens.versions import (
            VersionsScreen,
            compare_in_session,
            session_events,
            version_rows,
        )

        host = self._host
        if host.session is None:
            host._report("No session open: press o to open a task.", "warning")
            return
        rows = version_rows(host.session, session_events(host.session))
        if not rows:
            host._report("No kernel version recorded yet: verify one (v, ctrl+s) or take a step (s).", "information")
            return
        best = getattr(host.session, "best", None)
        host.push_screen(VersionsScreen(rows, getattr(best, "source", None), compare_in_session(host.session)))

    def show_task(self) -> None:
        """The Task view: reference source, shapes and dtypes, init arguments, tolerance, eager time."""
        from evokernel_tui.screens.task_view import TaskViewScreen

        host = self._host
        task = getattr(host.session, "task", None) if host.session is not None else None
        if task is None or not getattr(task, "source", None):
            host._report("No task is open: press o to open one.", "warning")
            return
        host.push_screen(TaskViewScreen(task, eager_ms=host.view.reference_ms,
                                        config=getattr(host.session, "verify_config", None),
                                        degenerate=host.view.degenerate))

    def system_commands(self, screen: Screen, action: Callable[[str], Callable[[], Any]]) -> Iterable[SystemCommand]:
        """The palette's commands beyond Textual's own: the loop's (`action(name)`: the app's `action_NAME`),
        the main screen's views and the themes."""
        host = self._host
        if isinstance(screen, MainScreen):
            for title, help_text, name in PALETTE:
                yield SystemCommand(title, help_text, action(name))
            yield SystemCommand("Toggle diff", "Show the diff against the previous version or the pending refinement",
                                screen.action_toggle_diff)
            yield SystemCommand("Toggle C++ view", "Show the C++ the kernel compiles, numbered like the compiler's "
                                "diagnostics, with the failing lines marked", screen.action_toggle_cpp)
        for theme in THEME_NAMES:
            yield SystemCommand(f"Theme: {theme}", f"Switch to the {theme} theme and remember it",
                                lambda theme=theme: host.apply_theme(theme))
