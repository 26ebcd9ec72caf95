"""Map verifier results onto the memory's rewards (the definitions live in `memory.values`) as the
`reward` event's payload (`core.events.Reward`, the one reward record), and the session's memory
helpers: selecting memories, the refine start point chosen by Q2, storing a trajectory.

What a step credits, the deferred credit of a pending refinement, the marks and the earlier refine
rewards are all read from the session's fold (`core.events.SessionState`), never from the log."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from core.events import Attempt, Reward
from memory.values import DEFAULT_SCHEME, RunningNorm, draft_reward, refine_reward
from verifier.result import VerificationResult

if TYPE_CHECKING:
    from memory import MemoryItem, MemoryStore, RetrievalPolicy, Retrieved, TaskSignature
    from memory.retrieval import Selection


def reward_for(stage: str, result: VerificationResult, best_ms: float | None = None, scheme: str = DEFAULT_SCHEME) -> Reward:
    """Draft: +1 feasible / -1 otherwise ("paper"), or graded by gate ("shaped").
    Refine: -1 when not feasible, else tanh (paper) or clip (shaped) of ln(best / latency).

    The `reward` event's payload, without the attempt's version and credited ids (the session adds them)."""
    if stage == "draft":
        return Reward(stage="draft", value=draft_reward(result.outcome, scheme), outcome=result.outcome,
                      latency_ms=result.latency_ms, scheme=scheme)
    if stage == "refine":
        value = refine_reward(result.latency_ms, best_ms, result.feasible, scheme)
        return Reward(stage="refine", value=value, outcome=result.outcome, latency_ms=result.latency_ms,
                      best_ms=best_ms, improved=is_improvement(result, best_ms), scheme=scheme)
    raise ValueError(f"unknown stage {stage!r}; expected draft or refine")


def z_normalised(reward: Reward, earlier: Sequence[float]) -> Reward:
    """`reward` z-normalised against this session's `earlier` raw refine rewards (running mean and
    deviation, `memory.values.RunningNorm`: tanh of the z-score, so it stays in [-1, 1]; unchanged
    until two earlier rewards exist). Drafting rewards are returned as they are."""
    if reward.stage != "refine":
        return reward
    norm = RunningNorm()
    for r in earlier:  # the session's fold keeps them: `SessionState.refine_rewards`
        norm.normalise(r)
    return replace(reward, value=norm.normalise(float(reward.value or 0.0)), raw=reward.value)


def best_in_frame(result: VerificationResult, best: Attempt | None) -> float | None:
    """The best kernel's latency as it would read in `result`'s paired window: `result.reference_ms`
    divided by the best's own paired speedup. Both speedups are ratios against eager measured side by
    side, so comparing them cancels load that changed between the two measurements (a refine reward
    never compares two point estimates taken at different moments). Falls back to the best's latency."""
    if best is None:
        return None
    best_result = getattr(best, "result", None)
    speed = getattr(best_result, "speedup", None) if best_result is not None else None
    if speed and result.reference_ms and getattr(best_result, "timing", None):
        return result.reference_ms / speed
    return getattr(best, "latency_ms", None)


MIN_GAIN = 0.02


def is_improvement(result: VerificationResult, best_ms: float | None) -> bool:
    """A feasible kernel measurably faster than the best one (or the first feasible one).

    Timing noise must not pass for progress: with a paired measurement the whole 95% interval must lie
    on the faster side (the latency at its slow end beats the best by 2%) and a noisy one never counts;
    otherwise the new median has to beat the best by 2% and by more than half its interquartile range.
    """
    if not result.feasible or result.latency_ms is None:
        return False
    if best_ms is None:
        return True
    interval = getattr(result, "speedup_interval", None)
    if interval is not None and result.reference_ms:
        # Paired timing: even the slow end of the 95% interval must beat the best; noise is no progress.
        if getattr(result, "noisy", False):
            return False
        slowest = result.reference_ms / interval[0] if interval[0] else float("inf")
        return slowest < best_ms * (1 - MIN_GAIN)
    gain = best_ms - result.latency_ms
    latency = result.gate("latency")
    iqr = float(latency.detail.get("iqr_ms", 0.0) or 0.0) if latency is not None else 0.0
    return gain > MIN_GAIN * best_ms and gain > iqr / 2


# -------------------------------------------------------------------- crediting helpers for the session


@dataclass
class _Hits:
    hits: list[Retrieved]


def select_memories(policy: RetrievalPolicy, memory: MemoryStore, sig: TaskSignature, stage: str) -> Selection | _Hits:
    """`policy.select` (hits plus the pool) when the policy has it, else plain `retrieve` hits."""
    select = getattr(policy, "select", None)
    if select is not None:
        return select(memory, sig, stage)
    return _Hits(list(policy.retrieve(memory, sig, stage=stage)))


@dataclass
class StartPoint:
    """The kernel a refinement starts from: a feasible version of this session, chosen by Q2."""

    version: int
    id: str | None  # its trajectory in the memory bank (credited with the refinement's reward)
    q2: float
    explored: bool
    points: list[dict[str, Any]] = field(default_factory=list)

    def attempt(self, history: Sequence[Attempt]) -> Attempt | None:
        return next((a for a in history if a.version == self.version), None)

    def to_dict(self) -> dict[str, object]:
        return {"version": self.version, "id": self.id, "q2": self.q2, "explored": self.explored, "points": self.points}


def choose_start_point(policy: RetrievalPolicy, memory: MemoryStore, history: Sequence[Attempt]) -> StartPoint | None:
    """Pick the refine start point epsilon-greedily by Q2 among the session's feasible kernels (the first
    feasible draft and every later feasible variant); None when there is none or the policy cannot.
    Each kernel's trajectory id is the folded `Attempt.memory_id` (from its `memory_added` event)."""
    feasible = [a for a in history if a.feasible]
    if not feasible or not hasattr(policy, "choose_start"):
        return None
    points: list[tuple[tuple[int, str | None], float]] = []
    for a in feasible:
        mid = a.memory_id
        q2 = 0.0
        if mid is not None and mid in memory:
            q2 = float(memory.get(mid).q2)
        points.append(((a.version, mid), q2))
    (version, mid), explored = policy.choose_start(points)
    q2 = next(q for key, q in points if key[0] == version)
    rows = [{"version": v, "id": i, "q2": round(q, 4)} for (v, i), q in points]
    return StartPoint(version, mid, q2, explored, rows)


def store_trajectory(memory: MemoryStore, sig: TaskSignature, stage: str, attempt: Attempt, result: VerificationResult,
                     source: dict[str, object], lesson: str = "",
                     device: dict[str, object] | None = None) -> tuple[MemoryItem, str]:
    """Store one attempt's trajectory (a compact lesson when it failed: `lesson` when a model wrote one,
    else gate, rule and first error line); near-duplicates are merged or capped by
    `MemoryStore.add_trajectory`. Returns (item, "added" or "merged")."""
    from memory.writing import trajectory_item

    item = trajectory_item(sig, stage=stage, code=attempt.source, outcome=result.outcome, feedback=result.feedback(),
                           latency_ms=result.latency_ms, author=attempt.author,
                           gates={g.name: g.status for g in result.gates}, speedup=result.speedup, source=source,
                           lesson=lesson, device=device)
    if hasattr(memory, "add_trajectory"):
        return memory.add_trajectory(item)
    return memory.add(item), "added"
