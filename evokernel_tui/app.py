"""EvoKernelApp: the Textual face of a `core.session.Session`.

The app talks to the session object only (its attributes, its methods and the `Event` records they
return). Every session call runs in a thread worker and reports back with messages, so the screen
stays live through a long build; a second call while one runs is refused, never queued.
"""

from __future__ import annotations

import difflib
import os
import shlex
import subprocess
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple

from textual import work
from textual.app import App, SuspendNotSupported, SystemCommand
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen

from evokernel_tui.screens.main import MainScreen, SessionScreen
from evokernel_tui.screens.prompts import ConfirmPrompt, NumberPrompt, PathPrompt
from evokernel_tui.screens.replay import ReplayScreen
from evokernel_tui.screens.task_picker import TaskPickerScreen
from evokernel_tui.themes import (
    DEFAULT_THEME,
    TEXTUAL_THEMES,
    THEME_NAMES,
    load_theme_name,
    next_theme,
    save_theme_name,
    short_name,
    textual_name,
)
from evokernel_tui.view import SessionView, apply_event, event_parts, read_events, source_of
from evokernel_tui.watcher import KernelFileWatcher
from evokernel_tui.widgets.activity_log import ActivityLog
from evokernel_tui.widgets.kernel_pane import KernelPane

THEMES_DIR = Path(__file__).resolve().parent.parent / "themes"
MAX_RUN_STEPS = 100


def prebuild_starter(session: Any) -> Any:
    """Verify the starter kernel on a daemon thread, recording nothing: its bindings (the signature
    the person's edits of it keep), its build and its verdict are cached by the time they press v or
    ctrl+s. Failures are ignored: the person's own verification then pays the cost."""
    import contextlib
    import threading

    meta = getattr(session, "meta", None) or {}
    reference = (meta.get("task") or {}).get("source")
    source = session.current_source
    if not reference or not source:
        return None

    def run() -> None:
        with contextlib.suppress(Exception):
            session.verify_fn(reference, source, backend=session.backend, config=session.verify_config)

    thread = threading.Thread(target=run, name="evokernel-prebuild-starter", daemon=True)
    thread.start()
    return thread


class TaskCheck(NamedTuple):
    """A check of the open task that runs after the first paint, in its own named worker
    (`task check: NAME`): `run()` returns a one-line finding, or raises with a one-line message when the
    task cannot be worked on (it fails to run, it does not fit the memory limit). Checks run one after
    another; the first problem stops the rest and is shown in the gates pane, the status line and the
    activity pane. Session calls (verify, step) wait for the checks: the probe decides how correctness
    is judged (degeneracy)."""

    name: str
    run: Callable[[], str]


def untrusted_pass_as_checking(event: Any) -> Any:
    """A live `gate` event's "pass" may be the candidate's own progress report (the verifier marks a
    phase passed when the child moves on); the pane shows "checking" until the `verification` event,
    the parent's verdict, sets every gate."""
    kind, data, step = event_parts(event)
    if kind == "gate" and data.get("status") == "pass":
        return {"kind": kind, "data": {**data, "status": "checking"}, "step": step}
    return event


def change_summary(before: str, after: str) -> str:
    """`+3 −1 lines` between two versions of the kernel."""
    added = removed = 0
    for line in difflib.ndiff(before.splitlines(), after.splitlines()):
        added += line.startswith("+ ")
        removed += line.startswith("- ")
    return f"+{added} −{removed} lines"


class EvoKernelApp(App[None]):
    """Live mode drives a session; replay mode (given `replay_events`) only reads a recording."""

    TITLE = "EvoKernel"
    CSS_PATH = [THEMES_DIR / "base.tcss"] + [THEMES_DIR / f"{name}.tcss" for name in THEME_NAMES]
    BINDINGS = [
        Binding("t", "switch_theme", "Theme", show=False),
        Binding("q", "quit", "Quit", show=False),
    ]

    class SessionEvent(Message):
        def __init__(self, event: Any) -> None:
            super().__init__()
            self.event = event

    class Token(Message):
        def __init__(self, chunk: str) -> None:
            super().__init__()
            self.chunk = chunk

    class KernelFileChanged(Message):
        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    class SessionReady(Message):
        def __init__(self, session: Any) -> None:
            super().__init__()
            self.session = session

    class CallFinished(Message):
        def __init__(self, label: str, error: str | None) -> None:
            super().__init__()
            self.label = label
            self.error = error

    class CheckFinished(Message):
        def __init__(self, session: Any, name: str, finding: str | None, problem: str | None) -> None:
            super().__init__()
            self.session = session
            self.name = name
            self.finding = finding
            self.problem = problem

    def __init__(
        self,
        session: Any = None,
        *,
        open_session: Callable[[str | None], Any] | None = None,
        task: str | None = None,
        replay_events: list[Any] | None = None,
        theme_name: str | None = None,
        watch_file: bool = True,
        debounce: float = 0.3,
        prebuild_starter: bool = False,
        task_checks: Callable[[Any], Iterable[TaskCheck]] | None = None,
        starter: str | None = None,
    ) -> None:
        super().__init__()
        self._prebuild_starter = prebuild_starter
        self._task_checks = task_checks
        #: the starter kernel worked out from the task's source before the screen (manual mode): on screen
        #: and editable at the first paint; the session's own starter is the same text, so edits made
        #: before it attaches are kept
        self._starter = starter
        self.opening: str | None = None
        self._pending_checks: list[TaskCheck] = []
        #: set while no task check is running (session calls wait on it); `task_problem`: what one found
        self.checks_done = threading.Event()
        self.checks_done.set()
        self.checking: str | None = None
        self.task_problem: str | None = None
        self.prebuild_thread: Any = None
        self.session = session
        self.view = SessionView()
        self._open_session = open_session
        self._initial_task = task
        self._replay_events = replay_events
        self._theme_name = theme_name or load_theme_name()
        self._watch_file = watch_file
        self._debounce = debounce
        self._watcher: KernelFileWatcher | None = None
        self.running: str | None = None
        self._pause_requested = False
        self._deferred_edit: str | None = None
        for theme in TEXTUAL_THEMES.values():
            self.register_theme(theme)

    # ----- start-up -------------------------------------------------------------------------------

    def get_default_screen(self) -> Screen:
        if self._replay_events is not None:
            return ReplayScreen(self._replay_events)
        return MainScreen()

    def on_mount(self) -> None:
        self.apply_theme(self._theme_name, remember=False)
        # one theme system: t, the "Theme: …" commands and Textual's own picker all land here
        self.theme_changed_signal.subscribe(self, self._theme_changed)

    def _theme_changed(self, theme: Any) -> None:
        name = short_name(theme.name)
        if name == self._theme_name:
            return
        self._theme_name = name
        try:
            save_theme_name(name)
        except OSError as exc:
            self.notify(f"Theme not remembered: {exc}", severity="warning")

    def on_ready(self) -> None:
        """After the first paint: attach the session, or start opening one in a worker."""
        if self._replay_events is not None:
            self.sub_title = "replay"
            return
        if self.session is not None:
            self.attach(self.session)
        elif self._open_session is not None:
            self.activity.note(f"opening {self._initial_task or 'the default task'}…")
            if self._starter:
                self.main_screen.query_one(KernelPane).load(self._starter, author="starter")
                self.main_screen.focus_editor()
            self.opening = self._initial_task or "the default task"
            self.call_after_refresh(self._create_session, self._initial_task)
        else:
            self.activity.note("No session open: press o to open a task.")

    @work(thread=True, exclusive=True, group="open")
    def _create_session(self, task: str | None) -> None:
        assert self._open_session is not None
        try:
            session = self._open_session(task)
        except Exception as exc:  # any failure to open is shown as one line, never a traceback
            self.call_from_thread(self._opening_failed, f"Could not open {task or 'the task'}: {exc}")
            return
        self.post_message(self.SessionReady(session))

    def _opening_failed(self, text: str) -> None:
        self.opening = None
        self._report(text)

    def on_evo_kernel_app_session_ready(self, message: SessionReady) -> None:
        self.opening = None
        self.attach(message.session)

    def attach(self, session: Any) -> None:
        """Show `session`: fold its recorded events, then start watching its kernel file."""
        self._stop_watcher()
        self.session = session
        self.view = SessionView(task=_task_name(session), backend=str(getattr(session, "backend", "")),
                                degenerate=_degenerate(session))
        recorded = read_events(Path(session.path)) if getattr(session, "path", None) else []
        for event in recorded:
            apply_event(self.view, event)
        # the model it runs with now (an opened session may be given another than it was created with)
        self.view.manual = bool(session.manual)
        self.activity.replace(self.view.activity)
        self._settled()
        self.main_screen.show_manual(bool(session.manual))
        if session.manual:  # the person writes the kernel: start in the editor
            self.main_screen.focus_editor()
        if self._watch_file and getattr(session, "kernel_path", None):
            self._watcher = KernelFileWatcher(
                Path(session.kernel_path), lambda text: self.post_message(self.KernelFileChanged(text)), self._debounce
            ).start()
            self._watcher.note_own_write(session.current_source)
        self.task_problem = None
        self._pending_checks = list(self._task_checks(session)) if self._task_checks is not None else []
        if self._pending_checks:
            self.checks_done.clear()
        self._next_check()

    # ----- task checks after the first paint (probe, memory estimate, degeneracy) -------------------

    def _next_check(self) -> None:
        """Start the next task check in its own worker; when none is left (or one found a problem), let
        the waiting session calls go and prebuild the starter."""
        session = self.session
        if self._pending_checks and self.task_problem is None and session is not None:
            check = self._pending_checks.pop(0)
            self.checking = check.name
            self.view.task_note = f"checking the task ({check.name})…"
            self._show()
            self.run_worker(lambda: self._check_worker(session, check), name=f"task check: {check.name}",
                            group="task-checks", thread=True, exit_on_error=False)
            return
        self._pending_checks = []
        self.checking = None
        self.checks_done.set()
        if session is None:
            return
        if self.task_problem is None:
            self.view.task_note = ""
            self._show()
        if (self._prebuild_starter and self.task_problem is None and session.manual
                and not getattr(session, "history", None)):
            self.prebuild_thread = prebuild_starter(session)

    def _check_worker(self, session: Any, check: TaskCheck) -> None:
        finding = problem = None
        try:
            finding = check.run()
        except Exception as exc:  # the check's one line, shown in the panes
            problem = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        self.post_message(self.CheckFinished(session, check.name, finding, problem))

    def on_evo_kernel_app_check_finished(self, message: CheckFinished) -> None:
        if message.session is not self.session:
            return  # another task was opened meanwhile
        if message.problem:
            self.task_problem = message.problem
            self.view.task_note = f"⚠ task check failed ({message.name}): see the activity pane"
            self._report(f"Task check ({message.name}) found a problem: {message.problem}")
        else:
            self.activity.note(f"task check ({message.name}): {message.finding}")
        self.view.degenerate = _degenerate(self.session) or self.view.degenerate
        self._next_check()

    def on_unmount(self) -> None:
        self._stop_watcher()

    def _stop_watcher(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None

    # ----- state ------------------------------------------------------------------------------------

    @property
    def main_screen(self) -> MainScreen:
        return self.get_screen_stack_member(MainScreen)

    def get_screen_stack_member(self, kind: type) -> Any:
        return next(s for s in reversed(self.screen_stack) if isinstance(s, kind))

    @property
    def activity(self) -> ActivityLog:
        return self.get_screen_stack_member(SessionScreen).query_one(ActivityLog)

    def _settled(self) -> None:
        """After a fold or a finished call: the kernel on screen (the folded view's) is the session's own
        write of current_kernel.py, not a person's edit; then paint."""
        if self.session is not None and self._watcher is not None:
            self._watcher.note_own_write(self.view.source)
        self._show()

    def _show(self) -> None:
        screen = self.get_screen_stack_member(SessionScreen)
        screen.show(self.view)
        self.sub_title = f"{self.view.task} · {self.view.backend} · {self.view.stage}" + (
            f" · {self.running}…" if self.running else ""
        ) + (f" · checking the task ({self.checking})…" if self.checking else "") + (
            " · ⚠ task problem" if self.task_problem else "")

    def on_evo_kernel_app_session_event(self, message: SessionEvent) -> None:
        entry = apply_event(self.view, untrusted_pass_as_checking(message.event))
        kind = event_parts(message.event)[0]
        if kind in ("prompt", "model_reply", "model_error"):
            self.activity.end_stream()
        if entry is not None:
            self.activity.add(entry)
        self._show()

    def on_evo_kernel_app_token(self, message: Token) -> None:
        self.activity.stream(message.chunk)

    def _report(self, text: str, severity: str = "error") -> None:
        self.activity.note(text)
        self.notify(text, severity=severity)  # type: ignore[arg-type]

    # ----- running session calls -------------------------------------------------------------------

    def mark_memory_used(self, item_id: str, used: bool) -> None:
        """The person says a memory on screen helped (or not): only marked memories are credited for
        their next edit. Recorded as an event, so replay shows it too."""
        s = self.session
        if s is None or not hasattr(s, "mark_used"):
            return
        try:
            s.mark_used(item_id, used, on_event=self._on_event)
        except Exception as exc:  # busy, or the memory is no longer on screen: one line
            self._report(f"Could not mark the memory: {exc}", "warning")

    def _busy_with(self) -> str | None:
        if self.running:
            return self.running
        if self.session is not None and getattr(self.session, "busy", False):
            return "a session step"
        return None

    def _start(self, label: str, call: Callable[[Any], Iterable[Any] | None]) -> bool:
        """Run `call(session)` in a worker unless one is running (then refuse, saying so)."""
        if self.session is None:
            self._report(f"Still opening {self.opening}: try again in a moment." if self.opening else
                         "No session open: press o to open a task.", "warning")
            return False
        if self.task_problem is not None:
            self._report(f"Refused: {label} not started: {self.task_problem}", "warning")
            return False
        busy = self._busy_with()
        if busy:
            self._report(f"Refused: {label} not started while {busy} is still running.", "warning")
            return False
        self.running = label
        self._show()
        self._call_worker(label, call)
        return True

    def _on_event(self, event: Any) -> None:
        """The session's `on_event`: each event arrives here once, as it is recorded (thread-safe); the
        list a session call returns holds the same events and is not read."""
        self.post_message(self.SessionEvent(event))

    @work(thread=True, group="session", exit_on_error=False)
    def _call_worker(self, label: str, call: Callable[[Any], Iterable[Any] | None]) -> None:
        error = None
        try:
            self._wait_for_checks(label)
            call(self.session)
        except Exception as exc:  # shown as one line in the activity pane and a toast
            error = f"{label} failed: {exc}"
        self.post_message(self.CallFinished(label, error))

    def _wait_for_checks(self, label: str) -> None:
        """In a worker: hold a session call until the task checks are done (the probe decides how
        correctness is judged); a problem they found stops it with that line."""
        if not self.checks_done.is_set():
            self.call_from_thread(self.activity.note, f"{label}: waiting for the task check ({self.checking}) "
                                  "to finish…")
            self.checks_done.wait()
        if self.task_problem is not None:
            raise RuntimeError(f"not run: {self.task_problem}")

    def on_evo_kernel_app_call_finished(self, message: CallFinished) -> None:
        self.running = None
        self._pause_requested = False
        self.activity.end_stream()
        if message.error:
            self._report(message.error)
        self._settled()
        if self._deferred_edit is not None:
            text, self._deferred_edit = self._deferred_edit, None
            self._take_file_edit(text)

    def _model_step(self, session: Any) -> None:
        best = getattr(session, "best", None)
        if str(session.stage) == "refine" and best is not None:
            self.call_from_thread(self.activity.note, f"refining from {_version_text(best, 'the best kernel')}")
        session.step(on_event=self._on_event, on_token=lambda chunk: self.post_message(self.Token(chunk)))

    def _plain_call(self, method: str, *args: Any) -> Callable[[Any], None]:
        def call(session: Any) -> None:
            getattr(session, method)(*args, on_event=self._on_event)

        return call

    def _needs_model(self, what: str) -> bool:
        if self.session is not None and self.session.manual:
            self._report(
                f"{what} needs a model; none is configured (use --model, EVOKERNEL_MODEL or config.toml).", "warning"
            )
            return False
        return True

    # ----- actions (key bindings and command palette) ----------------------------------------------

    def _pending_blocks(self, what: str) -> bool:
        """A pending refinement is kept until the person decides: no step may replace it meanwhile."""
        pending = self.session.pending if self.session is not None else None
        if source_of(pending) is None:
            return False
        self._report(f"{what} refused: {_pending_text(pending)} is pending; accept (a) or reject (r) it first.",
                     "warning")
        return True

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

    def run_steps(self, count: int | None) -> None:
        if not count:
            return

        def run(session: Any) -> None:
            for index in range(count):
                if self._pause_requested:
                    self.post_message(self.SessionEvent({"kind": "paused", "data": {}, "step": None}))
                    return
                if str(session.stage) == "done":
                    return
                self._model_step(session)
                if source_of(session.pending) is not None and index + 1 < count:
                    self.call_from_thread(
                        self.activity.note,
                        f"Run stopped after {index + 1} of {count} steps: {_pending_text(session.pending)} is "
                        "pending; accept (a) or reject (r) it, then run again.")
                    return
                if index + 1 < count:
                    self.call_from_thread(self._show)

        self._start(f"run {count} steps", run)

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

    def submit_edit(self, source: str, origin: str) -> bool:
        """Verify `source` as the person's edit; its own save of the file is not picked up again."""
        if self._watcher is not None:
            self._watcher.note_own_write(source)
        started = self._start(f"verify your edit ({origin})", self._plain_call("submit_human_edit", source))
        if started:
            self.activity.note(f"Verifying your edit from {origin} ({change_summary(self.view.source, source)}).")
        return started

    def on_kernel_pane_submitted(self, message: KernelPane.Submitted) -> None:
        self.submit_edit(message.source, "the kernel pane")

    def action_edit_external(self) -> None:
        if self.session is None or self._busy_with():
            self._report("Wait for the running call to finish before editing." if self.session else
                         "No session open: press o to open a task.", "warning")
            return
        path = Path(self.session.kernel_path)
        before = path.read_text() if path.exists() else ""
        command = shlex.split(os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi") + [str(path)]
        try:
            try:
                with self.suspend():
                    subprocess.run(command, check=False)
            except SuspendNotSupported:
                subprocess.run(command, check=False, stdin=subprocess.DEVNULL, capture_output=True)
        except OSError as exc:
            self._report(f"Could not start the editor {command[0]!r}: {exc}. Set $EDITOR to one that exists.")
            return
        after = path.read_text() if path.exists() else before
        if after == before or after == self.session.current_source:
            self._report("The editor closed without changing the kernel.", "information")
            return
        self.submit_edit(after, "$EDITOR")

    def on_evo_kernel_app_kernel_file_changed(self, message: KernelFileChanged) -> None:
        s = self.session
        if s is None or message.text in (s.current_source, source_of(s.pending)):
            return
        if self._busy_with():
            self._deferred_edit = message.text
            running = self.running or "the running call"
            self.activity.note(f"Picked up a save of {Path(s.kernel_path).name}; it will be verified once "
                               f"the running call ({running}) has finished.")
            return
        self._take_file_edit(message.text)

    def _take_file_edit(self, text: str) -> None:
        if self.session is None or text == self.session.current_source:
            return
        name = Path(self.session.kernel_path).name
        self.activity.note(f"Picked up a save of {name} from disk ({change_summary(self.session.current_source, text)}).")
        self.submit_edit(text, f"a save of {name}")

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
        return f"Session {sid} saved in {s.path}{note}; continue with: evokernel tui --session {sid}"

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


def _version_text(attempt: Any, what: str) -> str:
    """`the best kernel v3 (20.4 ms)` from an `Attempt` (or anything with version and latency_ms)."""
    version = getattr(attempt, "version", None)
    ms = getattr(attempt, "latency_ms", None)
    return f"{what}" + (f" v{version}" if version is not None else "") + (f" ({ms:.4g} ms)" if ms else "")


def _pending_text(pending: Any) -> str:
    return _version_text(pending, "the refinement")


def _degenerate(session: Any) -> list[str]:
    """The trivial answers the session found to pass its task (`core.verifying.mark_degenerate`)."""
    extra = getattr(getattr(session, "verify_config", None), "extra", None) or {}
    return list(extra.get("degenerate") or [])


def _task_name(session: Any) -> str:
    task = getattr(session, "task", None)
    return str(getattr(task, "name", task) or "")


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
