"""The checks of an opened task that run after the first paint, each in its own named worker.

A mixin of `EvoKernelApp` (evokernel_tui/app.py): the probe, the memory estimate and the degeneracy check
run one after another once a session is attached; session calls wait for them (`checks_done`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple


def prebuild_starter(session: Any, on_done: Callable[[str, Any, str | None], None] | None = None) -> Any:
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


def _degenerate(session: Any) -> list[str]:
    """The trivial answers the session found to pass its task (`core.verifying.mark_degenerate`)."""
    extra = getattr(getattr(session, "verify_config", None), "extra", None) or {}
    return list(extra.get("degenerate") or [])


#: the Gates title while the starter is verified in the background after the task checks
STARTER_NOTE = "checking the starter in the background (a first build can take a minute)…"


class TaskChecks:
    """Runs `EvoKernelApp`'s task checks (`task_checks`) and reports what they find."""

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
            self.prebuild_thread = prebuild_starter(
                session, lambda source, result, error: self.post_message(
                    self.StarterVerdict(session, source, result, error)))
            # the gates say what they wait for (a first build can take a minute), not a bare "waiting"
            self.view.task_note = STARTER_NOTE
            self._show()

    def on_evo_kernel_app_starter_verdict(self, message: Any) -> None:
        """The starter's verdict from the prebuild: shown in the Gates pane while nothing else has been
        verified and the starter is still the session's kernel (never recorded: v records it)."""
        session = self.session
        if self.view.task_note == STARTER_NOTE:
            self.view.task_note = ""
            self._show()
        if message.session is not session or self.running or getattr(session, "history", None):
            return
        if getattr(session, "current_source", None) != message.source:
            return
        if any(g.state != "waiting" for g in self.view.gates.values()):
            return
        if message.error:
            self.view.task_note = f"⚠ the starter could not be verified: {message.error}"
            self.activity.note(f"starter: could not be verified: {message.error}")
        else:
            from evokernel_tui.view import apply_starter_verdict

            self.activity.note(apply_starter_verdict(self.view, message.result))
        self._show()

    def _check_worker(self, session: Any, check: TaskCheck) -> None:
        finding = problem = None
        try:
            finding = check.run()
        except Exception as exc:  # the check's one line, shown in the panes
            problem = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        self.post_message(self.CheckFinished(session, check.name, finding, problem))

    def on_evo_kernel_app_check_finished(self, message: Any) -> None:
        if message.session is not self.session:
            return  # another task was opened meanwhile
        if message.problem:
            self.task_problem = message.problem
            self.view.task_note = f"⚠ task check failed ({message.name}): {message.problem}"
            self.view.blocked = f"not run: the task check ({message.name}) failed"
            self._report(f"Task check ({message.name}) found a problem: {message.problem}")
        else:
            self.activity.note(f"task check ({message.name}): {message.finding}")
        self.view.degenerate = _degenerate(self.session) or self.view.degenerate
        self._next_check()
        self._show()  # the title tells what the checks found (or that they are done), with no key pressed
