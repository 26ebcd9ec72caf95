"""The checks of an opened task that run after the first paint, each in its own named worker.

`TaskCheckRunner` is a collaborator `EvoKernelApp` (evokernel_tui/app.py) holds, not a mixin: the probe, the
memory estimate and the degeneracy check run one after another once a session is attached; session calls
wait for them (`done`). Everything it needs from the app is named in `ChecksHost`, so this file reads alone.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

if TYPE_CHECKING:
    from core.session.port import SessionPort


def prebuild_starter(session: SessionPort, on_done: Callable[[str, Any, str | None], None] | None = None) -> Any:
    """Verify the starter kernel on a daemon thread, recording nothing: its bindings (the signature
    the person's edits of it keep), its build and its verdict are cached by the time they press v or
    ctrl+s. `on_done(source, result, error)` gets the verdict (or the one-line reason it could not be
    had), so the Gates pane shows it as soon as it is ready instead of `waiting` for a key."""
    import threading

    meta = getattr(session, "meta", None) or {}
    reference = (meta.get("task") or {}).get("source")
    source = session.current_source
    if not reference or not source:
        return None

    def run() -> None:
        result = error = None
        try:
            result = session.verify_fn(reference, source, backend=session.backend, config=session.verify_config)
        except Exception as exc:  # the person's own verification then says it again, and pays the cost
            error = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        if on_done is not None:
            try:
                on_done(source, result, error)
            except Exception:  # the app has gone (quit while the starter built)
                pass

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


def _degenerate(session: SessionPort | None) -> list[str]:
    """The trivial answers the session found to pass its task (`core.verifying.mark_degenerate`)."""
    return list(getattr(getattr(session, "verify_config", None), "degenerate", None) or [])


#: the Gates title while the starter is verified in the background after the task checks
STARTER_NOTE = "checking the starter in the background (a first build can take a minute)…"


class ChecksHost(Protocol):
    """What the task checks use of the app: the open session and its view, the panes, Textual's workers and
    messages, and the two message types the checks post back to the app's thread."""

    session: SessionPort | None
    view: Any

    @property
    def running(self) -> str | None: ...

    # the message types (nested classes of the app)
    @property
    def CheckFinished(self) -> Any: ...
    @property
    def StarterVerdict(self) -> Any: ...

    @property
    def activity(self) -> Any: ...

    def _show(self) -> None: ...

    def _report(self, text: str, severity: str = "error") -> None: ...

    def run_worker(self, work: Any, name: str | None = "", group: str = "default", *args: Any, **kwargs: Any) -> Any: ...

    def post_message(self, message: Any) -> bool: ...


class TaskCheckRunner:
    """Runs the task checks of the app's open session (`checks_for(session)`, one after another, each in its
    own worker) and reports what they find: `checking` (the one running), `problem` (the first one found,
    which stops session calls), `done` (set while none runs: session calls wait on it), and, when
    `prebuild` is on, the starter's background verification (`prebuild_thread`)."""

    def __init__(self, host: ChecksHost, checks_for: Callable[[Any], Iterable[TaskCheck]] | None = None,
                 prebuild: bool = False) -> None:
        self._host = host
        self._checks_for = checks_for
        self._prebuild = prebuild
        self._pending: list[TaskCheck] = []
        self.done = threading.Event()
        self.done.set()
        self.checking: str | None = None
        self.problem: str | None = None
        self.prebuild_thread: Any = None

    def start(self, session: SessionPort) -> None:
        """A session was attached: forget the last task's problem and run its checks."""
        self.problem = None
        self._pending = list(self._checks_for(session)) if self._checks_for is not None else []
        if self._pending:
            self.done.clear()
        self.next()

    def next(self) -> None:
        """Start the next task check in its own worker; when none is left (or one found a problem), let
        the waiting session calls go and prebuild the starter."""
        host = self._host
        session = host.session
        if self._pending and self.problem is None and session is not None:
            check = self._pending.pop(0)
            self.checking = check.name
            host.view.task_note = f"checking the task ({check.name})…"
            host._show()
            host.run_worker(lambda: self._worker(session, check), name=f"task check: {check.name}",
                            group="task-checks", thread=True, exit_on_error=False)
            return
        self._pending = []
        self.checking = None
        self.done.set()
        if session is None:
            return
        if self.problem is None:
            host.view.task_note = ""
            host._show()
        if (self._prebuild and self.problem is None and session.manual
                and not getattr(session, "history", None)):

            def verdict(source: str, result: Any, error: str | None) -> None:
                host.post_message(host.StarterVerdict(session, source, result, error))

            self.prebuild_thread = prebuild_starter(session, verdict)
            # the gates say what they wait for (a first build can take a minute), not a bare "waiting"
            host.view.task_note = STARTER_NOTE
            host._show()

    def starter_verdict(self, message: Any) -> None:
        """The starter's verdict from the prebuild: shown in the Gates pane while nothing else has been
        verified and the starter is still the session's kernel (never recorded: v records it)."""
        host = self._host
        session = host.session
        if host.view.task_note == STARTER_NOTE:
            host.view.task_note = ""
            host._show()
        if message.session is not session or host.running or getattr(session, "history", None):
            return
        if getattr(session, "current_source", None) != message.source:
            return
        if any(g.state != "waiting" for g in host.view.gates.values()):
            return
        if message.error:
            host.view.task_note = f"⚠ the starter could not be verified: {message.error}"
            host.activity.note(f"starter: could not be verified: {message.error}")
        else:
            from evokernel_tui.view import apply_starter_verdict

            host.activity.note(apply_starter_verdict(host.view, message.result))
        host._show()

    def _worker(self, session: SessionPort, check: TaskCheck) -> None:
        finding = problem = None
        try:
            finding = check.run()
        except Exception as exc:  # the check's one line, shown in the panes
            problem = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        self._host.post_message(self._host.CheckFinished(session, check.name, finding, problem))

    def finished(self, message: Any) -> None:
        """One check's `CheckFinished`, on the app's thread: record what it found, then start the next."""
        host = self._host
        if message.session is not host.session:
            return  # another task was opened meanwhile
        if message.problem:
            self.problem = message.problem
            host.view.task_note = f"⚠ task check failed ({message.name}): {message.problem}"
            host.view.blocked = f"not run: the task check ({message.name}) failed"
            host._report(f"Task check ({message.name}) found a problem: {message.problem}")
        else:
            host.activity.note(f"task check ({message.name}): {message.finding}")
        host.view.degenerate = _degenerate(host.session) or host.view.degenerate
        self.next()
        host._show()  # the title tells what the checks found (or that they are done), with no key pressed
