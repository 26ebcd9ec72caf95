"""Memories that know where they were learnt (issue 35): the device comes in as data from core, every
trajectory, insight and credit records it, `memory stats` breaks values down by device, and an item
learnt on another device class is marked as such when shown."""

from __future__ import annotations

import json

from click.testing import CliRunner

from evokernel_tui.cli import cli
from memory import MemoryStore, TaskSignature
from memory.writing import insight_from_refinement, trajectory_item

H100 = {"backend": "cuda", "kind": "gpu", "name": "NVIDIA H100 80GB HBM3", "capability": "9.0",
        "class": "NVIDIA H100 80GB HBM3 (sm_90)"}
ELSEWHERE = {"backend": "cpu", "kind": "cpu", "name": "Some Other CPU 9000", "capability": "",
             "class": "cpu: Some Other CPU 9000"}
SIG = TaskSignature("relu", "elementwise", "cpu", "x: 4096", "relu")
SUMMARY = "Vectorise the loop\nProcess eight floats per iteration with wide loads so the memory bus stays busy."


def test_trajectory_and_insight_record_the_device_given():
    traj = trajectory_item(SIG, "draft", "code", "feasible", latency_ms=1.0, device=H100)
    assert traj.data["device"] == H100 and traj.learnt_on == H100["class"]
    ins = insight_from_refinement(SIG, "a", "b", 2.0, summarise=lambda _p: SUMMARY, device=H100)
    assert ins.learnt_on == H100["class"]
    assert ins.learnt_elsewhere("cpu: AMD EPYC") and not ins.learnt_elsewhere(H100["class"])
    assert not trajectory_item(SIG, "draft", "code", "feasible").learnt_elsewhere("cpu: AMD EPYC")  # unknown: no


def test_credit_records_device_and_stats_break_values_down(bank):
    store = MemoryStore(bank, seed=False, fsync=False)
    item = store.add(trajectory_item(SIG, "draft", "code", "feasible", latency_ms=1.0, device=H100))
    store.credit([item.id], stage="draft", reward=1.0, device=H100["class"])
    changes = store.credit([item.id], stage="draft", reward=-1.0, device=ELSEWHERE["class"])
    assert changes[0].device == ELSEWHERE["class"]
    store.credit([item.id], stage="refine", reward=0.5)  # a credit that names no device
    per = store.get(item.id).device_values()
    assert per[H100["class"]]["q1"] == 1.0 and per[H100["class"]]["visits1"] == 1
    assert per[ELSEWHERE["class"]]["q1"] == -1.0
    stats = store.stats()["devices"]
    assert stats[H100["class"]]["learnt"] == 1 and stats[H100["class"]]["mean_q1_visited"] == 1.0
    assert stats[ELSEWHERE["class"]]["learnt"] == 0 and stats[ELSEWHERE["class"]]["visits_draft"] == 1
    assert stats["unknown"]["visits_refine"] == 1
    store.close()
    # the journal replays to the same per-device values
    again = MemoryStore(bank, seed=False, fsync=False)
    assert again.get(item.id).device_values() == per
    again.close()


def test_merged_lessons_keep_their_per_device_values(bank):
    store = MemoryStore(bank, seed=False, fsync=False)
    first, _ = store.add_trajectory(trajectory_item(SIG, "draft", "x", "incorrect", device=H100))
    store.credit([first.id], stage="draft", reward=-1.0, device=H100["class"])
    merged, how = store.add_trajectory(trajectory_item(SIG, "draft", "y", "incorrect", device=ELSEWHERE))
    assert how == "merged" and merged.device_values()[H100["class"]]["visits1"] == 1
    store.close()


def test_cli_stats_by_device_and_list_marks_another_device(tmp_path):
    path = tmp_path / "m.json"
    store = MemoryStore(path, seed=False, fsync=False)
    item = store.add(trajectory_item(SIG, "draft", "code", "feasible", latency_ms=1.0, device=ELSEWHERE))
    store.credit([item.id], stage="draft", reward=1.0, device=ELSEWHERE["class"])
    store.close()

    def run(*args):
        return CliRunner().invoke(cli, ["memory", *args, "--memory", str(path)], env={"COLUMNS": "200"},
                                  catch_exceptions=False)

    stats = json.loads(run("stats", "--json").output)
    assert stats["devices"][ELSEWHERE["class"]]["learnt"] == 1
    table = run("stats")
    assert table.exit_code == 0 and "Values by device" in table.output and "Some Other CPU 9000" in table.output
    rows = json.loads(run("list", "--json").output)
    assert rows[0]["learnt_on"] == ELSEWHERE["class"] and rows[0]["elsewhere"] is True
    assert "another device" in run("list").output
    shown = json.loads(run("show", item.id, "--json").output)
    assert shown["elsewhere"] is True
