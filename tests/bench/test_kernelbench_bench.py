"""Bench on a KernelBench-style checkout (our own files under tests/candidates/kernelbench): --tasks and
--levels semantics, --limit, tasks whose reference cannot run here skipped without a model call, and
rejections by anti-hacking reported apart from compile failures."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from bench_fakes import fake_verify, reply, write_script  # noqa: E402

from core.bench import (  # noqa: E402
    BenchConfig,
    BenchError,
    ModelSource,
    outcomes_of,
    reference_skip_reason,
    render_markdown,
    run_bench,
    select_tasks,
)
from core.executors import InProcessExecutor  # noqa: E402
from core.llm import ModelConfig  # noqa: E402
from core.tasks import load_task  # noqa: E402

KB = Path(__file__).resolve().parents[1] / "candidates" / "kernelbench"


def test_a_bare_number_over_several_levels_is_ambiguous():
    with pytest.raises(BenchError) as info:
        select_tasks(kernelbench=KB, levels=[1, 2], names=["12"])
    msg = str(info.value)
    assert "matches problem 12 of levels 1, 2" in msg and "1/12 or 2/12" in msg and "--limit 12" in msg
    assert [(t.level, t.name) for t in select_tasks(kernelbench=KB, levels=[1, 2], names=["2/12"])] == [
        (2, "12_Gemm_Multiply_Bias")]
    assert [t.name for t in select_tasks(kernelbench=KB, levels=[1, 2], names=["L1:12", "19"])] == [
        "12_Mse_Loss", "19_ReLU"]
    assert [t.name for t in select_tasks(kernelbench=KB, levels=[1], names=["12"])] == ["12_Mse_Loss"]
    with pytest.raises(BenchError, match="unknown task.*3/12.*LEVEL/NUMBER"):
        select_tasks(kernelbench=KB, levels=[1, 2], names=["3/12"])


def test_limit_takes_the_first_tasks_in_order():
    assert [(t.level, t.name) for t in select_tasks(kernelbench=KB, levels=[1, 2], limit=3)] == [
        (1, "12_Mse_Loss"), (1, "19_ReLU"), (1, "41_Flat_Softmax")]
    assert len(select_tasks(limit=2)) == 2


@pytest.mark.slow  # runs three KernelBench references (one at 12 GiB estimated): 20-40 s
def test_reference_skip_reasons():
    huge = load_task(kernelbench=KB, level=1, problem=100)
    reason = reference_skip_reason(huge, 8.0)
    assert reason.startswith("the reference needs about 12.0 GiB") and "8 GiB limit" in reason
    assert reference_skip_reason(load_task("relu"), 0.001) is None          # built-ins always run
    assert reference_skip_reason(load_task(kernelbench=KB, level=1, problem=19), 8.0) is None
    broken = load_task(str(Path(__file__).resolve().parents[1] / "candidates" / "bad_tasks" / "forward_raises.py"))
    assert reference_skip_reason(broken, 8.0).startswith("the reference cannot run here:")


def test_skipped_task_costs_no_model_call_and_is_reported_apart(tmp_path):
    tasks = select_tasks(kernelbench=KB, levels=[1], names=["19", "100"])
    script = write_script(tmp_path / "s.json", {"19_ReLU": [reply("hack_fail"), reply("hack_fail")]})
    models = ModelSource(ModelConfig(f"scripted:{script}"))
    calls = []

    def job(ref, cand, backend="cpu", config=None):
        calls.append(cand)
        return fake_verify(ref, cand, backend, config)

    data = run_bench(tasks, tmp_path / "out", BenchConfig(draft_steps=2, refine_steps=0), models, memory=None,
                     executor=InProcessExecutor(), job=job,
                     check=lambda t: "the reference needs too much" if t.name == "100_Huge_ReLU" else None)
    relu, huge = outcomes_of(data)
    assert huge.skipped == "the reference needs too much" and huge.kernels == 0 and huge.tokens == 0
    assert not (tmp_path / "out" / "sessions" / "001-100_Huge_ReLU").exists()
    assert len(calls) == 2 and relu.status == "rejected by anti-hacking" and relu.rejected == 2
    assert data["complete"]
    [l1, total] = data["summary"]
    assert total["tasks"] == 1 and total["rejected_rate"] == 1.0 and total["compile_rate"] == 0.0
    text = render_markdown(data)
    assert "| 19_ReLU | 1 | rejected by anti-hacking |" in text
    assert "| 100_Huge_ReLU | 1 | skipped (the reference needs too much) |" in text
    assert "Skipped (the reference cannot run here; not in any rate): 1 task: 100_Huge_ReLU." in text
    assert json.loads((tmp_path / "out" / "bench.json").read_text())["outcomes"][1]["skipped"]


def test_bench_command_on_a_kernelbench_checkout(tmp_path, monkeypatch):
    from click.testing import CliRunner

    import evokernel_tui.commands.bench as bench_cmd
    from evokernel_tui.cli import cli

    monkeypatch.setattr(bench_cmd, "JOB", fake_verify)
    monkeypatch.setattr(bench_cmd, "task_shapes", lambda task: "")
    script = write_script(tmp_path / "s.json", {"19_ReLU": [reply("feasible", 2.0)]})
    base = ["bench", "--kernelbench", str(KB), "--model", f"scripted:{script}", "--draft-steps", "1",
            "--refine-steps", "0", "--executor", "inprocess", "--fresh-memory"]
    ambiguous = CliRunner().invoke(cli, [*base, "--levels", "1,2", "--tasks", "12", "--out", str(tmp_path / "a")])
    assert ambiguous.exit_code == 1 and "1/12 or 2/12" in ambiguous.output and "Traceback" not in ambiguous.output
    out = tmp_path / "run"
    result = CliRunner().invoke(cli, [*base, "--levels", "1", "--tasks", "19,100", "--out", str(out)],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "100_Huge_ReLU: skipped (the reference needs about 12.0 GiB" in result.output
    assert "Skipped (reference cannot run here): 1." in result.output
    data = json.loads((out / "bench.json").read_text())
    assert data["settings"]["suite"] == f"kernelbench:{KB}" and data["settings"]["tolerance"] == "kernelbench"
    relu, huge = outcomes_of(data)
    assert relu.feasible and huge.skipped and huge.kernels == 0
    assert [s["tasks"] for s in data["summary"]] == [1, 1]


def test_replay_keeps_the_recorded_suite_label(tmp_path):
    from core.bench import replay_bench

    tasks = select_tasks(kernelbench=KB, levels=[1], names=["19"])
    script = write_script(tmp_path / "s.json", {"19_ReLU": [reply("feasible", 2.0)]})
    run_bench(tasks, tmp_path / "run", BenchConfig(draft_steps=1, refine_steps=0, suite=f"kernelbench:{KB}"),
              ModelSource(ModelConfig(f"scripted:{script}")), memory=None, executor=InProcessExecutor(), job=fake_verify)
    replayed = replay_bench(tmp_path / "run", tmp_path / "again", BenchConfig(), executor=InProcessExecutor(),
                            job=fake_verify)
    assert replayed["settings"]["suite"] == f"kernelbench:{KB}"
    assert render_markdown(replayed).startswith(f"# Bench replay: kernelbench:{KB} on cpu")
