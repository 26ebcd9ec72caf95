"""The draft -> refine step machine, with a verifier double and a real temporary memory bank."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from core.events import read_events
from core.llm import ScriptedModel
from core.session import Budgets, Session, SessionBusy, SessionError, list_sessions, replay
from core.tasks import load_task
from memory import MemoryStore
from tests.fakes.verdicts import fake_verify, kernel, reply


@pytest.fixture
def task():
    return load_task("softmax_rows")


@pytest.fixture
def store(tmp_path):
    s = MemoryStore(tmp_path / "memory.json", fsync=False)
    yield s
    s.close()


def make(tmp_path, task, replies, store=None, **kw):
    kw.setdefault("budgets", Budgets(draft_steps=3, refine_steps=2))
    return Session.create(task, model=ScriptedModel(replies), memory=store, root=tmp_path / "sessions",
                          verify_fn=fake_verify, **kw)


def kinds(events):
    return [e.kind for e in events]


def test_draft_reaches_feasible_then_refines(tmp_path, task, store):
    lesson = "Vectorise the row loop\nKeeping the inner loop branch-free lets the compiler emit SIMD code."
    s = make(tmp_path, task, [reply("compile_fail"), reply("feasible", 0.8), reply("feasible", 0.5), lesson],
             store, auto_accept=True)
    first = s.step()
    assert s.stage == "draft" and s.best is None and s.used["draft"] == 1
    assert "retrieved" in kinds(first) and "q_update" in kinds(first)
    second = s.step()
    assert s.best is not None and s.best.version == 2 and s.stage == "refine"
    assert kinds(second)[-1] == "stage_changed"
    third = s.step()
    assert s.best.version == 3 and s.best.latency_ms == 0.5
    assert "pending_refinement" in kinds(third) and "accepted" in kinds(third)
    insight = next(e for e in third if e.kind == "insight")
    assert insight.data["speedup"] == pytest.approx(0.8 / 0.5)
    assert store.get(insight.data["id"]).title == "Vectorise the row loop"
    assert [e.data["purpose"] for e in third if e.kind == "model_reply"] == ["kernel", "insight"]
    assert s.kernel_path.read_text() == kernel("feasible", 0.5)
    assert (s.path / "kernels" / "0001_model_draft.py").read_text() == kernel("compile_fail")


def test_failing_gate_feedback_goes_into_next_prompt(tmp_path, task):
    s = make(tmp_path, task, [reply("compile_fail"), reply("incorrect"), reply("feasible", 1.0)])
    s.step()
    prompt = next(e for e in s.step() if e.kind == "prompt")
    user = prompt.data["messages"][-1]["content"]
    assert "The Compile gate failed" in user and "kernel.cpp:3: error: expected ';'" in user
    assert "# verdict: compile_fail" in user  # the previous attempt is shown
    prompt3 = next(e for e in s.step() if e.kind == "prompt")
    assert "max abs diff 0.3" in prompt3.data["messages"][-1]["content"]


def test_draft_budget_exhaustion_ends_session(tmp_path, task):
    s = make(tmp_path, task, [reply("hack_fail")] * 5, budgets=Budgets(draft_steps=2, refine_steps=2))
    events = s.run()
    assert s.stage == "done" and s.best is None and s.used == {"draft": 2, "refine": 0}
    assert "without a feasible kernel" in s.done_reason
    assert kinds(events).count("kernel") == 2
    assert s.step() == []


def test_refine_budget_and_token_cap(tmp_path, task):
    s = make(tmp_path, task, [reply("feasible", 1.0)] + [reply("feasible", 2.0)] * 5,
             budgets=Budgets(draft_steps=2, refine_steps=3))
    s.run()
    assert s.used == {"draft": 1, "refine": 3} and s.done_reason == "refine budget spent"
    assert s.best.version == 1  # slower refinements never replace the best
    capped = make(tmp_path, task, [reply("compile_fail")] * 5, budgets=Budgets(draft_steps=5, max_tokens=1))
    capped.run()
    assert capped.used["draft"] == 1 and "token budget" in capped.done_reason


def test_pending_refinement_accept_and_reject(tmp_path, task, store):
    replies = [reply("feasible", 1.0), reply("feasible", 0.5, "a"), reply("feasible", 0.25, "b")]
    s = make(tmp_path, task, replies, store, budgets=Budgets(draft_steps=1, refine_steps=3))
    s.step()
    s.step()
    assert s.pending is not None and s.pending.version == 2 and s.best.version == 1
    assert s.kernel_path.read_text() == kernel("feasible", 0.5, "a")  # the candidate is on screen
    rejected = s.reject_pending()
    assert kinds(rejected)[:2] == ["rejected", "q_update"]
    assert all(c["stage"] == "refine" for c in rejected[1].data["changes"])
    assert s.pending is None and s.best.version == 1
    assert s.kernel_path.read_text() == kernel("feasible", 1.0)
    s.step()
    accepted = s.accept_pending()
    assert kinds(accepted)[:2] == ["accepted", "q_update"] and s.best.version == 3 and s.pending is None
    reward3 = next(e for e in read_events(s.path) if e.kind == "reward" and e.data["version"] == 3)
    assert reward3.data["credited"] == [] and reward3.data["deferred"], "a pending refinement is credited once"
    assert accepted[1].data["reward"] == pytest.approx(math.tanh(math.log(1.0 / 0.25)))  # its own reward, at the verdict
    assert {c["item_id"] for c in accepted[1].data["changes"]} == set(reward3.data["deferred"])
    assert rejected[1].data["reward"] == 0.0
    with pytest.raises(SessionError, match="no pending"):
        s.accept_pending()


def test_no_code_reply_is_a_failed_step_with_reason(tmp_path, task):
    s = make(tmp_path, task, ["Sorry, I can't help with that.", reply("feasible", 1.0)])
    events = s.step()
    err = next(e for e in events if e.kind == "model_error")
    assert err.data["reason"] == "no_code" and "no code block" in err.data["message"]
    assert "kernel" not in kinds(events) and s.used["draft"] == 1
    nxt = next(e for e in s.step() if e.kind == "prompt")
    assert "not usable" in nxt.data["messages"][-1]["content"]


def test_model_error_and_verifier_crash_do_not_raise(tmp_path, task):
    def broken_verify(*a, **k):
        raise RuntimeError("segfault in build\nmore")

    s = Session.create(task, model=ScriptedModel([{"error": "boom"}, reply("feasible", 1.0)]),
                       root=tmp_path, verify_fn=broken_verify, budgets=Budgets(2, 0))
    assert next(e for e in s.step() if e.kind == "model_error").data["message"] == "boom"
    err = next(e for e in s.step() if e.kind == "error")
    assert err.data["where"] == "verifier" and "segfault in build" in err.data["message"]
    assert s.stage == "done"


def test_human_edit_credits_only_the_memories_marked_used(tmp_path, task, store):
    s = make(tmp_path, task, [reply("compile_fail"), reply("compile_fail")], store,
             budgets=Budgets(draft_steps=2, refine_steps=1))
    s.step()
    onscreen = [h.id for h in s.retrieved]
    assert onscreen and s.onscreen_ids == onscreen
    with pytest.raises(SessionError, match="not on screen"):
        s.mark_used("nope")
    used, unused = onscreen[0], onscreen[1:]
    s.mark_used(used)
    s.mark_used(onscreen[1])
    s.mark_used(onscreen[1], used=False)  # unmarked again
    before = {i: store.get(i).q1 for i in onscreen}
    events = s.submit_human_edit(kernel("feasible", 0.9))
    edit = next(e for e in events if e.kind == "human_edit")
    assert edit.data["credited"] == [used]
    q = next(e for e in events if e.kind == "q_update")
    assert {c["item_id"] for c in q.data["changes"]} == {used}
    assert store.get(used).q1 > before[used]  # feasible reward 1.0 > its earlier value
    assert all(store.get(i).q1 == before[i] for i in unused)  # on screen but not marked: not credited
    added = next(e for e in events if e.kind == "memory_added")
    assert store.get(added.data["id"]).provenance == "person"
    assert s.best.author == "person" and s.stage == "refine"
    assert s.used["draft"] == 1  # a person's edit does not spend the model's budget


def test_human_edit_credits_nothing_by_default(tmp_path, task, store):
    s = make(tmp_path, task, [reply("compile_fail")], store)
    s.step()
    events = s.submit_human_edit(kernel("feasible", 0.9))
    assert next(e for e in events if e.kind == "human_edit").data["credited"] == []
    assert "q_update" not in kinds(events)


def test_manual_mode_needs_a_person(tmp_path, task):
    s = Session.create(task, model=None, root=tmp_path, verify_fn=fake_verify)
    assert s.manual
    events = s.run()
    assert kinds(events) == ["needs_human"] and "No model configured" in events[0].data["message"]
    s.submit_human_edit(kernel("feasible", 0.7))
    assert s.stage == "refine" and s.best.speedup == pytest.approx(1 / 0.7)


def test_busy_session_refuses_a_second_step(tmp_path, task):
    holder = {}

    def slow_verify(*a, **k):
        with pytest.raises(SessionBusy):
            holder["s"].submit_human_edit(kernel("feasible", 1.0))
        return fake_verify(*a, **k)

    s = Session.create(task, model=ScriptedModel([reply("feasible", 1.0)]), root=tmp_path, verify_fn=slow_verify)
    holder["s"] = s
    s.step()
    assert not s.busy and s.best is not None


def test_events_are_jsonl_and_fsynced_per_event(tmp_path, task, monkeypatch):
    import core.events as events_mod

    synced, sizes = [], []
    real_fsync = events_mod.os.fsync

    def spy(fd):
        real_fsync(fd)
        if Path(os.readlink(f"/proc/self/fd/{fd}")).name == "events.jsonl":
            synced.append(fd)

    s = make(tmp_path, task, [reply("feasible", 1.0)])
    monkeypatch.setattr(events_mod.os, "fsync", spy)
    log = s.path / "events.jsonl"
    seen = s.step(on_event=lambda e: sizes.append(log.stat().st_size))
    assert len(synced) == len(seen)
    assert sizes == sorted(sizes) and len(set(sizes)) == len(sizes)  # the file grows with every event
    lines = log.read_text().splitlines()
    assert [json.loads(x)["kind"] for x in lines] == ["session_started"] + kinds(seen)


def test_open_rebuilds_state_and_tolerates_a_torn_last_line(tmp_path, task):
    s = make(tmp_path, task, [reply("compile_fail"), reply("feasible", 0.8), reply("feasible", 0.4)],
             auto_accept=True)
    s.run()
    with open(s.path / "events.jsonl", "a") as f:
        f.write('{"kind": "kernel", "data": {"vers')
    again = Session.open(s.path)
    assert again.summary() == s.summary()
    assert [a.summary() for a in again.history] == [a.summary() for a in s.history]
    again.add_steps("refine", 1)  # appending after a torn line starts a fresh line
    assert [e.kind for e in read_events(s.path / "events.jsonl")][-2:] == ["budget_changed", "stage_changed"]


def test_resume_continues_with_remaining_budget_and_next_reply(tmp_path, task):
    s = make(tmp_path, task, [reply("compile_fail"), reply("incorrect"), reply("feasible", 1.0)])
    s.step()
    again = Session.open(s.path, verify_fn=fake_verify)
    assert again.used["draft"] == 1 and again.client.position == 1
    again.run()
    assert again.best.version == 3 and again.used["draft"] == 3


def test_a_reopened_session_verifies_with_the_settings_it_was_created_with(tmp_path, task):
    """`evokernel resume` has no verifier options: the tolerance, policy, memory limit and threads chosen
    when the session began carry over (it used to reopen with the defaults); settings given when it is
    reopened win; a malformed record falls back to the defaults."""
    import json

    from core.verdicts import VerifyConfig

    chosen = VerifyConfig(atol=1e-2, rtol=2e-2, policy="strict", memory_gb=3.0, threads=2, trials=7,
                          l2_flush_mb=128, extra={"note": "kept"}, build_root=str(tmp_path / "machine-specific"))
    seen = []

    def recording_verify(ref, cand, backend="cpu", config=None, on_gate=None):
        seen.append(config)
        return fake_verify(ref, cand, backend, config=config, on_gate=on_gate)

    s = make(tmp_path, task, [reply("compile_fail"), reply("incorrect")], verify_config=chosen)
    s.step()
    again = Session.open(s.path, verify_fn=recording_verify)
    again.step()
    got = seen[-1]
    assert (got.atol, got.rtol, got.policy, got.memory_gb, got.threads, got.trials) == (1e-2, 2e-2, "strict", 3.0, 2, 7)
    assert got.l2_flush_mb == 128 and got.extra == {"note": "kept"} and got.build_root is None
    mine = Session.open(s.path, verify_fn=recording_verify, verify_config=VerifyConfig(atol=0.5))
    assert mine.verify_config.atol == 0.5
    meta = json.loads((s.path / "session.json").read_text())
    meta["settings"]["verifier"] = {"atol": "lots", "no_such": 1}
    (s.path / "session.json").write_text(json.dumps(meta))
    assert Session.open(s.path, lock=False).verify_config.atol is None


def test_replay_reemits_recorded_events_and_lists_sessions(tmp_path, task):
    s = make(tmp_path, task, [reply("feasible", 0.5)], budgets=Budgets(1, 0))
    live = [e.to_dict() for e in s.run()]
    seen = []
    replayed = replay(s.path, on_event=seen.append)
    assert [e.to_dict() for e in replayed][1:] == live and seen == replayed
    make(tmp_path, task, [], budgets=Budgets(1, 0))
    rows = list_sessions(tmp_path / "sessions")
    assert len(rows) == 2
    done = next(r for r in rows if r["id"] == s.id)
    assert done["best_speedup"] == pytest.approx(2.0) and done["steps"] == {"draft": 1, "refine": 0}


def test_set_stage_and_reverify(tmp_path, task):
    s = make(tmp_path, task, [reply("incorrect")])
    with pytest.raises(SessionError, match="no feasible kernel"):
        s.set_stage("refine")
    s.step()
    events = s.reverify()
    v = next(e for e in events if e.kind == "verification")
    assert v.data["reverify"] and v.data["version"] == 1
    assert "reward" not in kinds(events)


def test_reverify_bypasses_the_verdict_cache(tmp_path, task):
    """A step may reuse a cached verdict; a reverification must really run the gates again."""
    from verifier import VerifyConfig

    configs = []

    def recording_verify(ref, cand, backend="cpu", config=None, on_gate=None):
        configs.append(config)
        return fake_verify(ref, cand, backend, config, on_gate)

    session = Session.create(task, model=ScriptedModel([reply("feasible", 0.5)]), root=tmp_path / "sessions",
                             verify_fn=recording_verify, verify_config=VerifyConfig(trials=2))
    session.step()
    session.reverify()
    assert configs[0].use_cache is True and configs[0].trials == 2
    assert configs[1].use_cache is False and configs[1].trials == 2, "reverify keeps the settings, drops the cache"


def test_an_improvement_must_beat_timing_noise():
    from core.rewards import is_improvement
    from verifier.result import GateResult, VerificationResult

    def result(ms, iqr):
        gates = [GateResult(n, "pass") for n in ("anti_hacking", "compile", "correctness")]
        gates.append(GateResult("latency", "pass", detail={"median_ms": ms, "iqr_ms": iqr}))
        return VerificationResult("cpu", gates, latency_ms=ms, reference_ms=2.0)

    assert is_improvement(result(0.9, 0.01), None)
    assert is_improvement(result(0.9, 0.01), 1.0)
    assert not is_improvement(result(0.99, 0.001), 1.0), "1% is within the noise floor"
    assert not is_improvement(result(0.9, 0.4), 1.0), "a gain smaller than half the spread is noise"
    assert not is_improvement(result(1.1, 0.01), 1.0)


def test_headless_run_stops_at_a_model_that_cannot_be_used(tmp_path, task):
    """No API key will not fix itself: one failed step, not the whole budget spent on the same error."""
    from core.llm import ModelError

    class NoKey:
        name = "openai/test"
        calls = 0

        def complete(self, messages, on_token=None):
            NoKey.calls += 1
            raise ModelError("openai/test: no API key; set OPENAI_API_KEY", reason="auth")

    session = Session.create(task, model=NoKey(), root=tmp_path / "sessions", verify_fn=fake_verify,
                             budgets=Budgets(draft_steps=4, refine_steps=0))
    events = session.run()
    assert NoKey.calls == 1
    assert [e.data["reason"] for e in events if e.kind == "model_error"] == ["auth"]
