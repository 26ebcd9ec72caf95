"""What the app may use of a session: `SessionPort` (issue 32).

The app holds a session (a `Session`, or a test's stand-in with the same members) and starts its actions
in a worker (`evokernel_tui/session_calls.py`), each by its own method below: no action is looked up by
name. The type checker holds the app to this protocol (the app's session is a `SessionPort`) and `Session`
to it (`_a_session_is_a_port` below fails to check when `Session` stops providing what the app uses).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from core.events import Attempt, Event
from core.session.records import EventSink, SessionMeta, VerifyFn

if TYPE_CHECKING:
    from core.session.machine import Session
    from core.tasks import Task
    from verifier import VerifyConfig


class SessionPort(Protocol):
    """The members of a session the app reads and calls."""

    #: the verifier and its settings (the app's task checks set the probed settings once they have run)
    verify_fn: VerifyFn
    verify_config: VerifyConfig | None

    # what the session is
    @property
    def id(self) -> str: ...
    @property
    def backend(self) -> str: ...
    @property
    def path(self) -> Path: ...
    @property
    def meta(self) -> SessionMeta: ...
    @property
    def task(self) -> Task: ...
    @property
    def manual(self) -> bool: ...  # no model configured: the person writes every kernel
    @property
    def kernel_path(self) -> Path: ...  # the file the app watches: the kernel on screen

    # read-only views of the folded state
    @property
    def stage(self) -> str: ...  # "draft", "refine" or "done"
    @property
    def pending(self) -> Attempt | None: ...  # the refinement awaiting accept/reject
    @property
    def best(self) -> Attempt | None: ...  # the accepted kernel
    @property
    def history(self) -> Sequence[Attempt]: ...  # every kernel version, oldest first
    @property
    def current_source(self) -> str: ...  # the kernel on screen
    @property
    def busy(self) -> bool: ...  # an action is running (from any thread)

    # actions (each appends events and reports them to `on_event`)
    def step(self, on_event: EventSink | None = None, on_token: Callable[[str], None] | None = None) -> list[Event]: ...
    def submit_human_edit(self, source: str, on_event: EventSink | None = None) -> list[Event]: ...
    def mark_used(self, item_id: str, used: bool = True, on_event: EventSink | None = None) -> list[Event]: ...
    def accept_pending(self, on_event: EventSink | None = None) -> list[Event]: ...
    def reject_pending(self, on_event: EventSink | None = None) -> list[Event]: ...
    def reverify(self, version: int | None = None, on_event: EventSink | None = None) -> list[Event]: ...
    def set_stage(self, stage: str, on_event: EventSink | None = None) -> list[Event]: ...
    def close(self) -> None: ...


if TYPE_CHECKING:

    def _a_session_is_a_port(session: Session) -> SessionPort:
        return session  # mypy fails here when Session stops providing what the app uses
