"""One fold for every consumer: recorded sessions folded by the session, a reopened session, the app's view
(at every replay position) and the command line's text must agree on stage, best, pending and the kernel."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass

import pytest
from click.testing import CliRunner

from core.events import (
    EVENT_KINDS,
    PAYLOADS,
    Accepted,
    Event,
    Kernel,
    MemoryMarked,
    Payload,
    PendingRefinement,
    SessionState,
    apply,
    describe_event,
    fold,
    read_events,
)
from core.llm import ScriptedModel
from core.session import Budgets, Session
from core.tasks import load_task
from evokernel_tui.cli import cli
from evokernel_tui.view import fold as view_fold
from evokernel_tui.view import timeline, view_at
from memory import MemoryStore
from tests.fakes.verdicts import fake_verify, kernel, reply


@pytest.fixture
def store(tmp_path):
    s = MemoryStore(tmp_path / "memory.json", fsync=False)
    yield s
    s.close()


def _session(tmp_path, store, replies, draft=1, refine=2):
    model = ScriptedModel(list(replies)) if replies is not None else None
    return Session.create(load_task("relu"), model=model, memory=store, root=tmp_path / "sessions",
                          verify_fn=fake_verify, budgets=Budgets(draft_steps=draft, refine_steps=refine))


def faster_edit_while_pending(tmp_path, store):
    """The model's refinement is pending when a person's faster edit is accepted: the pending one is stale."""
    s = _session(tmp_path, store, [reply("feasible", 1.0), reply("feasible", 0.5, "model")])
    s.step()
    s.step()
    assert s.pending is not None and s.pending.version == 2
    s.submit_human_edit(kernel("feasible", 0.25, "person"))
    assert s.best.version == 3 and s.pending is None
    return s


def reject_then_pending(tmp_path, store):
    s = _session(tmp_path, store, [reply("feasible", 1.0), reply("feasible", 0.5, "a"), reply("feasible", 0.4, "b")])
    s.step()
    s.step()
    s.reject_pending()
    s.step()
    assert s.pending is not None and s.pending.version == 3
    return s


def slower_edit_while_pending(tmp_path, store):
    """A person's edit accepted over the best but slower than the pending refinement leaves that one pending."""
    s = _session(tmp_path, store, [reply("feasible", 1.0), reply("feasible", 0.5, "model")])
    s.step()
    s.step()
    s.submit_human_edit(kernel("feasible", 0.9, "person"))
    assert s.pending is not None and s.pending.version == 2 and s.best.version == 3
    return s


def manual_mode(tmp_path, store):
    s = _session(tmp_path, store, None)
    s.step()  # needs a person
    s.submit_human_edit(kernel("compile_fail", tag="typo"))
    s.submit_human_edit(kernel("feasible", 0.7, "fixed"))
    return s


def failures_then_feasible(tmp_path, store):
    s = _session(tmp_path, store, [reply("compile_fail"), "no code here", reply("feasible", 0.6)], draft=3, refine=0)
    s.run()
    return s


SCENARIOS = [faster_edit_while_pending, reject_then_pending, slower_edit_while_pending, manual_mode,
             failures_then_feasible]


def _digest(state: SessionState) -> dict:
    return {"stage": state.stage, "best": state.best_version, "pending": state.pending_version,
            "source": state.current_source, "kernels": [a.version for a in state.history],
            "outcomes": [a.outcome for a in state.history], "used": dict(state.used), "tokens": state.tokens,
            "cost": state.cost}


def _cli_replay(tmp_path, session_id):
    res = CliRunner().invoke(cli, ["replay", session_id, "--sessions-dir", str(tmp_path / "sessions")],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    as_json = CliRunner().invoke(cli, ["replay", session_id, "--json", "--sessions-dir", str(tmp_path / "sessions")],
                                 catch_exceptions=False)
    summary = json.loads(as_json.stdout.splitlines()[-1])["summary"]
    return res.output, summary


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda f: f.__name__)
def test_every_consumer_folds_the_same_session(tmp_path, store, scenario):
    live = scenario(tmp_path, store)
    events = read_events(live.path)
    expected = _digest(live.state)

    assert _digest(fold(events)) == expected
    reopened = Session.open(live.path, lock=False)
    assert _digest(reopened.state) == expected and reopened.state == fold(events)

    view = view_fold([e.to_dict() for e in events])  # the app folds the stored JSON form
    assert _digest(view.state) == expected
    assert view.stage == expected["stage"] and view.best_version == expected["best"]
    assert view.source == expected["source"] and view.tokens == expected["tokens"]
    pending = live.state.pending
    assert view.pending == (pending.source if pending else None)

    # every replay position shows what the session's fold says at that point
    for step in timeline(events):
        prefix = [e for e in events if e.step <= step]
        at = view_at(events, step)
        state = fold(prefix)
        assert (at.stage, at.best_version, at.source) == (state.stage, state.best_version, state.current_source)
        assert at.pending == (state.pending.source if state.pending else None), f"step {step}"

    text, summary = _cli_replay(tmp_path, live.id)
    assert summary["pending"] == expected["pending"] and summary["stage"] == expected["stage"]
    assert (summary["best"] or {}).get("version") == expected["best"]
    assert ("pending" in text.splitlines()[-1]) == (expected["pending"] is not None)
    for ev in events:  # every kind of this recording has its line or is deliberately quiet
        describe_event(ev)
        assert not ev.payload.extra, f"{ev.kind} was written with keys its payload has no field for"


def test_a_session_writes_only_what_its_typed_payloads_say(tmp_path, store):
    """`Journal.emit` reads every event through its payload type: a key the type lacks, or a kind without a
    type, is a programming error at the write, never an untyped key a reader meets later."""
    session = Session.create(load_task("relu"), model=None, memory=store, root=tmp_path / "sessions")
    with pytest.raises(ValueError, match="MemoryMarked has no field for \\['colour'\\]"):
        session.journal.emit(MemoryMarked(id="x", used=True, extra={"colour": "red"}))

    @dataclass(kw_only=True)
    class MadeUp(Payload):
        KIND = "made_up"

    with pytest.raises(ValueError, match="no event payload type for 'made_up'"):
        session.journal.emit(MadeUp())
    kinds = [e.kind for e in read_events(session.path)]
    assert "memory_marked" not in kinds and "made_up" not in kinds, "a refused event is not recorded"


def test_replay_of_a_faster_edit_shows_no_stale_pending_refinement(tmp_path, store):
    live = faster_edit_while_pending(tmp_path, store)
    events = read_events(live.path)
    edit_step = next(e.step for e in events if e.kind == "human_edit")
    before, after = view_at(events, edit_step - 1), view_at(events, edit_step)
    assert before.pending is not None  # the refinement was pending before the edit ...
    assert after.pending is None and after.best_version == 3  # ... and is not shown once the edit is accepted
    text, summary = _cli_replay(tmp_path, live.id)
    assert summary["pending"] is None and "pending" not in text.splitlines()[-1]


def test_apply_is_pure_and_tolerant():
    start = SessionState()
    k = Event.of(Kernel(version=1, stage="refine", author="model", file="k.py", source="v1"), step=1)
    s1 = apply(start, k)
    assert start == SessionState() and s1 is not start and s1.current_source == "v1"
    snapshot = copy.deepcopy(s1)
    s2 = apply(s1, Event.of(PendingRefinement(version=1), step=1))
    assert s1 == snapshot and s2.pending_version == 1
    s3 = apply(s2, Event.of(Accepted(version=1, by="person"), step=2))
    assert (s3.best_version, s3.pending_version) == (1, None)
    # unknown kinds, missing keys and versions that were never recorded change nothing but the step
    assert apply(s3, {"kind": "from_the_future", "data": {"x": 1}, "step": 2}) == s3
    assert apply(s3, {"kind": "accepted", "data": {}, "step": 2}) == s3
    assert apply(s3, {"kind": "pending_refinement", "data": {"version": 9}, "step": 2}) == s3


def test_payloads_round_trip_their_stored_form():
    assert set(EVENT_KINDS) == set(PAYLOADS) and len(EVENT_KINDS) == 24
    d = {"from": "draft", "to": "refine", "reason": "feasible kernel found", "later_key": 1}
    p = PAYLOADS["stage_changed"].from_data(d)
    assert (p.from_, p.to) == ("draft", "refine") and p.to_data() == d
    insight = PAYLOADS["insight"].from_data({"skipped": "manual mode"})
    assert insight.to_data() == {"skipped": "manual mode"}  # absent fields stay absent
