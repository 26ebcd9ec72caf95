"""Map verifier results onto the memory's rewards (the definitions live in `memory.values`), and the
session's crediting helpers: which memories a step credits, the refine start point chosen by Q2,
the deferred credit of a refinement pending a person's verdict, and the memories a person marked."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory.values import DEFAULT_SCHEME, RunningNorm, draft_reward, refine_reward
from verifier.result import VerificationResult


@dataclass
class Reward:
    """The reward of one attempt and why, as recorded in the `reward` event."""

    stage: str
    value: float
    outcome: str
    latency_ms: float | None = None
    best_ms: float | None = None
    improved: bool = False
    scheme: str = DEFAULT_SCHEME
    raw: float | None = None  # the refine reward before z-normalisation, when it was normalised

    def to_dict(self) -> dict:
        return {
            **({"raw": self.raw} if self.raw is not None else {}),
            "stage": self.stage,
            "value": self.value,
            "outcome": self.outcome,
            "latency_ms": self.latency_ms,
            "best_ms": self.best_ms,
            "improved": self.improved,
            "scheme": self.scheme,
        }


def reward_for(stage: str, result: VerificationResult, best_ms: float | None = None, scheme: str = DEFAULT_SCHEME) -> Reward:
    """Draft: +1 feasible / -1 otherwise ("paper"), or graded by gate ("shaped").
    Refine: -1 when not feasible, else tanh (paper) or clip (shaped) of ln(best / latency)."""
    if stage == "draft":
        return Reward("draft", draft_reward(result.outcome, scheme), result.outcome, result.latency_ms, scheme=scheme)
    if stage == "refine":
        value = refine_reward(result.latency_ms, best_ms, result.feasible, scheme)
        return Reward("refine", value, result.outcome, result.latency_ms, best_ms, is_improvement(result, best_ms), scheme)
    raise ValueError(f"unknown stage {stage!r}; expected draft or refine")


def z_normalised(reward: Reward, earlier: Sequence[float]) -> Reward:
    """`reward` z-normalised against this session's `earlier` raw refine rewards (running mean and
    deviation, `memory.values.RunningNorm`: tanh of the z-score, so it stays in [-1, 1]; unchanged
    until two earlier rewards exist). Drafting rewards are returned as they are."""
    if reward.stage != "refine":
        return reward
    norm = RunningNorm()
    for r in earlier:
        norm.normalise(r)
    return Reward(reward.stage, norm.normalise(reward.value), reward.outcome, reward.latency_ms, reward.best_ms,
                  reward.improved, reward.scheme, raw=reward.value)


def earlier_refine_rewards(log_path: Path) -> list[float]:
    """The raw refine rewards this session recorded so far, oldest first (from its `reward` events)."""
    out: list[float] = []
    for ev in _events(log_path):
        if ev.kind == "reward" and ev.data.get("stage") == "refine" and ev.data.get("value") is not None:
            out.append(float(ev.data.get("raw", ev.data["value"])))
    return out


def best_in_frame(result: VerificationResult, best: Any) -> float | None:
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
    hits: list[Any]


def select_memories(policy: Any, memory: Any, sig: Any, stage: str) -> Any:
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

    def attempt(self, history: Sequence[Any]) -> Any:
        return next((a for a in history if a.version == self.version), None)

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version, "id": self.id, "q2": self.q2, "explored": self.explored, "points": self.points}


def _events(log_path: Path) -> list[Any]:
    from core.events import read_events

    try:
        return read_events(log_path)
    except (OSError, ValueError):
        return []


def memory_ids(log_path: Path) -> dict[int, str]:
    """Kernel version -> the id of the trajectory its attempt left in the bank (from `memory_added`)."""
    out: dict[int, str] = {}
    for ev in _events(log_path):
        if ev.kind == "memory_added" and ev.data.get("version") is not None and ev.data.get("id"):
            out[int(ev.data["version"])] = str(ev.data["id"])
    return out


def choose_start_point(policy: Any, memory: Any, history: Sequence[Any], log_path: Path) -> StartPoint | None:
    """Pick the refine start point epsilon-greedily by Q2 among the session's feasible kernels (the first
    feasible draft and every later feasible variant); None when there is none or the policy cannot."""
    feasible = [a for a in history if a.feasible]
    if not feasible or not hasattr(policy, "choose_start"):
        return None
    ids = memory_ids(log_path)
    points: list[tuple[tuple[int, str | None], float]] = []
    for a in feasible:
        mid = ids.get(a.version)
        q2 = 0.0
        if mid is not None and mid in memory:
            q2 = float(memory.get(mid).q2)
        points.append(((a.version, mid), q2))
    (version, mid), explored = policy.choose_start(points)
    q2 = next(q for key, q in points if key[0] == version)
    rows = [{"version": v, "id": i, "q2": round(q, 4)} for (v, i), q in points]
    return StartPoint(version, mid, q2, explored, rows)


def credited_ids(hits: Iterable[Any], start: StartPoint | None = None) -> list[str]:
    """What a step's reward credits: the ranked slots (not rule-fetched contract items) and the start point."""
    ids = [h.item.id for h in hits if getattr(h, "chosen_by", "value") != "rule"]
    if start is not None and start.id:
        ids.append(start.id)
    return list(dict.fromkeys(ids))


def deferred_credit(log_path: Path, version: int) -> tuple[list[str], float]:
    """The ids and reward held back for a pending refinement (its `reward` event's `deferred`), or
    ([], 0) when its reward was already credited (auto-accepted, or recorded before deferral)."""
    for ev in reversed(_events(log_path)):
        if ev.kind == "reward" and ev.data.get("version") == version:
            ids = ev.data.get("deferred")
            if not ids:
                return [], 0.0
            return [str(i) for i in ids], float(ev.data.get("value") or 0.0)
    return [], 0.0


def marked_used(log_path: Path, onscreen: Sequence[str]) -> list[str]:
    """The on-screen memories the person marked as used since the last retrieval, in screen order."""
    marked: dict[str, bool] = {}
    for ev in _events(log_path):
        if ev.kind == "retrieved":
            marked = {}
        elif ev.kind == "memory_marked" and ev.data.get("id"):
            marked[str(ev.data["id"])] = bool(ev.data.get("used", True))
    return [i for i in onscreen if marked.get(i)]


def store_trajectory(memory: Any, sig: Any, stage: str, attempt: Any, result: VerificationResult,
                     source: dict[str, Any], lesson: str = "") -> tuple[Any, str]:
    """Store one attempt's trajectory (a compact lesson when it failed: `lesson` when a model wrote one,
    else gate, rule and first error line); near-duplicates are merged or capped by
    `MemoryStore.add_trajectory`. Returns (item, "added" or "merged")."""
    from memory.writing import trajectory_item

    item = trajectory_item(sig, stage=stage, code=attempt.source, outcome=result.outcome, feedback=result.feedback(),
                           latency_ms=result.latency_ms, author=attempt.author,
                           gates={g.name: g.status for g in result.gates}, speedup=result.speedup, source=source,
                           lesson=lesson)
    if hasattr(memory, "add_trajectory"):
        return memory.add_trajectory(item)
    return memory.add(item), "added"
