"""What the app may use of a session: `SessionPort` (issue 32).

The app holds a session (a `Session`, or a test's stand-in with the same members) and starts its actions
in a worker. This protocol names those members, so the app can be typed against it rather than `Any`,
and `ACTIONS` names the actions it may start by name (`_plain_call("submit_human_edit", source)`): a
test checks that each is a `Session` method taking `on_event`, and the type checker checks below that
`Session` is a `SessionPort`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from core.events import Event
from core.session.records import EventSink

if TYPE_CHECKING:
    from core.session.machine import Session

#: The session actions the app starts by name; each is `Session.<name>(*args, on_event=...)`.
Action = Literal["accept_pending", "reject_pending", "reverify", "set_stage", "submit_human_edit"]
ACTIONS: tuple[Action, ...] = ("accept_pending", "reject_pending", "reverify", "set_stage", "submit_human_edit")


class SessionPort(Protocol):
    """The members of a session the app reads and calls."""

    id: str
    backend: str
    path: Path
    verify_config: Any  # a verifier.VerifyConfig or None (the app does not import the verifier)

    # read-only views of the folded state
    @property
    def stage(self) -> Any: ...  # "draft", "refine" or "done"
    @property
    def pending(self) -> Any: ...  # the Attempt awaiting accept/reject, or None
    @property
    def best(self) -> Any: ...  # the accepted Attempt, or None
    @property
    def history(self) -> Any: ...  # every Attempt, oldest first
    @property
    def current_source(self) -> Any: ...  # the kernel on screen
    @property
    def manual(self) -> bool: ...  # no model configured
    @property
    def kernel_path(self) -> Path: ...

    # actions (each appends events and reports them to `on_event`)
    def step(self, on_event: EventSink | None = None, on_token: Callable[[str], None] | None = None) -> list[Event]: ...
    def run(self, on_event: EventSink | None = None, on_token: Callable[[str], None] | None = None) -> list[Event]: ...
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
