"""EvoKernelApp: the Textual face of a `core.session.Session`.

The app talks to the session object only (its attributes, its methods and the `Event` records they
return). Every session call runs in a thread worker and reports back with messages, so the screen
stays live through a long build; a second call while one runs is refused, never queued.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any, ClassVar

from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen

from evokernel_tui.app_actions import AppActions
from evokernel_tui.kernel_edits import KernelEditor
from evokernel_tui.screens.main import MainScreen, SessionScreen
from evokernel_tui.screens.replay import ReplayScreen
from evokernel_tui.session_calls import SessionCalls
from evokernel_tui.task_checks import TaskCheck, TaskCheckRunner, _degenerate
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
from evokernel_tui.view import SessionView, apply_event, event_parts, read_events
from evokernel_tui.widgets.activity_log import ActivityLog
from evokernel_tui.widgets.kernel_pane import KernelPane

if TYPE_CHECKING:
    from core.session.port import SessionPort

__all__ = ["EvoKernelApp", "TaskCheck", "untrusted_pass_as_checking"]

THEMES_DIR = Path(__file__).resolve().parent.parent / "themes"


def untrusted_pass_as_checking(event: Any) -> Any:
    """A live `gate` event's "pass" may be the candidate's own progress report (the verifier marks a
    phase passed when the child moves on); the pane shows "checking" until the `verification` event,
    the parent's verdict, sets every gate."""
    kind, data, step = event_parts(event)
    if kind == "gate" and data.get("status") == "pass":
        return {"kind": kind, "data": {**data, "status": "checking"}, "step": step}
    return event


class EvoKernelApp(App[None]):
    """Live mode drives a session; replay mode (given `replay_events`) only reads a recording.

    Its concerns are collaborators it holds, each in its own file: `self.calls` (`SessionCalls`: the session
    calls in workers and the commands that start them, evokernel_tui/session_calls.py), `self.checks`
    (`TaskCheckRunner`, evokernel_tui/task_checks.py), `self.edits` (`KernelEditor`: kernel pane, $EDITOR and
    the file watchers, evokernel_tui/kernel_edits.py) and `self.actions` (`AppActions`: opening a task,
    saving, the versions and task views, quitting, the palette, evokernel_tui/app_actions.py). Here are
    start-up, attaching a session, taking its events into the view, the themes, and the `action_*` and
    message handlers Textual calls by name, each handing over to its collaborator."""

    TITLE = "EvoKernel"
    CSS_PATH: ClassVar[list[str | PurePath]] = [THEMES_DIR / "base.tcss", *(THEMES_DIR / f"{name}.tcss" for name in THEME_NAMES)]
    BINDINGS = [
        Binding("t", "switch_theme", "Theme", show=False),
        Binding("q", "quit", "Quit"),
    ]

    @dataclass
    class SessionEvent(Message):
        """One recorded session event, posted from the session's thread (`_on_event`)."""

        event: Any  # an events.jsonl record or a typed Event: `view.apply_event` reads both

    @dataclass
    class Token(Message):
        """A streamed piece of the model's reply."""

        chunk: str

    @dataclass
    class KernelFileChanged(Message):
        """The watched kernel file changed on disk (the person's own editor)."""

        text: str
        #: the file that changed when it is the person's own (`tui --watch FILE`); None: the session's copy
        path: Path | None = None

    @dataclass
    class SessionReady(Message):
        """The opening worker has the session: attach it."""

        session: SessionPort  # a core Session, or a test's stand-in with the same attributes

    @dataclass
    class CallFinished(Message):
        """A session call's worker is done (`error`: its one line when it failed)."""

        label: str
        error: str | None

    @dataclass
    class CheckFinished(Message):
        """One task check finished for `session`: what it found, or the problem that stops session calls."""

        session: SessionPort
        name: str
        finding: str | None
        problem: str | None

    @dataclass
    class StarterVerdict(Message):
        """The starter's verdict from the background prebuild (not recorded), or why it could not be had."""

        session: SessionPort
        source: str
        result: Any  # a VerificationResult, or None with `error`
        error: str | None

    def __init__(
        self,
        session: SessionPort | None = None,
        *,
        open_session: Callable[[str | None], SessionPort] | None = None,
        task: str | None = None,
        replay_events: list[Any] | None = None,
        theme_name: str | None = None,
        watch_file: bool = True,
        debounce: float = 0.3,
        prebuild_starter: bool = False,
        task_checks: Callable[[Any], Iterable[TaskCheck]] | None = None,
        starter: str | None = None,
        watch_path: Path | None = None,
    ) -> None:
        super().__init__()
        #: the starter kernel worked out from the task's source before the screen (manual mode): on screen
        #: and editable at the first paint; the session's own starter is the same text, so edits made
        #: before it attaches are kept
        self._starter = starter
        self.opening: str | None = None
        #: the open task's checks (`checks_done`, `checking`, `task_problem`, `prebuild_thread` read it)
        self.checks = TaskCheckRunner(self, task_checks, prebuild_starter)
        #: the person's edits and the watched kernel files
        self.edits = KernelEditor(self, watch_file, watch_path, debounce)
        #: the session calls (one at a time, in workers)
        self.calls = SessionCalls(self)
        #: opening, saving, the views and quitting
        self.actions = AppActions(self)
        self.session = session
        self.view = SessionView()
        self._open_session = open_session
        self._initial_task = task
        self._replay_events = replay_events
        self._theme_name = theme_name or load_theme_name()
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

    @work(thread=True, exclusive=True, group="open", name="open session")
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

    def attach(self, session: SessionPort) -> None:
        """Show `session`: fold its recorded events, then start watching its kernel file."""
        self.edits.stop()
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
        self.edits.attach(session)
        self.checks.start(session)

    # ----- the task checks (evokernel_tui/task_checks.py) ------------------------------------------------

    @property
    def checks_done(self) -> threading.Event:
        """Set while no task check runs: session calls wait on it."""
        return self.checks.done

    @property
    def checking(self) -> str | None:
        """The task check running now, if any."""
        return self.checks.checking

    @property
    def task_problem(self) -> str | None:
        """What a task check found that stops session calls, if anything."""
        return self.checks.problem

    @property
    def prebuild_thread(self) -> Any:
        """The starter's background verification (`prebuild_starter=True`), once started."""
        return self.checks.prebuild_thread

    def on_evo_kernel_app_check_finished(self, message: CheckFinished) -> None:
        self.checks.finished(message)

    def on_evo_kernel_app_starter_verdict(self, message: StarterVerdict) -> None:
        self.checks.starter_verdict(message)

    # ----- the person's edits (evokernel_tui/kernel_edits.py) ---------------------------------------------

    def submit_edit(self, source: str, origin: str) -> bool:
        """Verify `source` as the person's edit (`KernelEditor.submit`)."""
        return self.edits.submit(source, origin)

    def on_kernel_pane_submitted(self, message: KernelPane.Submitted) -> None:
        self.edits.submit(message.source, "the kernel pane")

    def action_edit_external(self) -> None:
        self.edits.edit_external()

    def on_evo_kernel_app_kernel_file_changed(self, message: KernelFileChanged) -> None:
        self.edits.file_changed(message)

    def on_unmount(self) -> None:
        self.edits.stop()

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
        if self.session is not None:
            self.edits.note_own_write(self.view.source)
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

    # ----- session calls (evokernel_tui/session_calls.py) ---------------------------------------------

    @property
    def running(self) -> str | None:
        """The session call running now, if any."""
        return self.calls.running

    def busy_with(self) -> str | None:
        """What is running (this app's call, or a step of the session started elsewhere), if anything."""
        return self.calls.busy_with()

    def on_evo_kernel_app_call_finished(self, message: CallFinished) -> None:
        self.calls.finished(message)
        self.edits.take_deferred()  # a save made while the call ran is verified now

    def action_step(self) -> None:
        self.calls.step()

    def action_run_steps(self) -> None:
        self.calls.ask_run_steps()

    def action_pause(self) -> None:
        self.calls.pause()

    def action_accept(self) -> None:
        self.calls.accept()

    def action_reject(self) -> None:
        self.calls.reject()

    def action_reverify(self) -> None:
        self.calls.reverify()

    def action_switch_stage(self) -> None:
        self.calls.switch_stage()

    # ----- the other actions (evokernel_tui/app_actions.py) ------------------------------------------

    def can_open_tasks(self) -> bool:
        """Whether this app was given a way to open another task (`open_session`)."""
        return self._open_session is not None

    def is_replay(self) -> bool:
        return self._replay_events is not None

    def action_open_task(self) -> None:
        self.actions.open_task()

    def action_export(self) -> None:
        self.actions.export()

    def action_show_versions(self) -> None:
        self.actions.show_versions()

    def action_show_task(self) -> None:
        self.actions.show_task()

    def action_zoom(self) -> None:
        self.main_screen.action_zoom()

    async def action_quit(self) -> None:
        """Quit; with a refinement still pending, ask first (`AppActions.quit`)."""
        self.actions.quit()

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield from self.actions.system_commands(screen, lambda name: getattr(self, f"action_{name}"))

    # ----- themes -----------------------------------------------------------------------------------

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


def _task_name(session: SessionPort) -> str:
    task = getattr(session, "task", None)
    return str(getattr(task, "name", task) or "")


