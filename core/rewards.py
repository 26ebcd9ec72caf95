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


def is_improvement(result: VerificationResult, best_ms: float | None) -> bool:
    """A feasible kernel with a measured latency strictly below the best one (or the first one)."""
    if not result.feasible or result.latency_ms is None:
        return False
    return best_ms is None or result.latency_ms < best_ms
