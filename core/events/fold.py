"""The one fold of session events: `apply(state, event) -> state` and the state it builds.

`apply` is the only place where events turn into session state (stage, kernels, best, pending,
budgets, tokens and cost, the memories on screen). It is pure: the state given is never changed. The
session (`core.session`), the app's view (`evokernel_tui.view`) and the command line's text
(`describe_event`, `evokernel replay`) all fold with it, so they cannot disagree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from core.events.payloads import (
    Accepted,
    BudgetChanged,
    EventLike,
    HumanEdit,
    Kernel,
    MemoryAdded,
    MemoryMarked,
    ModelReply,
    PendingRefinement,
    Rejected,
    Retrieved,
    RetrievedItem,
    Reward,
    SessionStarted,
    StageChanged,
    Starter,
    StepDone,
    Verification,
    as_event,
)
from verifier.result import VerificationResult


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

    def summary(self) -> dict[str, object]:
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
    #: the memories on screen as the last retrieval recorded them (values, visits, score parts)
    retrieved: tuple[RetrievedItem, ...] = ()
    #: the ids a model step's reward credits (ranked slots and the start point of the last retrieval)
    credit_ids: tuple[str, ...] = ()
    #: memories on screen the person marked used (or not) since the last retrieval
    marked: Mapping[str, bool] = field(default_factory=dict)
    #: the version recorded by a step that has not finished (no `step_done` yet): a crash mid-step
    in_flight: int | None = None
    #: the raw refine rewards recorded so far, oldest first (what a z-normalised refine reward is measured against)
    refine_rewards: tuple[float, ...] = ()

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


def apply(state: SessionState, event: EventLike) -> SessionState:
    """The state after `event`: the one fold of session events (see the module docstring).

    What each kind changes:
      session_started   task, backend, model, manual
      starter           current_source := the starter kernel
      stage_changed     stage (and done_reason when the stage is done)
      retrieved         retrieved, onscreen_ids, credit_ids (what a model step's reward credits); marks cleared
      memory_marked     marked[id]
      memory_added      that attempt's memory_id
      model_reply       tokens, cost
      kernel            history += attempt (context := credit_ids for a model's kernel); current_source := it;
                        in_flight := its version
      human_edit        that attempt's context := the memories credited
      verification      that attempt's result (re-verifications change nothing)
      reward            that attempt's credited and deferred ids, its reward; rewarded; refine_rewards
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
        changes.update(retrieved=tuple(p.items), onscreen_ids=tuple(i.id for i in p.items),
                       credit_ids=p.credit_ids(), marked={})
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
        if p.stage == "refine" and d.get("value") is not None:
            changes["refine_rewards"] = (*state.refine_rewards, float(d.get("raw", d["value"])))
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


def fold(events: Iterable[EventLike], state: SessionState | None = None) -> SessionState:
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
