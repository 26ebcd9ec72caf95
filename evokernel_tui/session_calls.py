"""Session calls (step, verify, accept, ...) in thread workers, one at a time; a second is refused, never queued.

`SessionCalls` is a collaborator `EvoKernelApp` (evokernel_tui/app.py) holds, not a mixin: it starts each call
in the `session` worker group, refuses one while another runs, and reports back with `CallFinished`; the
session's events reach the app once each, through `on_event`, as `SessionEvent` messages. It calls the
session through `core.session.port.SessionPort`, each action by its own typed method. What it uses of the
app is named in `CallsHost`, so this file reads alone.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from evokernel_tui.screens.prompts import NumberPrompt
from evokernel_tui.view import source_of

if TYPE_CHECKING:
    from core.events import Event
    from core.session.port import SessionPort

#: the most steps one `run` may ask for
MAX_RUN_STEPS = 100

#: a worker body: what to do with the open session
Call = Callable[["SessionPort"], object]


def _version_text(attempt: Any, what: str) -> str:
    """`the best kernel v3 (20.4 ms)` from an `Attempt` (or anything with version and latency_ms)."""
    version = getattr(attempt, "version", None)
    ms = getattr(attempt, "latency_ms", None)
    return f"{what}" + (f" v{version}" if version is not None else "") + (f" ({ms:.4g} ms)" if ms else "")


def _pending_text(pending: Any) -> str:
    return _version_text(pending, "the refinement")


class CallsHost(Protocol):
    """What the session calls use of the app: the open session (and the task being opened), the panes, the
    task checks' state, the person's edits, Textual's workers, screens and messages, and the message types
    the calls post back to the app's thread."""

    session: SessionPort | None
    opening: str | None

    # the message types (nested classes of the app)
    @property
    def SessionEvent(self) -> Any: ...
    @property
    def Token(self) -> Any: ...
    @property
    def CallFinished(self) -> Any: ...

    @property
    def activity(self) -> Any: ...
    @property
    def checks_done(self) -> threading.Event: ...
    @property
    def checking(self) -> str | None: ...
    @property
    def task_problem(self) -> str | None: ...

    def _report(self, text: str, severity: str = "error") -> None: ...
    def _show(self) -> None: ...
    def _settled(self) -> None: ...
    def submit_edit(self, source: str, origin: str) -> bool: ...
    def push_screen(self, screen: Any, callback: Any = None) -> Any: ...
    def run_worker(self, work: Any, name: str | None = "", group: str = "default", *args: Any, **kwargs: Any) -> Any: ...
    def call_from_thread(self, callback: Any, *args: Any, **kwargs: Any) -> Any: ...
    def post_message(self, message: Any) -> bool: ...


class SessionCalls:
    """Starts, refuses and finishes the app's session calls. `running`: the label of the call running now
    (None when none is); a run of several steps stops after the current one once `pause()` is asked."""

    def __init__(self, host: CallsHost) -> None:
        self._host = host
        self.running: str | None = None
        self._pause_requested = False

    # ----- the commands (keys and palette) that start a call ------------------------------------------

    def step(self) -> None:
        host = self._host
        if not self._needs_model("A step") or self._pending_blocks("A step"):
            return
        if host.session is not None and str(host.session.stage) == "done":
            host._report("The session is done; switch stage (g) to keep working on it.", "warning")
            return
        self.start("step", self._model_step)

    def ask_run_steps(self) -> None:
        """Ask how many steps to run, then run them (`run_steps`)."""
        host = self._host
        if not self._needs_model("Running steps") or host.session is None or self._pending_blocks("Running steps"):
            return
        busy = self.busy_with()
        if busy:
            host._report(f"Refused: run not started while {busy} is still running.", "warning")
            return
        host.push_screen(NumberPrompt("Run how many steps?", 4, 1, MAX_RUN_STEPS), self.run_steps)

    def run_steps(self, count: int | None) -> None:
        """Run `count` model steps in one call; it stops early when a refinement is pending, the session is
        done or the person paused."""
        host = self._host
        if not count:
            return

        def run(session: SessionPort) -> None:
            for index in range(count):
                if self._pause_requested:
                    host.post_message(host.SessionEvent({"kind": "paused", "data": {}, "step": None}))
                    return
                if str(session.stage) == "done":
                    return
                self._model_step(session)
                if source_of(session.pending) is not None and index + 1 < count:
                    host.call_from_thread(
                        host.activity.note,
                        f"Run stopped after {index + 1} of {count} steps: {_pending_text(session.pending)} is "
                        "pending; accept (a) or reject (r) it, then run again.")
                    return
                if index + 1 < count:
                    host.call_from_thread(host._show)

        self.start(f"run {count} steps", run)

    def pause(self) -> None:
        host = self._host
        if self.running and self.running.startswith("run"):
            self._pause_requested = True
            host._report("Pausing after the current step.", "information")
        elif self.running:
            host._report(f"{self.running} cannot be paused midway; it will finish on its own.", "warning")
        else:
            host._report("Nothing is running.", "information")

    def accept(self) -> None:
        if self._no_pending():
            return
        self.start("accept", lambda s: s.accept_pending(on_event=self.on_event))

    def reject(self) -> None:
        if self._no_pending():
            return
        self.start("reject", lambda s: s.reject_pending(on_event=self.on_event))

    def reverify(self) -> None:
        s = self._host.session
        if s is not None and not getattr(s, "history", None) and s.current_source:
            # nothing recorded yet: the kernel on screen is the starter, so verify that
            self._host.submit_edit(s.current_source, "the starter kernel")
            return
        self.start("reverify", lambda s: s.reverify(on_event=self.on_event))

    def switch_stage(self) -> None:
        host = self._host
        if host.session is None:
            host._report("No session open: press o to open a task.", "warning")
            return
        target = "draft" if str(host.session.stage) == "refine" else "refine"
        self.start(f"switch to {target}", lambda s: s.set_stage(target, on_event=self.on_event))

    def submit_human_edit(self, label: str, source: str) -> bool:
        """Verify `source` as the person's edit (`KernelEditor` decides the label and what to note)."""
        return self.start(label, lambda s: s.submit_human_edit(source, on_event=self.on_event))

    def mark_memory_used(self, item_id: str, used: bool) -> None:
        """The person says a memory on screen helped (or not): only marked memories are credited for
        their next edit. Recorded as an event, so replay shows it too."""
        host = self._host
        s = host.session
        if s is None or not hasattr(s, "mark_used"):
            return
        try:
            s.mark_used(item_id, used, on_event=self.on_event)
        except Exception as exc:  # busy, or the memory is no longer on screen: one line
            host._report(f"Could not mark the memory: {exc}", "warning")

    # ----- starting, refusing and finishing a call --------------------------------------------------

    def busy_with(self) -> str | None:
        """What is running (a call of this app, or a step of the session started elsewhere), if anything."""
        if self.running:
            return self.running
        session = self._host.session
        if session is not None and getattr(session, "busy", False):
            return "a session step"
        return None

    def start(self, label: str, call: Call) -> bool:
        """Run `call(session)` in a worker unless one is running (then refuse, saying so)."""
        host = self._host
        if host.session is None:
            host._report(f"Still opening {host.opening}: try again in a moment." if host.opening else
                         "No session open: press o to open a task.", "warning")
            return False
        if host.task_problem is not None:
            host._report(f"Refused: {label} not started: {host.task_problem}", "warning")
            return False
        busy = self.busy_with()
        if busy:
            host._report(f"Refused: {label} not started while {busy} is still running.", "warning")
            return False
        self.running = label
        host._show()
        host.run_worker(lambda: self._worker(label, call), name="session call", group="session", thread=True,
                        exit_on_error=False)
        return True

    def _worker(self, label: str, call: Call) -> None:
        error = None
        try:
            self._wait_for_checks(label)
            session = self._host.session
            if session is None:
                raise RuntimeError("no session is open")
            call(session)
        except Exception as exc:  # shown as one line in the activity pane and a toast
            error = f"{label} failed: {exc}"
        self._host.post_message(self._host.CallFinished(label, error))

    def _wait_for_checks(self, label: str) -> None:
        """In a worker: hold a session call until the task checks are done (the probe decides how
        correctness is judged); a problem they found stops it with that line."""
        host = self._host
        if not host.checks_done.is_set():
            host.call_from_thread(host.activity.note, f"{label}: waiting for the task check ({host.checking}) "
                                  "to finish…")
            host.checks_done.wait()
        if host.task_problem is not None:
            raise RuntimeError(f"not run: {host.task_problem}")

    def finished(self, message: Any) -> None:
        """A call's `CallFinished`, on the app's thread: say how it ended and paint the settled state."""
        host = self._host
        self.running = None
        self._pause_requested = False
        host.activity.end_stream()
        if message.error:
            host._report(message.error)
        host._settled()

    def on_event(self, event: Event) -> None:
        """The session's `on_event`: each event arrives here once, as it is recorded (thread-safe); the
        list a session call returns holds the same events and is not read."""
        self._host.post_message(self._host.SessionEvent(event))

    # ----- helpers ----------------------------------------------------------------------------------

    def _model_step(self, session: SessionPort) -> None:
        host = self._host
        best = getattr(session, "best", None)
        if str(session.stage) == "refine" and best is not None:
            host.call_from_thread(host.activity.note, f"refining from {_version_text(best, 'the best kernel')}")

        def token(chunk: str) -> None:
            host.post_message(host.Token(chunk))

        session.step(on_event=self.on_event, on_token=token)

    def _needs_model(self, what: str) -> bool:
        host = self._host
        if host.session is not None and host.session.manual:
            host._report(
                f"{what} needs a model; none is configured (use --model, EVOKERNEL_MODEL or config.toml).", "warning"
            )
            return False
        return True

    def _pending_blocks(self, what: str) -> bool:
        """A pending refinement is kept until the person decides: no step may replace it meanwhile."""
        host = self._host
        pending = host.session.pending if host.session is not None else None
        if source_of(pending) is None:
            return False
        host._report(f"{what} refused: {_pending_text(pending)} is pending; accept (a) or reject (r) it first.",
                     "warning")
        return True

    def _no_pending(self) -> bool:
        session = self._host.session
        if session is not None and source_of(session.pending) is None:
            self._host._report("No refinement is pending.", "warning")
            return True
        return False
