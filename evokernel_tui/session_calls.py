"""Session calls (step, verify, accept, ...) in thread workers, one at a time; a second is refused, never queued.

A mixin of `EvoKernelApp` (evokernel_tui/app.py): each call runs in the `session` worker group and
reports back with `CallFinished`; events reach the app once each, through `_on_event`, as `SessionEvent` messages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from textual import work

from evokernel_tui.view import source_of

if TYPE_CHECKING:
    from core.session.port import Action


def _version_text(attempt: Any, what: str) -> str:
    """`the best kernel v3 (20.4 ms)` from an `Attempt` (or anything with version and latency_ms)."""
    version = getattr(attempt, "version", None)
    ms = getattr(attempt, "latency_ms", None)
    return f"{what}" + (f" v{version}" if version is not None else "") + (f" ({ms:.4g} ms)" if ms else "")


def _pending_text(pending: Any) -> str:
    return _version_text(pending, "the refinement")


class SessionCalls:
    """Starts, refuses and finishes `EvoKernelApp`'s session calls."""

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

    @work(thread=True, group="session", exit_on_error=False, name="session call")
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

    def on_evo_kernel_app_call_finished(self, message: Any) -> None:
        self.running = None
        self._pause_requested = False
        self.activity.end_stream()
        if message.error:
            self._report(message.error)
        self._settled()
        self.edits.take_deferred()

    def _model_step(self, session: Any) -> None:
        best = getattr(session, "best", None)
        if str(session.stage) == "refine" and best is not None:
            self.call_from_thread(self.activity.note, f"refining from {_version_text(best, 'the best kernel')}")
        session.step(on_event=self._on_event, on_token=lambda chunk: self.post_message(self.Token(chunk)))

    def _plain_call(self, method: Action, *args: Any) -> Callable[[Any], None]:
        """A worker body calling the session action `method` (one of `core.session.port.ACTIONS`)."""

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

    def _pending_blocks(self, what: str) -> bool:
        """A pending refinement is kept until the person decides: no step may replace it meanwhile."""
        pending = self.session.pending if self.session is not None else None
        if source_of(pending) is None:
            return False
        self._report(f"{what} refused: {_pending_text(pending)} is pending; accept (a) or reject (r) it first.",
                     "warning")
        return True

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
