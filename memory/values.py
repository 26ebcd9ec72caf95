"""Rewards and the value update: the exact definitions the memory learns from, in one place.

Drafting is graded by the furthest gate an attempt reached; refining by how much faster the new
kernel is than the best feasible one so far, on a log scale so that 2x faster and 2x slower weigh
the same, clipped so one lucky timing cannot dominate an item's value.
"""

from __future__ import annotations

import math

OUTCOMES = ("hack_fail", "compile_fail", "incorrect", "feasible")

#: Draft reward per outcome. Strictly increasing along the gates; a feasible kernel is worth 1.
DRAFT_REWARDS: dict[str, float] = {
    "hack_fail": 0.0,
    "compile_fail": 0.2,
    "incorrect": 0.4,
    "feasible": 1.0,
}

#: Refine rewards are ln(best_ms / latency_ms) clipped to [-REFINE_CLIP, REFINE_CLIP] (about 2.7x).
REFINE_CLIP = 1.0
#: Reward for an incorrect (or unmeasured) refinement: as bad as the worst clipped slowdown.
REFINE_INCORRECT = -REFINE_CLIP

#: A person's verdict on a pending refinement, credited in the refine stage to the memories that were
#: on screen when it was made (on top of the refinement's own latency reward): accepting counts as a
#: solid gain (half the clipped maximum), rejecting as no gain at all.
PERSON_REWARDS: dict[str, float] = {"accepted": 0.5 * REFINE_CLIP, "rejected": 0.0}

#: Default learning rate of the Monte-Carlo update (with the "mean" schedule: its floor).
DEFAULT_ALPHA = 0.05
#: Step-size schedules: "constant" uses alpha every time; "mean" uses max(alpha, 1 / visits), the
#: running mean of an item's returns until alpha takes over, so early noisy returns average out
#: instead of one lucky or unlucky attempt deciding an item's rank.
SCHEDULES = ("constant", "mean")
DEFAULT_SCHEDULE = "mean"


def draft_reward(outcome: str) -> float:
    """Reward of a drafting attempt: hack_fail 0 < compile_fail 0.2 < incorrect 0.4 < feasible 1."""
    try:
        return DRAFT_REWARDS[outcome]
    except KeyError:
        raise ValueError(f"unknown outcome {outcome!r}; expected one of {', '.join(OUTCOMES)}") from None


def refine_reward(latency_ms: float | None, best_ms: float | None, correct: bool) -> float:
    """Reward of a refinement against the best feasible latency so far.

    - incorrect, or no latency measured: ``REFINE_INCORRECT`` (-1);
    - no feasible baseline yet (``best_ms`` is None): 0, nothing to improve on;
    - otherwise ``clip(ln(best_ms / latency_ms), -1, 1)``: positive when faster, negative when slower.
    """
    if not correct or latency_ms is None:
        return REFINE_INCORRECT
    if best_ms is None:
        return 0.0
    if latency_ms <= 0 or best_ms <= 0 or not (math.isfinite(latency_ms) and math.isfinite(best_ms)):
        raise ValueError(f"latencies must be positive and finite, got {latency_ms!r} and {best_ms!r}")
    return max(-REFINE_CLIP, min(REFINE_CLIP, math.log(best_ms / latency_ms)))


def person_reward(decision: str) -> float:
    """Reward of a person's accept/reject of a pending refinement (see ``PERSON_REWARDS``)."""
    try:
        return PERSON_REWARDS[decision]
    except KeyError:
        raise ValueError(f"unknown decision {decision!r}; expected accepted or rejected") from None


def reward_range(stage: str) -> tuple[float, float]:
    """The (lowest, highest) reward of a stage, used to put Q-values on a 0..1 scale for ranking."""
    if stage == "draft":
        return min(DRAFT_REWARDS.values()), max(DRAFT_REWARDS.values())
    if stage == "refine":
        return -REFINE_CLIP, REFINE_CLIP
    raise ValueError(f"unknown stage {stage!r}; expected draft or refine")


def normalised_value(q: float, stage: str) -> float:
    """Q mapped onto 0..1 for the stage's reward range, clipped."""
    lo, hi = reward_range(stage)
    return max(0.0, min(1.0, (q - lo) / (hi - lo)))


def step_size(alpha: float, visits: int, schedule: str) -> float:
    """The alpha of an item's `visits`-th update (counting this one) under `schedule`."""
    if schedule == "constant":
        return alpha
    if schedule == "mean":
        return max(alpha, 1.0 / max(1, visits))
    raise ValueError(f"unknown step-size schedule {schedule!r}; expected one of {', '.join(SCHEDULES)}")


def mc_update(q: float, reward: float, alpha: float) -> float:
    """Monte-Carlo (constant step) update: Q <- Q + alpha (G - Q)."""
    if not 0.0 < alpha <= 1.0:
        raise ValueError(f"alpha must be in (0, 1], got {alpha!r}")
    if not math.isfinite(reward):
        raise ValueError(f"reward must be a finite number, got {reward!r}")
    return q + alpha * (reward - q)
