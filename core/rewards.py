"""Map verifier results onto the memory's rewards (the definitions live in `memory.values`)."""

from __future__ import annotations

from dataclasses import dataclass

from memory.values import draft_reward, refine_reward
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

    def to_dict(self) -> dict:
        return {
            "stage": self.stage,
            "value": self.value,
            "outcome": self.outcome,
            "latency_ms": self.latency_ms,
            "best_ms": self.best_ms,
            "improved": self.improved,
        }


def reward_for(stage: str, result: VerificationResult, best_ms: float | None = None) -> Reward:
    """Draft: graded by the furthest gate. Refine: log latency ratio against the best so far."""
    if stage == "draft":
        return Reward("draft", draft_reward(result.outcome), result.outcome, result.latency_ms)
    if stage == "refine":
        value = refine_reward(result.latency_ms, best_ms, result.feasible)
        return Reward("refine", value, result.outcome, result.latency_ms, best_ms, is_improvement(result, best_ms))
    raise ValueError(f"unknown stage {stage!r}; expected draft or refine")


MIN_GAIN = 0.02


def is_improvement(result: VerificationResult, best_ms: float | None) -> bool:
    """A feasible kernel measurably faster than the best one (or the first feasible one).

    Timing noise must not pass for progress: the new median has to beat the best by at least 2% and
    by more than half its own interquartile range.
    """
    if not result.feasible or result.latency_ms is None:
        return False
    if best_ms is None:
        return True
    gain = best_ms - result.latency_ms
    latency = result.gate("latency")
    iqr = float(latency.detail.get("iqr_ms", 0.0) or 0.0) if latency is not None else 0.0
    return gain > MIN_GAIN * best_ms and gain > iqr / 2
