from __future__ import annotations

import math

import pytest

from memory import TaskSignature
from memory.values import DRAFT_REWARDS, OUTCOMES, draft_reward, mc_update, normalised_value, refine_reward
from memory.writing import insight_from_refinement, trajectory_item

SIG = TaskSignature(task="softmax_rows", category="softmax", backend="cpu", shapes="x: 256x4096 f32")


def test_draft_reward_follows_gate_order():
    rewards = [draft_reward(o) for o in OUTCOMES]
    assert rewards == sorted(rewards) and len(set(rewards)) == 4
    assert draft_reward("feasible") == 1.0 == max(DRAFT_REWARDS.values())
    with pytest.raises(ValueError, match="unknown outcome"):
        draft_reward("passed")


def test_refine_reward_is_clipped_log_improvement():
    assert refine_reward(5.0, 10.0, True) == pytest.approx(math.log(2))
    assert refine_reward(10.0, 5.0, True) == pytest.approx(-math.log(2))
    assert refine_reward(1.0, 100.0, True) == 1.0
    assert refine_reward(100.0, 1.0, True) == -1.0
    assert refine_reward(1.0, 10.0, False) == -1.0
    assert refine_reward(None, 10.0, True) == -1.0
    assert refine_reward(4.0, None, True) == 0.0
    with pytest.raises(ValueError):
        refine_reward(0.0, 1.0, True)


def test_mc_update_and_normalisation():
    assert mc_update(0.5, 1.0, 0.2) == pytest.approx(0.6)
    with pytest.raises(ValueError):
        mc_update(0.5, 1.0, 0.0)
    with pytest.raises(ValueError):
        mc_update(0.5, float("nan"), 0.2)
    assert normalised_value(0.0, "refine") == 0.5 and normalised_value(1.0, "draft") == 1.0


def test_trajectory_item_records_the_attempt():
    item = trajectory_item(SIG, "refine", "code()", "feasible", feedback="ok", latency_ms=1.5, author="person")
    assert item.kind == "trajectory" and item.provenance == "person" and item.backends == ["cpu"]
    assert item.data["code"] == "code()" and item.data["latency_ms"] == 1.5
    assert "softmax_rows" in item.title and "code()" in item.text
    with pytest.raises(ValueError, match="author"):
        trajectory_item(SIG, "draft", "x", "feasible", author="robot")


def test_insight_uses_the_summariser():
    prompts = []

    def summarise(prompt: str) -> str:
        prompts.append(prompt)
        return "Fuse the max and sum passes\nOne pass with an online max halves memory traffic."

    item = insight_from_refinement(SIG, before="slow()", after="fast()", speedup=1.7, summarise=summarise)
    assert item.kind == "insight" and item.title == "Fuse the max and sum passes"
    assert "online max" in item.text and item.data["speedup"] == 1.7
    assert "slow()" in prompts[0] and "fast()" in prompts[0] and "1.70x" in prompts[0]
    with pytest.raises(ValueError, match="no text"):
        insight_from_refinement(SIG, "a", "b", 1.5, summarise=lambda p: "  ")
    with pytest.raises(ValueError, match="faster"):
        insight_from_refinement(SIG, "a", "b", 0.9, summarise=summarise)


def test_person_rewards_rank_acceptance_above_rejection():
    from memory.values import REFINE_CLIP, person_reward

    assert person_reward("accepted") > person_reward("rejected") == 0.0
    assert person_reward("accepted") <= REFINE_CLIP
    with pytest.raises(ValueError, match="accepted or rejected"):
        person_reward("maybe")
