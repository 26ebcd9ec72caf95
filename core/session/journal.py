"""A session's journal: `events.jsonl`, the state folded from it, and the folder lock that lets one process write.

`Journal` is the one writer of a session's state. `emit` appends a typed payload (fsynced) to the log and
folds it into `state` with `core.events.apply`, the same pure fold the app's view and the command line use;
`tell` reports what is not recorded (a running gate's progress). The session's collaborators (`Learner`,
`Stepper`) and the `Session` itself write only through it, so a reopened session (`fold` of the same log) is
exactly the session that was running. It knows nothing of the session that holds it, so it holds no
reference back (a session dropped without `close()` is collected at once and its lock released).
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from core.events import PAYLOADS, TOLD_PAYLOADS, Event, EventLog, Payload, SessionState, apply
from core.fsutil import FolderLock, LockHeld, os_error_text
from core.session.folder import _atomic_write
from core.session.records import EventSink, SessionError


class Journal:
    """The event log of the session folder `path` (named `session_id` in messages) and its fold."""

    def __init__(self, path: Path, session_id: str) -> None:
        self.path = path
        self.session_id = session_id
        self.log = EventLog(path / "events.jsonl")
        #: everything folded from the events (`core.events.apply`); replaced, never changed in place
        self.state = SessionState()
        #: one writer per session folder across processes (see `FolderLock`)
        self.folder_lock = FolderLock(path)
        self._collect: list[Event] | None = None
        self._on_event: EventSink | None = None

    @property
    def kernel_path(self) -> Path:
        """The file the app watches: always the kernel currently on screen."""
        return self.path / "current_kernel.py"

    def take_lock(self, quiet_if_read_only: bool = False) -> None:
        """Become the folder's one writer, or say (SessionError) which process is."""
        try:
            self.folder_lock.acquire()
        except LockHeld as exc:
            raise SessionError(f"session {self.session_id} is open in {exc.holder}; close it there first "
                               f"(or wait for it to finish)") from None
        except OSError as exc:
            if quiet_if_read_only and exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
                return  # a read-only folder can still be read; the first write says why it cannot
            raise SessionError(f"cannot lock session {self.session_id} in {self.path}: "
                               f"{os_error_text(exc)}") from None

    def next_step(self) -> int:
        """Number a new step: the events that follow carry it."""
        self.state = replace(self.state, step=self.state.step + 1)
        return self.state.step

    def emit(self, payload: Payload) -> Event:
        """Record an event: append it (fsynced) to the log, fold it into `state` with `core.events.apply`,
        keep current_kernel.py equal to the kernel on screen, then tell the caller (once: `on_event`
        while a caller listens, else the list an action returns).

        Only typed payloads are written. The JSON form is the payload's `to_data()` read back through
        its type (so a recording holds exactly what a reader of that type sees); a payload of a kind
        `core.events` does not register, or one carrying keys its type has no field for, is refused."""
        kind = payload.KIND
        typed = PAYLOADS.get(kind)
        if typed is None or not isinstance(payload, typed):
            raise ValueError(f"no event payload type for {kind!r}: add it to core.events")
        if payload.extra:  # every key written has a typed field: readers never meet an untyped one
            raise ValueError(f"{typed.__name__} has no field for {sorted(payload.extra)}")
        event = Event(kind, typed.from_data(payload.to_data()).to_data(), step=self.state.step)
        if not self.folder_lock.held:
            self.take_lock()
        try:
            self.log.append(event)
        except OSError as exc:
            raise SessionError(f"cannot write to session {self.session_id} ({self.log.path}): "
                               f"{os_error_text(exc)}; then `evokernel resume {self.session_id}`") from None
        before = self.state.current_source
        self.state = apply(self.state, event)
        if kind in ("kernel", "accepted", "rejected", "starter") or self.state.current_source != before:
            _atomic_write(self.kernel_path, self.state.current_source)
        if self._collect is not None:
            self._collect.append(event)
        if self._on_event is not None:
            self._on_event(event)
        return event

    def tell(self, payload: Payload) -> None:
        """Tell the listener (`on_event`) something that is not recorded (`core.events.TOLD_PAYLOADS`: a
        running gate's progress): no log line, no fold, not in the list an action returns."""
        if type(payload) is not TOLD_PAYLOADS.get(payload.KIND):
            raise ValueError(f"{payload.KIND!r} is recorded, not told: use Journal.emit")
        if self._on_event is not None:
            self._on_event(Event(payload.KIND, payload.to_data(), step=self.state.step))

    @contextmanager
    def collecting(self, on_event: EventSink | None) -> Iterator[list[Event]]:
        """While an action runs: the events it emits, in a list it returns, each also told to `on_event`."""
        collected: list[Event] = []
        self._collect, self._on_event = collected, on_event
        try:
            yield collected
        finally:
            self._collect, self._on_event = None, None
