from __future__ import annotations

import math

import pytest

from memory import TaskSignature
from memory.values import DRAFT_REWARDS, OUTCOMES, draft_reward, mc_update, normalised_value, refine_reward
from memory.writing import insight_from_refinement, trajectory_item

SIG = TaskSignature(task="softmax_rows", category="softmax", backend="cpu", shapes="x: 256x4096 f32")


def test_paper_draft_reward_is_plus_minus_one_and_shaped_follows_gate_order():
    assert [draft_reward(o) for o in OUTCOMES] == [-1.0, -1.0, -1.0, 1.0]
    assert DRAFT_REWARDS["feasible"] == 1.0
    shaped = [draft_reward(o, "shaped") for o in OUTCOMES]
    assert shaped == sorted(shaped) and len(set(shaped)) == 4 and (shaped[0], shaped[-1]) == (-1.0, 1.0)
    with pytest.raises(ValueError, match="unknown outcome"):
        draft_reward("passed")
    with pytest.raises(ValueError, match="reward scheme"):
        draft_reward("feasible", "bonus")


def test_refine_reward_is_tanh_of_log_improvement_or_clipped_log_when_shaped():
    assert refine_reward(5.0, 10.0, True) == pytest.approx(math.tanh(math.log(2)))
    assert refine_reward(10.0, 5.0, True) == pytest.approx(-math.tanh(math.log(2)))
    assert 0.99 < refine_reward(1.0, 100.0, True) < 1.0
    assert refine_reward(5.0, 10.0, True, "shaped") == pytest.approx(math.log(2))
    assert refine_reward(1.0, 100.0, True, "shaped") == 1.0
    assert refine_reward(1.0, 10.0, False) == -1.0
    assert refine_reward(None, 10.0, True) == -1.0
    assert refine_reward(4.0, None, True) == 0.0
    with pytest.raises(ValueError):
        refine_reward(0.0, 1.0, True)


def test_running_norm_z_normalises_after_two_rewards():
    from memory.values import RunningNorm

    norm = RunningNorm()
    assert norm.normalise(0.2) == 0.2 and norm.normalise(0.4) == 0.4
    assert norm.normalise(0.3) == pytest.approx(0.0)  # the mean of what came before
    assert -1.0 <= norm.normalise(-5.0) < -0.99


def test_mc_update_and_normalisation():
    assert mc_update(0.5, 1.0, 0.2) == pytest.approx(0.6)
    assert normalised_value(0.0, "draft") == 0.5 and normalised_value(-1.0, "draft") == 0.0
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


def test_person_verdict_is_the_one_credit_of_a_pending_refinement():
    from memory.values import person_reward

    assert person_reward("accepted", 0.4) == 0.4  # the refinement's own reward, credited once
    assert person_reward("accepted", -0.3) == 0.0  # accepting never counts as a loss
    assert person_reward("rejected", 0.4) == 0.0  # no gain
    with pytest.raises(ValueError, match="accepted or rejected"):
        person_reward("maybe")


def test_failed_attempt_is_a_compact_lesson_not_a_code_dump():
    code = "x = 1\n" * 800
    feedback = "The compile gate failed: undefined symbol foo\nrule: build\n" + "noise\n" * 200
    item = trajectory_item(SIG, "draft", code, "compile_fail", feedback=feedback, gates={"compile": "fail"},
                           source={"session": "s1", "version": 3})
    assert "x = 1" not in item.text and len(item.text) < 600
    assert "compile gate" in item.text and "undefined symbol foo" in item.text
    assert item.data["code"] == code and item.data["source"] == {"session": "s1", "version": 3}
    ok = trajectory_item(SIG, "draft", code, "feasible")
    assert "x = 1" in ok.text  # a feasible kernel keeps its code: it is a start point


def test_trivial_and_duplicate_insights_are_refused():
    from memory.writing import is_duplicate_insight

    with pytest.raises(ValueError, match="too short"):
        insight_from_refinement(SIG, "a", "b", 1.5, summarise=lambda p: "Variant 1.")
    text = "Fuse the max and sum passes\nOne pass with an online max halves memory traffic for row softmax."
    a = insight_from_refinement(SIG, "a", "b", 1.5, summarise=lambda p: text)
    b = insight_from_refinement(SIG, "c", "d", 1.6, summarise=lambda p: text + " Really.")
    other = insight_from_refinement(SIG, "c", "d", 1.6, summarise=lambda p: "Tile the matmul\nUse 64x64 shared-memory tiles and unroll the inner k loop by four.")
    assert is_duplicate_insight(b, [a]) is a and is_duplicate_insight(other, [a]) is None
