"""The memory as a session uses it: what `retrieved` records, start points, one credit per verdict."""

from __future__ import annotations

import pytest

from core.events import read_events
from core.llm import ScriptedModel
from core.session import Budgets, Session
from core.tasks import load_task
from memory import MemoryStore, RetrievalPolicy
from tests.fakes.verdicts import fake_verify, reply

LESSON = "Vectorise the row loop\nKeeping the inner loop branch-free lets the compiler emit SIMD code for rows."


@pytest.fixture
def store(tmp_path):
    s = MemoryStore(tmp_path / "memory.json", fsync=False)
    yield s
    s.close()


def make(tmp_path, replies, store, **kw):
    kw.setdefault("budgets", Budgets(draft_steps=2, refine_steps=3))
    return Session.create(load_task("softmax_rows"), model=ScriptedModel(replies), memory=store,
                          root=tmp_path / "sessions", verify_fn=fake_verify, **kw)


def events_of(s, kind):
    return [e for e in read_events(s.path) if e.kind == kind]


def test_retrieved_event_records_the_pool_and_why_each_slot_was_chosen(tmp_path, store):
    s = make(tmp_path, [reply("compile_fail")], store, policy=RetrievalPolicy(k=3, epsilon=0.0))
    s.step()
    ev = events_of(s, "retrieved")[0].data
    assert len(ev["pool"]) == 15 and {"id", "similarity", "q"} <= set(ev["pool"][0])
    assert ev["explored"] == [] and ev["slots"] == 3 and len(ev["similarity_top"]) == 3
    assert [i["chosen_by"] for i in ev["items"]] == ["value", "value", "value", "rule"]
    ranked = [i["id"] for i in ev["items"][:3]]
    assert set(ranked) <= {p["id"] for p in ev["pool"]}
    reward = events_of(s, "reward")[0].data
    assert reward["credited"] == ranked and reward["value"] == -1.0  # the contract item is not credited
    assert s.meta["settings"]["retrieval"]["epsilon"] == 0.0  # the policy is recorded in full


def test_failed_attempts_merge_into_one_lesson(tmp_path, store):
    s = make(tmp_path, [reply("compile_fail"), reply("compile_fail")], store)
    s.run()
    added = events_of(s, "memory_added")
    assert [e.data["merged"] for e in added] == [False, True] and added[0].data["id"] == added[1].data["id"]
    lesson = store.get(added[0].data["id"])
    assert lesson.data["merged"] == 2 and "def " not in lesson.text  # a lesson, not the code
    assert lesson.data["source"]["session"] == s.id and lesson.data["source"]["version"] == 2


def test_refine_start_point_is_chosen_by_q2_and_credited(tmp_path, store):
    replies = [reply("feasible", 1.0), reply("feasible", 0.8, "a"), reply("feasible", 0.9, "b"), LESSON, LESSON]
    s = make(tmp_path, replies, store, auto_accept=True, policy=RetrievalPolicy(k=2, epsilon=0.0))
    s.run()
    refines = [e.data for e in events_of(s, "retrieved") if e.data["stage"] == "refine"]
    first, second = refines[0]["start_point"], refines[1]["start_point"]
    assert first["version"] == 1 and [p["version"] for p in first["points"]] == [1]
    assert [p["version"] for p in second["points"]] == [1, 2]
    ids = {e.data["version"]: e.data["id"] for e in events_of(s, "memory_added")}
    rewards = {e.data["version"]: e.data for e in events_of(s, "reward")}
    assert ids[1] in rewards[2]["credited"], "the start point is credited with the refinement"
    assert store.get(ids[1]).q2 > 0  # v1 earned tanh(ln 1.25) as v2's start point
    best = max(second["points"], key=lambda p: (p["q2"], p["version"]))  # greedy by Q2, ties to the newer
    assert second["version"] == best["version"] and not second["explored"]


def test_insights_are_not_stored_twice(tmp_path, store):
    replies = [reply("feasible", 1.0), reply("feasible", 0.5, "a"), LESSON, reply("feasible", 0.25, "b"), LESSON]
    s = make(tmp_path, replies, store, auto_accept=True, budgets=Budgets(draft_steps=1, refine_steps=2))
    s.run()
    insights = [e.data for e in events_of(s, "insight")]
    assert "id" in insights[0] and "repeats the stored insight" in insights[1]["skipped"]
    assert len(store.items("insight")) == 1
    assert store.items("insight")[0].data["source"]["session"] == s.id


def test_trivial_insight_is_refused(tmp_path, store):
    replies = [reply("feasible", 1.0), reply("feasible", 0.5, "a"), "Variant 1."]
    s = make(tmp_path, replies, store, auto_accept=True, budgets=Budgets(draft_steps=1, refine_steps=1))
    s.run()
    assert "too short" in events_of(s, "insight")[0].data["skipped"]
    assert store.items("insight") == []


def test_prompt_puts_the_contract_apart_from_the_ranked_notes(tmp_path, store):
    s = make(tmp_path, [reply("compile_fail")], store, policy=RetrievalPolicy(k=2, epsilon=0.0))
    s.step()
    prompt = events_of(s, "prompt")[0].data["messages"][-1]["content"]
    contract, notes = prompt.index("## The kernel contract"), prompt.index("## Notes from memory")
    assert contract < notes and "Kernel contract for the CPU C++ backend" in prompt[contract:notes]
    assert prompt.count("### ") >= 3  # the contract and the two ranked notes


MODEL_LESSON = ("The accumulator was used before it was declared, so the kernel did not compile; "
                "declare every temporary with its type before the loop.")


def _litellm_session(tmp_path, store, monkeypatch, lesson_reply):
    """A session on a real litellm model path whose replies come from litellm's own mock_response."""
    import litellm

    from core.llm import ModelConfig

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    real = getattr(litellm.completion, "real", litellm.completion)

    def fake(messages, **kw):
        asks_lesson = "failed with the outcome" in messages[-1]["content"]
        return real(messages=messages, mock_response=lesson_reply if asks_lesson else reply("compile_fail"), **kw)

    fake.real = real
    monkeypatch.setattr(litellm, "completion", fake)
    return Session.create(load_task("softmax_rows"), model=ModelConfig("gpt-4o-mini", retries=0), memory=store,
                          root=tmp_path / "sessions", verify_fn=fake_verify,
                          budgets=Budgets(draft_steps=1, refine_steps=0))


def test_a_configured_model_writes_the_failure_lesson(tmp_path, store, monkeypatch):
    monkeypatch.delenv("EVOKERNEL_MODEL_LESSONS", raising=False)
    s = _litellm_session(tmp_path, store, monkeypatch, MODEL_LESSON)
    s.step()
    assert [e.data["purpose"] for e in events_of(s, "model_reply")] == ["kernel", "lesson"]
    item = store.get(events_of(s, "memory_added")[0].data["id"])
    assert MODEL_LESSON in item.text and "Outcome:" not in item.text and "def " not in item.text
    assert item.data["source"]["lesson"] == "model"


def test_a_trivial_model_lesson_or_lessons_switched_off_fall_back_to_the_rule(tmp_path, store, monkeypatch):
    monkeypatch.delenv("EVOKERNEL_MODEL_LESSONS", raising=False)
    s = _litellm_session(tmp_path, store, monkeypatch, "Fix it.")
    s.step()
    item = store.get(events_of(s, "memory_added")[0].data["id"])
    assert "Outcome: compile_fail at the compile gate" in item.text and "lesson" not in item.data["source"]
    monkeypatch.setenv("EVOKERNEL_MODEL_LESSONS", "0")
    s2 = _litellm_session(tmp_path / "off", store, monkeypatch, MODEL_LESSON)
    s2.step()
    assert [e.data["purpose"] for e in events_of(s2, "model_reply")] == ["kernel"]  # no lesson call at all


def test_refine_rewards_can_be_z_normalised_with_the_sessions_running_statistics(tmp_path, store):
    import math

    replies = [reply("feasible", 1.0), reply("feasible", 1.2, "a"), reply("feasible", 1.5, "b"), reply("feasible", 1.1, "c")]
    s = make(tmp_path, replies, store, auto_accept=True, budgets=Budgets(draft_steps=1, refine_steps=3),
             policy=RetrievalPolicy(k=2, epsilon=0.0, refine_norm=True))
    s.run()
    refine = [e.data for e in events_of(s, "reward") if e.data["stage"] == "refine"]
    assert len(refine) == 3 and all("raw" in r for r in refine)
    raws = [r["raw"] for r in refine]
    assert raws[0] < 0 and len(set(raws)) == 3  # slower than the best: the paper's raw rewards differ
    assert [r["value"] for r in refine[:2]] == raws[:2]  # fewer than two earlier rewards: unchanged
    mean = (raws[0] + raws[1]) / 2
    sd = math.sqrt(((raws[0] - mean) ** 2 + (raws[1] - mean) ** 2) / 1)
    assert refine[2]["value"] == pytest.approx(math.tanh((raws[2] - mean) / sd))
    q = [e.data for e in events_of(s, "q_update") if e.data["stage"] == "refine"]
    assert q[-1]["reward"] == pytest.approx(refine[2]["value"])  # the memory learns from the normalised reward
    assert s.meta["settings"]["retrieval"]["refine_norm"] is True


def test_verifying_the_untouched_starter_stores_no_lesson(tmp_path, store):
    """The starter copies its input by design: verifying it as it is must not add a failure lesson to
    the shared bank (every new manual session would add one); an edited kernel still does."""
    s = Session.create(load_task("relu"), model=None, memory=store, root=tmp_path / "sessions", verify_fn=fake_verify)
    assert s.manual and s.current_source
    s.submit_human_edit(s.current_source)
    assert events_of(s, "memory_added") == []
    s.submit_human_edit(s.current_source + "\n# an edit\n")
    assert len(events_of(s, "memory_added")) == 1


def test_verifying_the_untouched_starter_is_recorded_as_the_seed_and_credits_nothing(tmp_path, store):
    """Pressing v (or ctrl+s) on the starter as written: the kernel is the starter's ("seed"), not the
    person's; no reward, no memory credited (nobody wrote it), no step counted; the person's marks stand
    for their own next edit; the folder replays to the same state."""
    s = Session.create(load_task("relu"), model=None, memory=store, root=tmp_path / "sessions", verify_fn=fake_verify)
    ids = list(s.onscreen_ids)[:2]
    assert ids
    before = {i: (store.get(i).q1, store.get(i).visits1) for i in ids}
    for i in ids:
        s.mark_used(i)
    s.submit_human_edit(s.current_source)
    seed = s.history[-1]
    assert seed.author == "seed" and seed.file.endswith("_seed_draft.py") and seed.result is not None
    assert [events_of(s, k) for k in ("human_edit", "reward", "q_update", "memory_added")] == [[], [], [], []]
    assert {i: (store.get(i).q1, store.get(i).visits1) for i in ids} == before
    assert s.used["draft"] == 0 and s.state.in_flight is None
    reopened = Session.open(s.path, lock=False)
    assert reopened.state == s.state
    s.submit_human_edit(s.current_source + "\n# mine\n")
    assert s.history[-1].author == "person"
    assert events_of(s, "human_edit")[0].data["credited"] == ids  # the marks were the person's, kept for their edit
    assert events_of(s, "reward")[0].data["credited"] == ids


def test_a_starter_check_cut_short_is_finished_as_the_seeds_without_credit(tmp_path, store):
    """The process dies while the starter as written is being verified: the next action finishes that
    step as the starter's (no reward, no memory credited, no step counted)."""
    def cut_short(*args, **kwargs):
        raise KeyboardInterrupt

    s = Session.create(load_task("relu"), model=None, memory=store, root=tmp_path / "sessions", verify_fn=cut_short)
    s.mark_used(s.onscreen_ids[0])
    with pytest.raises(KeyboardInterrupt):
        s.submit_human_edit(s.current_source)
    s.close()
    again = Session.open(s.path, memory=store, verify_fn=fake_verify)
    assert again.interrupted is not None and again.interrupted.author == "seed"
    again.step()
    assert [events_of(again, k) for k in ("human_edit", "reward", "q_update")] == [[], [], []]
    assert [e.data["counts"] for e in events_of(again, "step_done")] == [False]
    assert again.used["draft"] == 0 and again.state.in_flight is None and again.history[-1].result is not None
