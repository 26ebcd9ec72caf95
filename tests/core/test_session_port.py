"""`SessionPort`: what the app uses of a session, kept in step with `Session` (issue 32).

The type checker holds `Session` to the port (core/session/port.py); these tests hold the running code to
it: a real session has every member, and the app's session calls reach the session through the port's own
methods (no action looked up by name), each reporting its events to the app."""

from __future__ import annotations

import inspect
from types import SimpleNamespace
from typing import Any

import pytest

from core.session import Session
from core.session.port import SessionPort
from core.tasks import load_task
from evokernel_tui.session_calls import SessionCalls


def _port_members() -> set[str]:
    return {n for n in dir(SessionPort) if not n.startswith("_")} | set(SessionPort.__annotations__)


def test_a_real_session_has_every_member_of_the_port(tmp_path):
    session = Session.create(load_task("relu"), model=None, root=tmp_path)
    try:
        missing = sorted(n for n in _port_members() if not hasattr(session, n))
        assert not missing, missing
        for name in ("step", "submit_human_edit", "mark_used", "accept_pending", "reject_pending", "reverify",
                     "set_stage"):
            assert "on_event" in inspect.signature(getattr(session, name)).parameters, name
        session.verify_config = None  # the app's task checks replace the settings of an open session
        assert session.verify_config is None and session.verifier.config is None
    finally:
        session.close()


class _Recorder:
    """A stand-in session that records which port method each call used, and with which arguments."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.stage, self.pending, self.best, self.history, self.busy, self.manual = "refine", None, None, [], False, False
        self.current_source = "kernel"

    def __getattr__(self, name: str) -> Any:
        if name not in _port_members():
            raise AttributeError(f"{name} is not a member of SessionPort")

        def method(*args: Any, **kwargs: Any) -> list[Any]:
            self.calls.append((name, args, kwargs))
            return []

        return method


class _Host:
    """The app as `SessionCalls` sees it (`CallsHost`), running each worker at once on this thread."""

    SessionEvent = CallFinished = Token = staticmethod(lambda *a: a)

    def __init__(self, session: _Recorder) -> None:
        import threading

        self.session, self.opening, self.reports, self.posted = session, None, [], []
        self.checks_done, self.checking, self.task_problem = threading.Event(), None, None
        self.checks_done.set()
        self.activity = SimpleNamespace(note=lambda text: None, end_stream=lambda: None)

    def _report(self, text: str, severity: str = "error") -> None:
        self.reports.append(text)

    def _show(self) -> None: ...
    def _settled(self) -> None: ...
    def submit_edit(self, source: str, origin: str) -> bool: return False
    def push_screen(self, screen: Any, callback: Any = None) -> None: ...
    def call_from_thread(self, callback: Any, *args: Any) -> None: callback(*args)
    def post_message(self, message: Any) -> bool:
        self.posted.append(message)
        return True

    def run_worker(self, work: Any, **kwargs: Any) -> None:
        work()


@pytest.mark.parametrize("command, method, args", [
    (lambda c: c.accept(), "accept_pending", ()),
    (lambda c: c.reject(), "reject_pending", ()),
    (lambda c: c.reverify(), "reverify", ()),
    (lambda c: c.switch_stage(), "set_stage", ("draft",)),
    (lambda c: c.submit_human_edit("verify your edit", "new kernel"), "submit_human_edit", ("new kernel",)),
    (lambda c: c.step(), "step", ()),
])
def test_each_session_call_uses_its_port_method_and_reports_events_to_the_app(command, method, args):
    session = _Recorder()
    session.history = ["v1"]  # reverify has something recorded to verify
    session.pending = SimpleNamespace(source="faster", version=2, latency_ms=1.0)
    if method == "step":
        session.pending = None
    host = _Host(session)
    calls = SessionCalls(host)  # type: ignore[arg-type]  # a stand-in host
    command(calls)
    assert [(name, a) for name, a, _ in session.calls] == [(method, args)], host.reports
    on_event = session.calls[0][2]["on_event"]
    assert on_event == calls.on_event
    on_event("an event")
    assert host.posted[-1] == ("an event",), "the session's events reach the app as SessionEvent messages"
    finished = [m for m in host.posted if m[0] != "an event"]
    assert finished and finished[0][1] is None, f"the call failed: {finished}"


def test_a_second_call_while_one_runs_is_refused_not_queued():
    session = _Recorder()
    host = _Host(session)
    calls = SessionCalls(host)  # type: ignore[arg-type]
    host.run_worker = lambda work, **kw: None  # the first call's worker is still running
    assert calls.start("step", lambda s: s.step()) is True
    assert calls.start("reverify", lambda s: s.reverify()) is False
    assert host.reports == ["Refused: reverify not started while step is still running."]
    assert session.calls == []
