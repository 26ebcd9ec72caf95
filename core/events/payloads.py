"""Typed event payloads and the `Event` record.

Every state change of a session is an `Event`. Its `data` is the JSON form stored in `events.jsonl`;
`event.payload` is the same data as a typed record (`Kernel`, `Accepted`, ...), read tolerantly
because a recording outlives the code that wrote it. A session writes only these payloads.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from verifier.result import VerificationResult

if TYPE_CHECKING:
    from memory.retrieval import Retrieved as Hit


@dataclass(kw_only=True)
class Payload:
    """Base of the typed event payloads; `extra` keeps keys this version does not know (round trip)."""

    KIND: ClassVar[str] = ""
    #: JSON key for a field whose Python name differs (`from` is a keyword).
    KEYS: ClassVar[dict[str, str]] = {}
    #: Fields left out of the JSON form while they are None.
    OMIT_NONE: ClassVar[tuple[str, ...]] = ()

    extra: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_data(cls, data: Mapping[str, object] | None) -> Payload:
        data = dict(data or {})
        kwargs: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name == "extra":
                continue
            key = cls.KEYS.get(f.name, f.name)
            if key in data:
                kwargs[f.name] = data.pop(key)
        obj = cls(**kwargs)
        obj.extra = data
        obj._normalise()
        return obj

    def _normalise(self) -> None:
        """Bring tolerantly read values to their types (overridden where a field needs it)."""

    def to_data(self) -> dict[str, object]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name == "extra":
                continue
            value = getattr(self, f.name)
            if value is None and f.name in self.OMIT_NONE:
                continue
            out[self.KEYS.get(f.name, f.name)] = _plain(value)
        return {**self.extra, **out}


def _plain(value: Any) -> Any:
    if isinstance(value, Payload):
        return value.to_data()
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


@dataclass(kw_only=True)
class SessionStarted(Payload):
    KIND = "session_started"
    task: str = ""
    backend: str = ""
    model: str | None = None
    budgets: dict[str, Any] = field(default_factory=dict)
    manual: bool = False


@dataclass(kw_only=True)
class Starter(Payload):
    KIND = "starter"
    source: str = ""


@dataclass(kw_only=True)
class StageChanged(Payload):
    KIND = "stage_changed"
    KEYS = {"from_": "from"}
    from_: str = ""
    to: str = ""
    reason: str = ""

    def _normalise(self) -> None:
        if not self.to and "stage" in self.extra:  # early recordings named the new stage `stage`
            self.to = str(self.extra["stage"])


@dataclass(kw_only=True)
class RetrievedItem(Payload):
    """One memory on screen with its values and score parts: the one shape of a retrieved memory."""

    id: str = ""
    kind: str = ""
    title: str = ""
    text: str = ""
    q1: float | None = None
    q2: float | None = None
    visits1: int = 0
    visits2: int = 0
    similarity: float = 0.0
    value: float = 0.0
    exploration: float = 0.0
    score: float = 0.0
    #: how the slot was filled: "value" (ranked), "explore", or "rule" (contract items, never credited)
    chosen_by: str = "value"
    #: the device class the memory was learnt on ("" for seeds and older items)
    learnt_on: str = ""

    def _normalise(self) -> None:
        if not self.id and "item_id" in self.extra:
            self.id = str(self.extra["item_id"])
        self.q1 = None if self.q1 is None else float(self.q1)
        self.q2 = None if self.q2 is None else float(self.q2)
        self.visits1, self.visits2 = int(self.visits1 or 0), int(self.visits2 or 0)
        self.similarity, self.score = float(self.similarity or 0.0), float(self.score or 0.0)

    @classmethod
    def from_hit(cls, hit: Hit) -> RetrievedItem:
        """From a `memory.Retrieved` (item plus score parts)."""
        item = hit.item
        return cls(id=item.id, kind=item.kind, title=item.title, text=item.text, q1=item.q1, q2=item.q2,
                   visits1=item.visits1, visits2=item.visits2, similarity=hit.similarity, value=hit.value,
                   exploration=hit.exploration, score=hit.score, chosen_by=getattr(hit, "chosen_by", "value"),
                   learnt_on=getattr(item, "learnt_on", ""))


@dataclass(kw_only=True)
class Retrieved(Payload):
    KIND = "retrieved"
    stage: str = ""
    items: list[RetrievedItem] = field(default_factory=list)
    #: refine: the start point chosen by Q2 ({"version", "id", "q2", ...}); credited with the items
    start_point: dict[str, Any] | None = None
    #: the value-driven choice behind the items (`memory.retrieval.Selection.event`): the pool recalled by
    #: similarity ({"id", "similarity", "q", ...} each), similarity's own top-k ids, the slots exploration
    #: filled, how many slots value chose beyond similarity's top-k, and the ranked slots in all
    pool: list[dict[str, Any]] = field(default_factory=list)
    similarity_top: list[str] = field(default_factory=list)
    explored: list[int] = field(default_factory=list)
    value_beyond_similarity: int = 0
    slots: int = 0
    OMIT_NONE = ("start_point",)

    def _normalise(self) -> None:
        self.items = [i if isinstance(i, RetrievedItem) else RetrievedItem.from_data(_flat_item(i))
                      for i in self.items or []]

    def credit_ids(self) -> tuple[str, ...]:
        """What the step's reward credits: the ranked slots (not rule-fetched items) and the start point."""
        ids = [i.id for i in self.items if i.chosen_by != "rule"]
        if self.start_point and self.start_point.get("id"):
            ids.append(str(self.start_point["id"]))
        return tuple(dict.fromkeys(ids))


def _flat_item(raw: Any) -> dict[str, Any]:
    """A recorded item row, flat or nested as {"item": {...}, "similarity": ...}."""
    d = dict(raw) if isinstance(raw, Mapping) else {}
    if isinstance(d.get("item"), Mapping):
        inner = dict(d.pop("item"))
        d = {**inner, **d}
    return d


@dataclass(kw_only=True)
class Prompt(Payload):
    KIND = "prompt"
    stage: str = ""
    messages: list[dict[str, Any]] = field(default_factory=list)


@dataclass(kw_only=True)
class ModelReply(Payload):
    KIND = "model_reply"
    stage: str = ""
    purpose: str = "kernel"
    model_call: bool = True
    text: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None
    model: str = ""
    seconds: float = 0.0
    tokens_estimated: bool = False

    @property
    def tokens(self) -> int:
        return int(self.prompt_tokens or 0) + int(self.completion_tokens or 0)


@dataclass(kw_only=True)
class ModelErrorEvent(Payload):
    KIND = "model_error"
    OMIT_NONE = ("purpose", "model_call")
    stage: str = ""
    reason: str = ""
    message: str = ""
    purpose: str | None = None
    model_call: bool | None = None


@dataclass(kw_only=True)
class Kernel(Payload):
    KIND = "kernel"
    version: int = 0
    stage: str = ""
    author: str = "model"
    file: str = ""
    source: str = ""


@dataclass(kw_only=True)
class GateEvent(Payload):
    KIND = "gate"
    version: int | None = None
    name: str = ""
    status: str = "running"


@dataclass(kw_only=True)
class GateProgress(Payload):
    """Where a running gate's work is (`verifier.result.Progress`: bindings for a new signature, trial 3/8,
    timing round 4 with the estimate so far), for kernel `version`. Told to the session's listener as it
    happens and never written to events.jsonl (`TOLD_PAYLOADS`): it is a moment's state, dozens of them per
    verification, and the verdict's `phases` keep how long each part took."""

    KIND = "gate_progress"
    OMIT_NONE = ("done", "total", "kept", "speedup", "lo", "hi")
    version: int | None = None
    gate: str = ""
    step: str = ""
    text: str = ""
    done: int | None = None
    total: int | None = None
    kept: int | None = None
    speedup: float | None = None
    lo: float | None = None
    hi: float | None = None

    @classmethod
    def of(cls, version: int | None, progress: Any) -> GateProgress:
        """From the verifier's `Progress` (or its dict)."""
        data = progress.to_dict() if hasattr(progress, "to_dict") else dict(progress)
        return cls.from_data({**data, "version": version})  # type: ignore[return-value]


@dataclass(kw_only=True)
class Verification(Payload):
    KIND = "verification"
    version: int | None = None
    reverify: bool = False
    result: dict[str, Any] = field(default_factory=dict)
    feedback: str = ""

    def _normalise(self) -> None:
        if not self.result and "gates" in self.extra:  # early recordings stored the result flat
            self.result = dict(self.extra)

    def verification_result(self) -> VerificationResult | None:
        try:
            return VerificationResult.from_dict(self.result)
        except (KeyError, TypeError, ValueError):
            return None


@dataclass(kw_only=True)
class Reward(Payload):
    KIND = "reward"
    OMIT_NONE = ("deferred", "raw")
    version: int | None = None
    credited: list[str] = field(default_factory=list)
    #: ids held back for a pending refinement, credited at the person's verdict
    deferred: list[str] | None = None
    stage: str = ""
    value: float | None = None
    outcome: str = ""
    latency_ms: float | None = None
    best_ms: float | None = None
    improved: bool = False
    #: the reward scheme that computed `value` (`core.rewards`)
    scheme: str = ""
    #: the refine reward before z-normalisation, when it was normalised
    raw: float | None = None

    def _normalise(self) -> None:
        if self.value is None and "reward" in self.extra:
            self.value = self.extra["reward"]


@dataclass(kw_only=True)
class QUpdate(Payload):
    KIND = "q_update"
    stage: str = ""
    reward: float = 0.0
    changes: list[dict[str, Any]] = field(default_factory=list)
    #: the device class the reward was measured on and the backend (issue 35); "" in older recordings
    device: str = ""
    backend: str = ""


@dataclass(kw_only=True)
class MemoryAdded(Payload):
    KIND = "memory_added"
    id: str = ""
    kind: str = ""
    title: str = ""
    version: int | None = None
    #: the lesson joined an existing item of the bank instead of adding one
    merged: bool = False


@dataclass(kw_only=True)
class MemoryMarked(Payload):
    """The person marked a memory on screen as used (or not) for their next edit."""

    KIND = "memory_marked"
    id: str = ""
    used: bool = True


@dataclass(kw_only=True)
class PendingRefinement(Payload):
    KIND = "pending_refinement"
    version: int = 0
    latency_ms: float | None = None
    best_ms: float | None = None
    gain: float | None = None


@dataclass(kw_only=True)
class Accepted(Payload):
    KIND = "accepted"
    version: int = 0
    by: str = ""
    reason: str = ""


@dataclass(kw_only=True)
class Rejected(Payload):
    KIND = "rejected"
    version: int = 0
    by: str = ""


@dataclass(kw_only=True)
class HumanEdit(Payload):
    KIND = "human_edit"
    version: int | None = None
    stage: str = ""
    credited: list[str] = field(default_factory=list)


@dataclass(kw_only=True)
class Insight(Payload):
    """An insight stored after an accepted improvement, or why none was (`skipped`)."""

    KIND = "insight"
    OMIT_NONE = ("skipped", "id", "title", "text", "before", "after", "speedup")
    skipped: str | None = None
    id: str | None = None
    title: str | None = None
    text: str | None = None
    before: int | None = None
    after: int | None = None
    speedup: float | None = None


@dataclass(kw_only=True)
class NeedsHuman(Payload):
    KIND = "needs_human"
    stage: str = ""
    message: str = ""


@dataclass(kw_only=True)
class StepDone(Payload):
    KIND = "step_done"
    stage: str = ""
    counts: bool = True
    outcome: str = ""
    seconds: float | None = None
    feedback: str = ""


@dataclass(kw_only=True)
class StepResumed(Payload):
    """A step that a crash cut short is being finished (its kernel `version` was recorded, not judged)."""

    KIND = "step_resumed"
    version: int = 0
    stage: str = ""
    author: str = ""
    verified: bool = False
    rewarded: bool = False


@dataclass(kw_only=True)
class BudgetChanged(Payload):
    KIND = "budget_changed"
    stage: str = ""
    add: int = 0


@dataclass(kw_only=True)
class ErrorEvent(Payload):
    KIND = "error"
    OMIT_NONE = ("version",)
    where: str = ""
    message: str = ""
    version: int | None = None


PAYLOADS: dict[str, type[Payload]] = {cls.KIND: cls for cls in (
    SessionStarted, Starter, StageChanged, Retrieved, Prompt, ModelReply, ModelErrorEvent, Kernel, GateEvent,
    Verification, Reward, QUpdate, MemoryAdded, MemoryMarked, PendingRefinement, Accepted, Rejected, HumanEdit, Insight,
    NeedsHuman, StepDone, StepResumed, BudgetChanged, ErrorEvent,
)}
EVENT_KINDS = tuple(PAYLOADS)
#: Payloads a session tells its listener but never writes (`Session._tell`): the progress of a running gate.
TOLD_PAYLOADS: dict[str, type[Payload]] = {GateProgress.KIND: GateProgress}


@dataclass(kw_only=True)
class UnknownPayload(Payload):
    """A kind this version does not know (a newer recording): carried, never folded."""


@dataclass
class Event:
    """One thing that happened in a session; `step` is the session step it belongs to.

    `data` is the stored JSON form; `payload` the typed record read from it.
    """

    kind: str
    data: dict[str, Any] = field(default_factory=dict)
    step: int = 0
    ts: float = field(default_factory=time.time)

    @classmethod
    def of(cls, payload: Payload, step: int = 0) -> Event:
        return cls(payload.KIND, payload.to_data(), step=step)

    @functools.cached_property
    def payload(self) -> Payload:
        """Read once per event (events are not changed once recorded)."""
        return (PAYLOADS.get(self.kind) or TOLD_PAYLOADS.get(self.kind, UnknownPayload)).from_data(self.data)

    def to_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "step": self.step, "ts": self.ts, "data": self.data}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Event:
        return cls(kind=d["kind"], data=dict(d.get("data") or {}), step=int(d.get("step") or 0),
                   ts=float(d.get("ts") or 0.0))


#: What the fold and the text accept: an `Event` or its `to_dict()` form.
EventLike = Event | Mapping[str, object]


def as_event(record: object) -> Event:
    """An `Event` from an `Event` or its `to_dict()` form."""
    if isinstance(record, Event):
        return record
    if isinstance(record, Mapping):
        return Event.from_dict({"kind": "", **record})
    return Event(str(getattr(record, "kind", "")), dict(getattr(record, "data", None) or {}),
                 int(getattr(record, "step", 0) or 0))
