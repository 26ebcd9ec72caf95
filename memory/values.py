"""Rewards and the value update: the exact definitions the memory learns from, in one place.

Two reward schemes share one scale, [-1, 1], so a value learnt under either means the same thing
and a new item starts at the neutral 0:

- ``"paper"`` (the default, as in the EvoKernel paper): drafting earns +1 for a feasible kernel and
  -1 for anything else; refining earns -1 when the kernel is not feasible, else
  ``tanh(ln best - ln latency)`` (positive when faster than the best so far, negative when slower).
- ``"shaped"`` (the earlier default, kept as an option): drafting is graded by the furthest gate
  reached, -1 < -0.6 < -0.2 < +1 for hack_fail < compile_fail < incorrect < feasible (the earlier
  0 / 0.2 / 0.4 / 1 mapped onto [-1, 1]); refining uses ``clip(ln best - ln latency, -1, 1)``.
"""

from __future__ import annotations

import math

OUTCOMES = ("hack_fail", "compile_fail", "incorrect", "feasible")
REWARD_SCHEMES = ("paper", "shaped")
DEFAULT_SCHEME = "paper"

#: Draft reward per outcome and scheme.
DRAFT_REWARDS_BY_SCHEME: dict[str, dict[str, float]] = {
    "paper": {"hack_fail": -1.0, "compile_fail": -1.0, "incorrect": -1.0, "feasible": 1.0},
    "shaped": {"hack_fail": -1.0, "compile_fail": -0.6, "incorrect": -0.2, "feasible": 1.0},
}
#: The default scheme's draft rewards.
DRAFT_REWARDS: dict[str, float] = DRAFT_REWARDS_BY_SCHEME[DEFAULT_SCHEME]

#: Refine rewards lie within [-REFINE_CLIP, REFINE_CLIP].
REFINE_CLIP = 1.0
#: Reward for an incorrect (or unmeasured) refinement.
REFINE_INCORRECT = -REFINE_CLIP

#: What a person's verdict on a pending refinement is worth. The refinement's own reward is held
#: back while it is pending, so the verdict is the one credit of that attempt: accepting credits
#: the refinement's latency reward ("accepted" below is only the floor for an accepted refinement
#: whose reward was not positive), rejecting credits "no gain" (0).
PERSON_REWARDS: dict[str, float] = {"accepted": 0.0, "rejected": 0.0}

#: Default learning rate of the Monte-Carlo update (chosen on the simulator's tuning seeds).
DEFAULT_ALPHA = 0.1
#: Step-size schedules: "constant" uses alpha every time (the paper's update); "mean" uses
#: max(alpha, 1 / visits), the running mean of an item's returns until alpha takes over.
SCHEDULES = ("constant", "mean")
DEFAULT_SCHEDULE = "mean"


#: How one attempt's reward is shared among the items in its context: "mc" credits every item with the
#: reward itself (the paper's per-item Monte-Carlo update); "advantage" credits each item with its own value
#: plus the context's surprise, the reward less the mean value of the items shown (`context_baselines`).
CREDIT_RULES = ("mc", "advantage")
DEFAULT_CREDIT = "mc"
#: Share of the context's surprise rule "advantage" uses instead of the reward (1: all of it; 0: the paper's).
ADVANTAGE_WEIGHT = 1.0


def check_credit_rule(rule: str) -> str:
    if rule not in CREDIT_RULES:
        raise ValueError(f"unknown credit rule {rule!r}; expected one of {', '.join(CREDIT_RULES)}")
    return rule


def context_baselines(qs: list[float | None], mean: float, weight: float = ADVANTAGE_WEIGHT) -> list[float]:
    """Per item of one context, what rule "advantage" takes off the reward: ``weight * (pred - q_i)``, where
    q_i is the item's value in the stage (an untried item, None, counts as `mean`, the stage's mean value
    over tried items) and pred the mean of the context's q. The item is then credited with
    ``reward - baseline_i = q_i + (reward - pred)`` (clipped to the reward range) by the ordinary
    Monte-Carlo step: it moves by the context's surprise, the same for every item shown.

    Why (issue 38): every reward went whole to all five items in the context, so an item usually shown
    beside a helpful one (a "rider") took its Q, and a helpful one first shown beside four poor ones took
    their failures (Q = -1, under every untried item): Q measured E[reward | shown], and under value
    retrieval the items shown together ended with the same Q. Moving every item by the surprise fits Q to
    "a context's reward is the mean of its items' values" (least mean squares): a success the helpful
    items' values already predict teaches the rider little, a failure a context of poor items was
    expected to have costs the helpful one little. With one item in the context, or every item at the
    context's mean, the target is the reward itself: the paper's update.
    """
    filled = [mean if q is None else q for q in qs]
    pred = sum(filled) / len(filled)
    return [weight * (pred - q) for q in filled]


def check_scheme(scheme: str) -> str:
    if scheme not in REWARD_SCHEMES:
        raise ValueError(f"unknown reward scheme {scheme!r}; expected one of {', '.join(REWARD_SCHEMES)}")
    return scheme


def draft_reward(outcome: str, scheme: str = DEFAULT_SCHEME) -> float:
    """Reward of a drafting attempt: paper +1 feasible / -1 otherwise; shaped graded by gate."""
    table = DRAFT_REWARDS_BY_SCHEME[check_scheme(scheme)]
    try:
        return table[outcome]
    except KeyError:
        raise ValueError(f"unknown outcome {outcome!r}; expected one of {', '.join(OUTCOMES)}") from None


def refine_reward(latency_ms: float | None, best_ms: float | None, correct: bool, scheme: str = DEFAULT_SCHEME) -> float:
    """Reward of a refinement against the best feasible latency so far.

    - incorrect, or no latency measured: ``REFINE_INCORRECT`` (-1);
    - no feasible baseline yet (``best_ms`` is None): 0, nothing to improve on;
    - otherwise paper ``tanh(ln(best_ms / latency_ms))``, shaped ``clip(ln(best_ms / latency_ms), -1, 1)``.
    """
    check_scheme(scheme)
    if not correct or latency_ms is None:
        return REFINE_INCORRECT
    if best_ms is None:
        return 0.0
    if latency_ms <= 0 or best_ms <= 0 or not (math.isfinite(latency_ms) and math.isfinite(best_ms)):
        raise ValueError(f"latencies must be positive and finite, got {latency_ms!r} and {best_ms!r}")
    gain = math.log(best_ms / latency_ms)
    if scheme == "paper":
        return math.tanh(gain)
    return max(-REFINE_CLIP, min(REFINE_CLIP, gain))


def person_reward(decision: str, refinement_reward: float = 0.0) -> float:
    """The one credit of a pending refinement once a person decides (see ``PERSON_REWARDS``)."""
    try:
        floor = PERSON_REWARDS[decision]
    except KeyError:
        raise ValueError(f"unknown decision {decision!r}; expected accepted or rejected") from None
    return max(floor, refinement_reward) if decision == "accepted" else floor


def reward_range(stage: str) -> tuple[float, float]:
    """The (lowest, highest) reward of a stage, used to put Q-values on a 0..1 scale for display."""
    if stage in ("draft", "refine"):
        return -1.0, 1.0
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


class RunningNorm:
    """Optional z-normalisation of refine rewards with running mean and variance (Welford).

    ``normalise(r)`` returns ``tanh((r - mean) / std)`` over the rewards seen before (r itself is
    then added), so it stays within [-1, 1]; with fewer than two rewards seen it returns r.
    """

    def __init__(self) -> None:
        self.n, self.mean, self.m2 = 0, 0.0, 0.0

    def normalise(self, reward: float) -> float:
        out = reward
        if self.n >= 2:
            std = math.sqrt(self.m2 / (self.n - 1))
            if std > 1e-9:
                out = math.tanh((reward - self.mean) / std)
        self.n += 1
        delta = reward - self.mean
        self.mean += delta / self.n
        self.m2 += delta * (reward - self.mean)
        return out
