"""`evokernel sessions export`: one training record per model turn, built from the recorded events."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from core.events import read_events
from core.session.export import SCHEMA_VERSION, export_session
from evokernel_tui.cli import cli
from tests.fakes.verdicts import fake_verify, reply, write_replies

FIELDS = {"schema_version", "session_id", "task", "backend", "device", "model", "stage", "step", "turn", "messages",
          "memories", "credit_ids", "reply", "usage", "kernel", "extract_error", "verdict", "reward", "decision"}


@pytest.fixture
def env(tmp_path, monkeypatch):
    import core.session.models

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EVOKERNEL_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.delenv("EVOKERNEL_MODEL", raising=False)
    monkeypatch.setenv("EVOKERNEL_SESSIONS", str(tmp_path / "sessions"))
    monkeypatch.setattr(core.session.models, "default_verify", fake_verify)
    return tmp_path


def invoke(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _draft(env: Path) -> str:
    replies = write_replies(env / "r.json", [reply("compile_fail"), "no code at all", reply("feasible", 0.5),
                                             reply("feasible", 0.25)])
    res = invoke("draft", "softmax_rows", "--model", f"scripted:{replies}", "--memory", str(env / "bank.json"),
                 "--steps", "3", "--refine", "1", "--json")
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)["id"]


def test_export_round_trips_one_record_per_model_turn(env):
    sid = _draft(env)
    out = env / "traj" / "t.jsonl"
    res = invoke("sessions", "export", sid[:12], "--format", "jsonl", "--out", str(out))
    assert res.exit_code == 0, res.output
    records = [json.loads(line) for line in out.read_text().splitlines()]
    events = read_events(env / "sessions" / sid)
    turns = [e for e in events if e.kind == "model_reply" and e.data.get("purpose") == "kernel"]
    assert len(records) == len(turns) == 4
    for rec in records:
        assert set(rec) >= FIELDS and rec["schema_version"] == SCHEMA_VERSION
        assert rec["session_id"] == sid and rec["task"] == "softmax_rows" and rec["backend"] == "cpu"
        assert rec["device"] == "fake-cpu" and rec["messages"] and rec["messages"][-1]["role"] == "user"
    assert [r["stage"] for r in records] == ["draft", "draft", "draft", "refine"]
    assert records[1]["kernel"] is None and records[1]["extract_error"] and records[1]["verdict"] is None
    assert [r["verdict"]["outcome"] for r in records if r["verdict"]] == ["compile_fail", "feasible", "feasible"]
    logged = {e.data["version"]: e.data["value"] for e in events if e.kind == "reward"}
    for rec in records:
        if rec["kernel"]:
            assert rec["reward"]["value"] == logged[rec["kernel"]["version"]]
            assert rec["kernel"]["source"] in rec["reply"]
    feasible = records[2]["verdict"]
    assert [g["name"] for g in feasible["gates"]]
    assert feasible["figures"]["speedup"] == pytest.approx(feasible["figures"]["reference_ms"] / 0.5)
    assert "noise_label" in feasible["figures"] and isinstance(feasible["policy"], dict)
    assert records[2]["decision"] == {"accepted": True, "by": "loop", "reason": "first feasible kernel"}
    # the memories on screen when each turn was written, with the values shown
    shown = [m for r in records for m in r["memories"]]
    assert shown and all({"id", "title", "q1", "q2"} <= set(m) for m in shown)
    # the library call and the command agree
    assert export_session(env / "sessions" / sid) == records


def test_export_to_stdout_of_all_sessions_and_a_bench_folder(env):
    sid = _draft(env)
    res = invoke("sessions", "export")
    assert res.exit_code == 0 and len(res.stdout.splitlines()) == 4
    bench = env / "bench_out"
    (bench / "sessions").mkdir(parents=True)
    (env / "sessions" / sid).rename(bench / "sessions" / sid)
    res = invoke("sessions", "export", str(bench))
    assert res.exit_code == 0 and {json.loads(x)["session_id"] for x in res.stdout.splitlines()} == {sid}


def test_bad_id_is_one_line(env):
    res = invoke("sessions", "export", "no-such-session")
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert len(res.stderr.strip().splitlines()) == 1 and "no session 'no-such-session'" in res.stderr


def test_listing_still_works(env):
    sid = _draft(env)
    assert [r["id"] for r in json.loads(invoke("sessions", "--json").stdout)] == [sid]
