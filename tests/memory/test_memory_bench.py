"""Memory ablations of `evokernel bench`: retrieval settings, no / per-task memory, task order, one
budget shared by both stages, and the learning metrics each run reports."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from core.bench import (
    BenchConfig,
    BenchError,
    ModelSource,
    TaskOutcome,
    learning_metrics,
    order_tasks,
    run_bench,
    select_tasks,
)
from core.events import read_events
from core.executors import InProcessExecutor
from core.llm import ModelConfig
from evokernel_tui.cli import cli
from memory import MemoryStore
from tests.fakes.verdicts import fake_verify, reply

INSIGHT = "Fuse the loop\nFusing the two passes over the row halves the memory traffic of the kernel."
SCRIPTS = {
    "relu": [reply("feasible", 2.0), reply("feasible", 0.5), INSIGHT, reply("incorrect"), reply("incorrect")],
    "gelu": [reply("compile_fail"), reply("feasible", 3.0), reply("feasible", 3.5), reply("feasible", 2.0)],
}


@pytest.fixture
def models(tmp_path):
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"tasks": SCRIPTS}))
    return ModelSource(ModelConfig(f"scripted:{path}"))


@pytest.fixture
def store(tmp_path):
    s = MemoryStore(tmp_path / "shared.json", fsync=False)
    yield s
    s.close()


def run(tmp_path, models, store, **kw):
    cfg = BenchConfig(**{"draft_steps": 2, "refine_steps": 2, **kw})
    return run_bench(select_tasks(names=["relu", "gelu"]), tmp_path / "out", cfg, models, memory=store,
                     executor=InProcessExecutor(), job=fake_verify)


def retrieved(tmp_path):
    return [ev for d in sorted((tmp_path / "out" / "sessions").iterdir()) for ev in read_events(d) if ev.kind == "retrieved"]


def test_retrieval_settings_reach_the_sessions_and_the_learning_metrics(tmp_path, models, store):
    data = run(tmp_path, models, store, k=2, pool_size=4, epsilon=0.0)
    evs = retrieved(tmp_path)
    assert evs and all(ev.data["slots"] == 2 and len(ev.data["pool"]) <= 4 and ev.data["explored"] == [] for ev in evs)
    learning = data["learning"]
    assert learning["slots"] == 2 * len(evs)
    assert learning["value_slots"] == sum(ev.data["value_beyond_similarity"] for ev in evs)
    assert learning["value_slot_share"] == pytest.approx(learning["value_slots"] / learning["slots"], abs=1e-4)
    assert (data["settings"]["k"], data["settings"]["pool_size"], data["settings"]["epsilon"]) == (2, 4, 0.0)


def test_no_memory_runs_without_a_bank(tmp_path, models, store):
    before = len(store)
    data = run(tmp_path, models, store, memory_mode="none")
    assert data["complete"] and retrieved(tmp_path) == [] and len(store) == before
    assert data["learning"]["slots"] == 0 and data["learning"]["value_slot_share"] is None


def test_per_task_memory_gives_each_task_its_own_fresh_bank(tmp_path, models, store):
    before = len(store)
    run(tmp_path, models, store, memory_mode="per-task")
    banks = sorted(p.name for p in (tmp_path / "out" / "memory").glob("*.json"))
    assert banks == ["000-relu.json", "001-gelu.json"] and len(store) == before
    relu = MemoryStore(tmp_path / "out" / "memory" / "000-relu.json")
    assert {i.data["task"] for i in relu.items("trajectory")} == {"relu"}  # nothing transferred from gelu


def test_one_budget_is_shared_by_draft_and_refine(tmp_path, models, store):
    data = run(tmp_path, models, store, budget=3)
    gelu = next(o for o in data["outcomes"] if o["task"] == "gelu")
    assert gelu["kernels"] == 3  # 2 drafts (one failed) + 1 refinement, not 2 + 2
    assert data["settings"]["budget"] == 3


def test_paper_refine_median_counts_only_tasks_with_a_feasible_refinement():
    a = TaskOutcome("a", 1, feasible=True, first_feasible_ms=2.0, best_ms=1.0, feasible_refinements=1)
    b = TaskOutcome("b", 1, feasible=True, first_feasible_ms=2.0, best_ms=2.0, feasible_refinements=0)
    m = learning_metrics([a, b])
    assert m["median_refine_speedup"] == 1.5 and m["median_refine_speedup_paper"] == 2.0


def test_mixed_order_is_a_seeded_permutation():
    tasks = select_tasks(names=["relu", "gelu", "sigmoid", "scale_add"])
    assert order_tasks(tasks, "curriculum") == tasks
    mixed = order_tasks(tasks, "mixed", seed=3)
    assert sorted(t.name for t in mixed) == sorted(t.name for t in tasks) and mixed == order_tasks(tasks, "mixed", 3)
    assert [order_tasks(tasks, "mixed", s) for s in range(6)] != [tasks] * 6
    with pytest.raises(BenchError, match="curriculum or mixed"):
        order_tasks(tasks, "random")


def test_bad_ablation_settings_are_one_line_errors(tmp_path):
    with pytest.raises(BenchError, match="at least --k"):
        BenchConfig(k=5, pool_size=3)
    runner = CliRunner()
    for args, message in [
        (["--no-memory", "--per-task-memory"], "--no-memory runs without a bank"),
        (["--per-task-memory", "--fresh-memory"], "--per-task-memory makes a fresh bank"),
        (["--k", "5", "--pool-size", "2"], "must be at least --k"),
    ]:
        res = runner.invoke(cli, ["bench", *args, "--tasks", "relu", "--model", "scripted:x.json",
                                  "--out", str(tmp_path / "o")])
        assert res.exit_code == 1, res.output
        assert message in res.output and "Traceback" not in res.output


def test_cumulative_curves_and_first_round_metrics(tmp_path, models, store):
    data = run(tmp_path, models, store)
    learning = data["learning"]
    # relu: feasible at kernel 1; gelu: compile_fail at 1, feasible at 2
    assert learning["curves"]["correct"][:2] == [0.5, 1.0]
    assert learning["round1"] == {"compile_rate": 0.5, "correct_rate": 0.5}
    total = data["summary"][-1]
    assert learning["final"] == {"compile_rate": total["compile_rate"], "correct_rate": total["correct_rate"]}
    compiled = learning["curves"]["compiled"]
    assert all(a <= b for a, b in zip(compiled, compiled[1:], strict=False))


def test_refine_norm_reaches_the_sessions_and_bench_json(tmp_path, models, store):
    data = run(tmp_path, models, store, refine_norm=True)
    assert data["settings"]["refine_norm"] is True
    for d in sorted((tmp_path / "out" / "sessions").iterdir()):
        meta = json.loads((d / "session.json").read_text())
        assert meta["settings"]["retrieval"]["refine_norm"] is True
    relu = [ev.data for ev in read_events(tmp_path / "out" / "sessions" / "000-relu")
            if ev.kind == "reward" and ev.data["stage"] == "refine"]
    assert relu and all("raw" in r for r in relu)  # normalised rewards keep the raw value beside them


def test_resume_refuses_changed_memory_ablations(tmp_path, models, store):
    run(tmp_path, models, store, refine_norm=True, epsilon=0.2)
    for kw, key in [({"epsilon": 0.2}, "refine_norm"), ({"refine_norm": True}, "epsilon"),
                    ({"refine_norm": True, "epsilon": 0.2, "k": 3}, "k"),
                    ({"refine_norm": True, "epsilon": 0.2, "budget": 2}, "budget")]:
        with pytest.raises(BenchError, match=f"other settings \\({key} "):
            run(tmp_path, models, store, **kw)
    assert run(tmp_path, models, store, refine_norm=True, epsilon=0.2)["complete"]  # the same settings resume


def test_resume_of_a_bench_written_before_refine_norm_existed(tmp_path, models, store):
    run(tmp_path, models, store)
    path = tmp_path / "out" / "bench.json"
    data = json.loads(path.read_text())
    del data["settings"]["refine_norm"]
    path.write_text(json.dumps(data))
    assert run(tmp_path, models, store)["complete"]  # an old file ran at the default
    with pytest.raises(BenchError, match="refine_norm False vs True"):
        run(tmp_path, models, store, refine_norm=True)


def test_refine_norm_flag_from_the_command_line(tmp_path, monkeypatch):
    import evokernel_tui.commands.bench as bench_cmd

    monkeypatch.setattr(bench_cmd, "JOB", fake_verify)
    monkeypatch.setattr(bench_cmd, "task_shapes", lambda task: "")
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"tasks": SCRIPTS}))
    out = tmp_path / "cli"
    args = ["bench", "--tasks", "relu", "--model", f"scripted:{script}", "--draft-steps", "2", "--refine-steps", "2",
            "--executor", "inprocess", "--fresh-memory", "--out", str(out)]
    res = CliRunner().invoke(cli, [*args, "--refine-norm"])
    assert res.exit_code == 0, res.output
    assert json.loads((out / "bench.json").read_text())["settings"]["refine_norm"] is True
    res = CliRunner().invoke(cli, args)  # the same folder without the flag is not a resume
    assert res.exit_code == 1 and "other settings (refine_norm True vs False)" in res.output
