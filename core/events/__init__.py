"""Session events, their typed payloads, the one fold over them, and the append-only log.

The package, by concern: `payloads` (the typed payload dataclasses and the `Event` record), `fold`
(`apply`/`fold` and the `SessionState` they build: the only session state), `log` (`events.jsonl`,
append-only, flushed per event, and its reader) and `text` (one-line descriptions for the command
line). Everything is re-exported here: `from core.events import X` works for all of them.
"""

from __future__ import annotations

import os  # noqa: F401  (tests reach `core.events.os.fsync` through this module)

from core.events.fold import Attempt, SessionState, apply, fold, speed_text, state_line
from core.events.log import EventLog, read_events
from core.events.payloads import (
    EVENT_KINDS,
    PAYLOADS,
    TOLD_PAYLOADS,
    Accepted,
    BudgetChanged,
    ErrorEvent,
    Event,
    GateEvent,
    GateProgress,
    HumanEdit,
    Insight,
    Kernel,
    MemoryAdded,
    MemoryMarked,
    ModelErrorEvent,
    ModelReply,
    NeedsHuman,
    Payload,
    PendingRefinement,
    Prompt,
    QUpdate,
    Rejected,
    Retrieved,
    RetrievedItem,
    Reward,
    SessionStarted,
    StageChanged,
    Starter,
    StepDone,
    StepResumed,
    UnknownPayload,
    Verification,
    as_event,
)
from core.events.text import GATE_WORK, describe_event, gate_phase, phase_text

__all__ = [
    "EVENT_KINDS", "GATE_WORK", "PAYLOADS", "TOLD_PAYLOADS", "Accepted", "Attempt", "BudgetChanged", "ErrorEvent", "Event", "EventLog",
    "GateEvent", "GateProgress", "HumanEdit", "Insight", "Kernel", "MemoryAdded", "MemoryMarked", "ModelErrorEvent", "ModelReply",
    "NeedsHuman", "Payload", "PendingRefinement", "Prompt", "QUpdate", "Rejected", "Retrieved", "RetrievedItem",
    "Reward", "SessionStarted", "SessionState", "StageChanged", "Starter", "StepDone", "StepResumed",
    "UnknownPayload", "Verification", "apply", "as_event", "describe_event", "fold", "gate_phase", "phase_text", "read_events", "speed_text",
    "state_line",
]
