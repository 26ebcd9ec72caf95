"""Session events, their typed payloads, the one fold over them, and the append-only log.

Every state change of a session is an `Event`. Its `data` is the JSON form stored in
`events.jsonl`; `event.payload` is the same data as a typed record (`Kernel`, `Accepted`, ...),
read tolerantly because a recording outlives the code that wrote it.

`apply(state, event) -> state` is the only place where events turn into session state (stage,
kernels, best, pending, budgets, tokens and cost). It is pure: the state given is never changed. The
session (`core.session`), the app's view (`evokernel_tui.view`) and the command line's text
(`describe_event`, `evokernel replay`) all fold with it, so they cannot disagree.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from verifier.result import VerificationResult

# ==================================================================== typed payloads


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
    def from_data(cls, data: Mapping[str, Any] | None) -> Payload:
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

    def to_data(self) -> dict[str, Any]:
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

    def _normalise(self) -> None:
        if not self.id and "item_id" in self.extra:
            self.id = str(self.extra["item_id"])
        self.q1 = None if self.q1 is None else float(self.q1)
        self.q2 = None if self.q2 is None else float(self.q2)
        self.visits1, self.visits2 = int(self.visits1 or 0), int(self.visits2 or 0)
        self.similarity, self.score = float(self.similarity or 0.0), float(self.score or 0.0)

    @classmethod
    def from_hit(cls, hit: Any) -> RetrievedItem:
        """From a `memory.Retrieved` (item plus score parts)."""
        item = hit.item
        return cls(id=item.id, kind=item.kind, title=item.title, text=item.text, q1=item.q1, q2=item.q2,
                   visits1=item.visits1, visits2=item.visits2, similarity=hit.similarity, value=hit.value,
                   exploration=hit.exploration, score=hit.score)


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
        return PAYLOADS.get(self.kind, UnknownPayload).from_data(self.data)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "step": self.step, "ts": self.ts, "data": self.data}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Event:
        return cls(kind=d["kind"], data=dict(d.get("data") or {}), step=int(d.get("step") or 0),
                   ts=float(d.get("ts") or 0.0))


def as_event(record: Any) -> Event:
    """An `Event` from an `Event` or its `to_dict()` form."""
    if isinstance(record, Event):
        return record
    if isinstance(record, Mapping):
        return Event.from_dict({"kind": "", **record})
    return Event(str(getattr(record, "kind", "")), dict(getattr(record, "data", None) or {}),
                 int(getattr(record, "step", 0) or 0))


# ==================================================================== the fold


@dataclass(frozen=True)
class Attempt:
    """One kernel version: who wrote it, in which stage, its file and (once verified) its result.

    `context` holds the ids of the memories on screen when it was written (those its reward credits);
    `credited` the ids its recorded reward did credit.
    """

    version: int
    stage: str
    author: str
    file: str
    source: str
    step: int
    result: VerificationResult | None = None
    credited: tuple[str, ...] = ()
    context: tuple[str, ...] = ()
    rewarded: bool = False
    deferred: tuple[str, ...] = ()
    reward: float | None = None
    memory_id: str | None = None
    #: when its verification was recorded (the event's time): what "cached, measured N min ago" counts from
    verified_at: float | None = None

    @property
    def feasible(self) -> bool:
        return bool(self.result and self.result.feasible)

    @property
    def latency_ms(self) -> float | None:
        return self.result.latency_ms if self.result else None

    @property
    def speedup(self) -> float | None:
        return self.result.speedup if self.result else None

    @property
    def outcome(self) -> str:
        return self.result.outcome if self.result else "unverified"

    @property
    def noisy(self) -> bool:
        """Its paired speedup's interval stayed too wide to claim a speed."""
        return bool(self.result and self.result.noisy)

    @property
    def timing_note(self) -> str:
        """"noisy", "cached, measured N min ago" (counted from when the verdict was recorded), "unisolated"."""
        return self.result.timing_label(now=self.verified_at or None) if self.result else ""

    def summary(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "stage": self.stage,
            "author": self.author,
            "file": self.file,
            "outcome": self.outcome,
            "latency_ms": self.latency_ms,
            "speedup": self.speedup,
            "noisy": self.noisy,
            "timing_note": self.timing_note,
        }


@dataclass(frozen=True)
class SessionState:
    """A session as its events left it. Built only by `apply`; never changed in place."""

    task: str = ""
    backend: str = ""
    model: str | None = None
    manual: bool = False
    stage: str = "draft"
    done_reason: str = ""
    step: int = 0
    used: Mapping[str, int] = field(default_factory=lambda: {"draft": 0, "refine": 0})
    budget_added: Mapping[str, int] = field(default_factory=lambda: {"draft": 0, "refine": 0})
    history: tuple[Attempt, ...] = ()
    best_version: int | None = None
    pending_version: int | None = None
    current_source: str = ""
    feedback: str = ""
    tokens: int = 0
    cost_known: float = 0.0
    cost_unknown: bool = False
    model_calls: int = 0
    elapsed_s: float = 0.0
    onscreen_ids: tuple[str, ...] = ()
    #: the ids a model step's reward credits (ranked slots and the start point of the last retrieval)
    credit_ids: tuple[str, ...] = ()
    #: memories on screen the person marked used (or not) since the last retrieval
    marked: Mapping[str, bool] = field(default_factory=dict)
    #: the version recorded by a step that has not finished (no `step_done` yet): a crash mid-step
    in_flight: int | None = None

    def attempt(self, version: int | None) -> Attempt | None:
        if version is None:
            return None
        return next((a for a in self.history if a.version == version), None)

    @property
    def best(self) -> Attempt | None:
        return self.attempt(self.best_version)

    @property
    def pending(self) -> Attempt | None:
        return self.attempt(self.pending_version)

    @property
    def cost(self) -> float | None:
        """Money spent on model calls; None when any call's price was unknown."""
        return None if self.cost_unknown else self.cost_known


def _faster(a: Attempt | None, b: Attempt | None) -> bool:
    """Whether `a` is faster than `b` (anything is faster than no timed kernel). Paired speedups against
    eager are compared when both have one, so load that changed between the two measurements cancels."""
    if a is None:
        return False
    if b is None or b.latency_ms is None:
        return True
    if a.speedup and b.speedup:
        return a.speedup > b.speedup
    return a.latency_ms is not None and a.latency_ms < b.latency_ms


def _with_attempt(state: SessionState, version: int | None, **changes: Any) -> tuple[Attempt, ...]:
    return tuple(replace(a, **changes) if a.version == version else a for a in state.history)


def apply(state: SessionState, event: Any) -> SessionState:
    """The state after `event`: the one fold of session events (see the module docstring).

    What each kind changes:
      session_started   task, backend, model, manual
      starter           current_source := the starter kernel
      stage_changed     stage (and done_reason when the stage is done)
      retrieved         onscreen_ids, credit_ids (what a model step's reward credits); marks cleared
      memory_marked     marked[id]
      memory_added      that attempt's memory_id
      model_reply       tokens, cost
      kernel            history += attempt (context := credit_ids for a model's kernel); current_source := it;
                        in_flight := its version
      human_edit        that attempt's context := the memories credited
      verification      that attempt's result (re-verifications change nothing)
      reward            that attempt's credited and deferred ids, its reward; rewarded
      pending_refinement pending := that attempt
      accepted          best := that attempt; current_source := its source; a pending refinement that is
                        the accepted one or no faster than the new best is dropped
      rejected          pending := none; current_source := the best's source
      step_done         used[stage] += 1 when it counts; elapsed time; feedback; in_flight := none
      budget_changed    budget_added[stage] += add
    Any event with `model_call` counts one model call.
    """
    ev = as_event(event)
    p = ev.payload
    d = ev.data
    changes: dict[str, Any] = {}
    if ev.step > state.step:
        changes["step"] = ev.step
    if isinstance(p, SessionStarted):
        changes.update(task=p.task or state.task, backend=p.backend or state.backend, model=p.model,
                       manual=bool(p.manual))
    elif isinstance(p, Starter):
        changes["current_source"] = p.source
    elif isinstance(p, StageChanged):
        if p.to:
            changes.update(stage=p.to, done_reason=p.reason if p.to == "done" else "")
    elif isinstance(p, Retrieved):
        changes.update(onscreen_ids=tuple(i.id for i in p.items), credit_ids=p.credit_ids(), marked={})
    elif isinstance(p, MemoryMarked):
        changes["marked"] = {**state.marked, p.id: bool(p.used)}
    elif isinstance(p, MemoryAdded):
        if state.attempt(p.version) is not None:
            changes["history"] = _with_attempt(state, p.version, memory_id=p.id)
    elif isinstance(p, ModelReply):
        changes["tokens"] = state.tokens + p.tokens
        if p.cost is None:
            changes["cost_unknown"] = True
        else:
            changes["cost_known"] = state.cost_known + float(p.cost)
    elif isinstance(p, Kernel):
        context = state.credit_ids if p.author == "model" else ()
        attempt = Attempt(int(p.version), p.stage, p.author, p.file, p.source, ev.step, context=tuple(context))
        changes.update(history=(*state.history, attempt), current_source=p.source, in_flight=attempt.version)
    elif isinstance(p, HumanEdit):
        changes["history"] = _with_attempt(state, p.version, context=tuple(p.credited))
    elif isinstance(p, Verification):
        if not p.reverify and state.attempt(p.version) is not None:
            changes["history"] = _with_attempt(state, p.version, result=p.verification_result(),
                                               verified_at=ev.ts or None)
    elif isinstance(p, Reward):
        if state.attempt(p.version) is not None:
            changes["history"] = _with_attempt(state, p.version, credited=tuple(p.credited), rewarded=True,
                                               deferred=tuple(p.deferred or ()),
                                               reward=None if p.value is None else float(p.value))
    elif isinstance(p, PendingRefinement):
        if state.attempt(p.version) is not None:
            changes["pending_version"] = p.version
    elif isinstance(p, Accepted):
        best = state.attempt(p.version)
        if best is not None:
            changes.update(best_version=best.version, current_source=best.source)
            pending = state.pending
            if pending is not None and (pending.version == best.version or not _faster(pending, best)):
                changes["pending_version"] = None
    elif isinstance(p, Rejected):
        changes["pending_version"] = None
        if state.best is not None:
            changes["current_source"] = state.best.source
    elif isinstance(p, StepDone):
        if p.counts and p.stage in state.used:
            changes["used"] = {**state.used, p.stage: state.used[p.stage] + 1}
        changes.update(elapsed_s=state.elapsed_s + float(p.seconds or 0.0),
                       feedback=p.feedback if "feedback" in d else state.feedback, in_flight=None)
        changes["feedback"] = changes["feedback"] or ""
    elif isinstance(p, BudgetChanged) and p.stage in state.budget_added:
        changes["budget_added"] = {**state.budget_added, p.stage: state.budget_added[p.stage] + int(p.add)}
    if d.get("model_call"):
        changes["model_calls"] = state.model_calls + 1
    return replace(state, **changes) if changes else state


def fold(events: Iterable[Any], state: SessionState | None = None) -> SessionState:
    """The state after `events` in order, from `state` (default: a new session)."""
    state = state or SessionState()
    for ev in events:
        state = apply(state, ev)
    return state


def speed_text(attempt: Attempt | None, sign: str = "×") -> str:
    """The one way every surface (app header, `sessions`, replay, `draft`) shows a kernel's speedup over
    eager: `1.84×`; `≈1.84× (noisy)` when its paired interval stayed too wide to claim a speed;
    `1.84× (cached, measured 4 min ago)` when the verdict came from the cache. "" without a speedup."""
    if attempt is None or not attempt.speedup:
        return ""
    text = f"{'≈' if attempt.noisy else ''}{attempt.speedup:.2f}{sign}"
    note = attempt.timing_note
    return f"{text} ({note})" if note else text


def state_line(state: SessionState) -> str:
    """The command line's one-line digest of a folded state (the same fold as the session and the app)."""
    best = state.best
    pending = state.pending
    speed = speed_text(best, "x")
    parts = [f"stage {state.stage}", f"{len(state.history)} kernels",
             f"best v{best.version}" + (f" {speed}" if speed else "") if best else "best none"]
    if pending is not None:
        parts.append(f"refinement v{pending.version} pending")
    return ", ".join(parts)


# ==================================================================== the log


class EventLog:
    """`events.jsonl`: one JSON object per line, flushed and fsynced as each is written."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def append(self, event: Event) -> None:
        line = json.dumps(event.to_dict(), default=_jsonable, ensure_ascii=False)
        self._ensure_line_start()
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())

    def _ensure_line_start(self) -> None:
        """Drop a half-written last line left by a crash, so the next event starts on its own line."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        with open(self.path, "rb+") as f:
            f.seek(-1, os.SEEK_END)
            if f.read(1) == b"\n":
                return
            data = self.path.read_bytes()
            keep = data.rfind(b"\n") + 1
            f.truncate(keep)
            f.flush()
            os.fsync(f.fileno())

    def __iter__(self) -> Iterator[Event]:
        return iter(read_events(self.path))


def read_events(path: Path) -> list[Event]:
    """All complete events in a log (a file, or a session folder holding `events.jsonl`).

    A truncated or garbled last line (a crash mid-write) is skipped; damage anywhere else is an error.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "events.jsonl"
    if not path.exists():
        return []
    events: list[Event] = []
    lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            events.append(Event.from_dict(json.loads(line)))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            if i >= len(lines) - 2:
                break
            raise ValueError(f"{path}: line {i + 1} is not a valid event; the log is damaged") from None
    return events


def _jsonable(obj: Any) -> Any:
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    if isinstance(obj, Payload):
        return obj.to_data()
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, set | tuple):
        return list(obj)
    return repr(obj)


# ==================================================================== text for the command line


def describe_event(ev: Any) -> str | None:
    """One human line for an event (progress displays, replay); None for events too fine to show."""
    ev = as_event(ev)
    p = ev.payload
    if isinstance(p, SessionStarted):
        return f"session for {p.task} on {p.backend} with {p.model or 'no model (manual)'}"
    if isinstance(p, StageChanged):
        return f"stage {p.from_} -> {p.to}: {p.reason}"
    if isinstance(p, Retrieved):
        return f"retrieved {len(p.items)} memories for {p.stage}"
    if isinstance(p, ModelReply):
        cost = "unknown cost" if p.cost is None else f"${p.cost:.4f}"
        return f"model replied ({p.purpose}): {p.tokens} tokens, {cost}, {p.seconds or 0:.1f} s"
    if isinstance(p, ModelErrorEvent):
        return f"model step failed ({p.reason}): {p.message}"
    if isinstance(p, Starter):
        return "starter kernel written: it builds and copies its input; make it compute the task"
    if isinstance(p, Kernel):
        return f"kernel v{p.version} by {p.author} ({p.stage}) -> {p.file}"
    if isinstance(p, Verification):
        r = p.result
        lat = f", {r['latency_ms']:.4f} ms" if r.get("latency_ms") is not None else ""
        sp = f", {r['speedup']:.2f}x" if r.get("speedup") else ""
        again = " (re-verified)" if p.reverify else ""
        return f"v{p.version}{again}: {r.get('outcome')}{lat}{sp}"
    if isinstance(p, Reward):
        value = f"{p.value:+.3f}" if p.value is not None else "?"
        return f"reward {value} ({p.stage}, {len(p.credited)} memories credited)"
    if isinstance(p, PendingRefinement):
        gain = f" ({p.gain:.2f}x faster than the best)" if p.gain else ""
        return f"v{p.version} is a pending refinement{gain}"
    if isinstance(p, Accepted | Rejected):
        return f"v{p.version} {ev.kind} by {p.by}"
    if isinstance(p, HumanEdit):
        return f"person's edit v{p.version} ({p.stage})"
    if isinstance(p, Insight):
        return f"insight skipped: {p.skipped}" if p.skipped is not None else f"insight stored: {p.title}"
    if isinstance(p, NeedsHuman | ErrorEvent):
        return str(p.message)
    if isinstance(p, BudgetChanged):
        return f"{p.add} more {p.stage} steps"
    if isinstance(p, StepResumed):
        return f"finishing step {ev.step} (v{p.version}), cut short when the session last stopped"
    return None
