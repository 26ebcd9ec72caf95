from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from evokernel_tui.cli import cli


@pytest.fixture
def run(tmp_path):
    bank = tmp_path / "m.json"

    def invoke(*args):
        return CliRunner().invoke(cli, ["memory", *args, "--memory", str(bank)])

    return invoke


def test_list_show_search_stats_json(run):
    listed = run("list", "--json", "--limit", "100")
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.output)
    assert len(rows) >= 30
    shown = json.loads(run("show", "seed-cuda-contract", "--json").output)
    assert shown["kind"] == "seed" and "ModelNew" in shown["text"]
    hits = json.loads(run("search", "softmax rows", "--backend", "triton", "--json", "-k", "3").output)
    assert len(hits) == 4 and {"similarity", "value", "exploration", "score"} <= set(hits[0])
    assert hits[-1]["id"] == "seed-triton-contract"  # contract knowledge comes by rule, after the 3 ranked
    assert [h["chosen_by"] for h in hits] == ["value", "value", "value", "rule"]
    table = run("search", "softmax rows", "--backend", "triton", "-k", "3")
    assert table.exit_code == 0 and "rule" in table.output
    assert all(h["similarity"] >= 0.5 for h in hits[:-1])  # a fresh bank: the most similar items first
    similar = json.loads(run("search", "softmax rows", "--backend", "triton", "--json", "--retrieval", "similarity").output)
    assert "softmax" in similar[0]["title"].lower()
    stats = json.loads(run("stats", "--json").output)
    assert stats["items"] == len(rows) and stats["kinds"]["seed"] == len(rows)
    table = run("stats")
    assert table.exit_code == 0 and "items" in table.output


def test_missing_id_and_bad_prune_are_one_line_errors(run):
    missing = run("show", "nope")
    assert missing.exit_code == 1 and "no memory item 'nope'" in missing.output
    assert "Traceback" not in missing.output
    prune = run("prune")
    assert prune.exit_code == 1 and "--below" in prune.output


def test_export_import_round_trip(run, tmp_path):
    out = tmp_path / "share.json"
    assert run("export", str(out)).exit_code == 0
    merged = json.loads(run("import", str(out), "--json").output)
    assert merged["added"] == 0 and merged["updated"] == 0
    missing = run("import", str(tmp_path / "nothing.json"))
    assert missing.exit_code == 1 and "does not exist" in missing.output


def test_corrupt_bank_points_to_repair(run, tmp_path):
    assert run("stats").exit_code == 0
    (tmp_path / "m.json").write_text("{broken")
    res = run("list")
    assert res.exit_code == 1 and "evokernel memory repair" in res.output
    repaired = run("repair")  # the backup is written with every snapshot, the first one included
    assert repaired.exit_code == 0 and "items from m.json.bak" in repaired.output
    assert "Could not keep: m.json: " in repaired.output and run("list").exit_code == 0
    (tmp_path / "m.json").write_text("{broken")
    (tmp_path / "m.json.bak").unlink()
    no_backup = run("repair")
    assert no_backup.exit_code == 1 and "no good backup" in no_backup.output and "Traceback" not in no_backup.output


def test_group_level_memory_option(tmp_path):
    bank = tmp_path / "g.json"
    res = CliRunner().invoke(cli, ["memory", "--memory", str(bank), "stats", "--json"])
    assert res.exit_code == 0 and json.loads(res.output)["path"] == str(bank)


def test_prune_task_removes_everything_learnt_on_it(run, tmp_path):
    from memory import MemoryStore, TaskSignature
    from memory.writing import trajectory_item

    store = MemoryStore(tmp_path / "m.json")
    seeds = len(store.items("seed"))
    for task in ("relu", "gelu"):
        sig = TaskSignature(task=task, category="elementwise", backend="cpu")
        store.add_trajectory(trajectory_item(sig, "draft", "x", "feasible", latency_ms=1.0))
        store.add_trajectory(trajectory_item(sig, "draft", "y", "compile_fail"))
    dry = json.loads(run("prune", "--task", "relu", "--dry-run", "--json").output)
    assert len(dry["would_remove"]) == 2 and dry["removed"] == []
    res = run("prune", "--task", "relu")
    assert res.exit_code == 0 and "removed 2 items" in res.output
    left = MemoryStore(tmp_path / "m.json")
    assert {i.data["task"] for i in left.items("trajectory")} == {"gelu"} and len(left.items("seed")) == seeds
