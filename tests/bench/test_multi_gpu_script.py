"""`benchmarks/multi_gpu_bench.py` on the CPU: the skip without a GPU, its arguments, the suite and the model
stand-in it drives, the run plan and time shares, and the report it writes from the bench.json files of its runs
(the runs themselves are stood in for: the real ones need GPUs)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import benchmarks.multi_gpu_bench as mg  # noqa: E402
from core.bench import TaskOutcome  # noqa: E402
from tests.fakes.kernel_model import KernelModel, kernel_reply, scripted_replies  # noqa: E402

TWO = lambda: ["0", "1"]  # noqa: E731
CUDA = lambda: (True, "torch 2.11.0, CUDA 13.0")  # noqa: E731


# --------------------------------------------------------------------------- the skip


def test_without_a_gpu_it_says_so_in_one_line_and_writes_nothing(tmp_path, capsys):
    assert mg.main(["--results", str(tmp_path)], detect=lambda: [], cuda_ok=CUDA) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out == ["multi_gpu_bench: skipped: no GPU visible (CUDA_VISIBLE_DEVICES, nvidia-smi and torch see none)"]
    assert list(tmp_path.iterdir()) == []


def test_gpus_torch_cannot_use_are_a_skip_too(tmp_path, capsys):
    assert mg.main(["--results", str(tmp_path)], detect=TWO,
                   cuda_ok=lambda: (False, "torch 2.13.0+cpu sees no CUDA device")) == 0
    (line,) = capsys.readouterr().out.strip().splitlines()
    assert line.startswith("multi_gpu_bench: skipped: 2 GPU(s) listed but torch cannot use CUDA")
    assert list(tmp_path.iterdir()) == []


def test_on_this_machine_the_plain_command_skips():
    """The real detection here (no GPU on the CPU machines): the script skips and says why."""
    import subprocess

    done = subprocess.run([sys.executable, str(mg.ROOT / "benchmarks" / "multi_gpu_bench.py"), "--results",
                           "/nonexistent/never-written"], capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": ""})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("multi_gpu_bench: skipped:") and done.stdout.count("\n") == 1


# --------------------------------------------------------------------------- arguments and the suite


def test_the_suite_has_16_or_more_problems_each_with_an_honest_kernel():
    from core.tasks import load_task
    from verifier.policy.static_scan import scan

    names = mg.suite_names()
    assert len(names) >= 16 and names[0] == "1_Square_matrix_multiplication_"
    kernels = mg.kernels_for(names)
    extensions = set()
    for name in names:
        task = load_task(str(mg.PROBLEMS / f"{name}.py"))
        assert task.name == name and task.level == 1
        src = kernels[name]
        assert "class ModelNew" in src and "cuda_sources=[CUDA]" in src and "C10_CUDA_KERNEL_LAUNCH_CHECK" in src
        assert scan(src, "cuda") == [], name                       # the static anti-hacking rules pass
        ext = re.search(r'name="(evk_[a-z0-9_]+)"', src)
        assert ext, name
        extensions.add(ext.group(1))
    assert len(extensions) == len(names)                           # no two kernels share a build name


def test_the_suite_runs_as_a_kernelbench_folder():
    from core.bench import select_tasks

    tasks = select_tasks(kernelbench=mg.SUITE, levels=[1])
    assert [t.name for t in tasks] == mg.suite_names()


def test_arguments():
    args = mg.parse_args(["--tasks", "23,19_ReLU", "--executors", "pool,ray", "--counts", "2,1"])
    assert args.names == ["19_ReLU", "23_Softmax"] and args.executor_list == ["pool", "ray"]
    assert args.count_list == [1, 2]
    assert mg.parse_args(["--limit", "3"]).names == mg.suite_names()[:3]
    assert mg.parse_args([]).count_list is None and mg.parse_args([]).budget_s == 500
    for bad in (["--tasks", "99_Nope"], ["--executors", "mpi"], ["--counts", "1,x"], ["--counts", "0"],
                ["--limit", "0"], ["--budget-s", "0"]):
        with pytest.raises(SystemExit) as err:
            mg.parse_args(bad)
        assert err.value.code == 2


def test_widest_run_follows_gpus():
    assert mg.machine_gpus("all", TWO, CUDA) == ["0", "1"]
    assert mg.machine_gpus("1", TWO, CUDA) == ["0"]
    with pytest.raises(SystemExit, match="only 2 GPUs visible"):
        mg.machine_gpus("3", TWO, CUDA)


def test_plan_cold_pass_first_then_one_gpu_then_all_and_ray_only_where_it_imports():
    plans, notes = mg.plan_runs(2, ["pool", "ray"], None, warmup=True, have_ray=False)
    assert [(p.executor, p.gpus, p.warmup) for p in plans] == [("pool", 2, True), ("pool", 1, False), ("pool", 2, False)]
    assert any(n.startswith("ray: not run") for n in notes)
    plans, notes = mg.plan_runs(2, ["pool", "ray"], [1, 2, 4], warmup=False, have_ray=True)
    assert [(p.executor, p.gpus) for p in plans] == [("pool", 1), ("pool", 2), ("ray", 1), ("ray", 2)]
    assert sum("on 4 GPUs: not run" in n for n in notes) == 2


def test_time_shares_leave_room_for_the_runs_after():
    plans, _ = mg.plan_runs(2, ["pool"], None, warmup=True, have_ray=False)
    first = mg.time_limit(plans, 500)
    second = mg.time_limit(plans[1:], 500 - first)
    assert 140 < first < 170 and second > first          # the 1-GPU run takes the longest
    assert mg.time_limit(plans[2:], 100) == 90           # the last run gets what is left


def test_bench_command_names_its_gpus_and_keeps_threads_equal():
    plan = mg.RunPlan("pool 1 GPU", "pool", 1)
    cmd = mg.bench_command(plan, ["0", "1"], ["19_ReLU"], Path("/tmp/o"), ["--model", "scripted:x"], 4)
    joined = " ".join(cmd)
    assert "--gpus 0, " in joined and "--workers 4" in joined and "--backend cuda" in joined
    assert "--draft-steps 1 --refine-steps 0" in joined and "--executor pool" in joined
    two = mg.bench_command(mg.RunPlan("pool 2 GPUs", "pool", 2), ["0", "1"], ["19_ReLU"], Path("/tmp/o"), [], 4)
    assert "--gpus 0,1 " in " ".join(two)


# --------------------------------------------------------------------------- the model stand-in


def test_kernel_model_replies_per_task_through_litellm():
    from core.extract import extract_kernel
    from core.llm import LiteLLMClient, ModelConfig

    kernels = mg.kernels_for(["19_ReLU", "23_Softmax"])
    with KernelModel(kernels) as model:
        client = LiteLLMClient(ModelConfig(model="openai/multi-gpu-kernels", api_base=model.api_base, retries=0,
                                           timeout_s=30))
        for name in kernels:
            reply = client.complete([{"role": "system", "content": "You write kernels."},
                                     {"role": "user", "content": f"# Task: {name} (activation, level 1)\n..."}])
            assert extract_kernel(reply.text).strip() == kernels[name].strip()
        refine = client.complete([{"role": "user", "content": "# Task: make 19_ReLU faster (activation, level 1)"}])
        assert extract_kernel(refine.text).strip() == kernels["19_ReLU"].strip()
        lesson = client.complete([{"role": "user", "content": "Write a lesson about this failure."}])
        assert "```" not in lesson.text
    assert model.calls == {"19_ReLU": 2, "23_Softmax": 1} and model.other == 1


def test_scripted_replies_are_the_same_kernels():
    from core.extract import extract_kernel

    kernels = mg.kernels_for(mg.suite_names())
    data = scripted_replies(kernels)
    assert set(data["tasks"]) == set(kernels)
    assert all(extract_kernel(r[0]).strip() == kernels[n].strip() for n, r in data["tasks"].items())
    assert kernel_reply("x = 1").count("```") == 2


# --------------------------------------------------------------------------- the report


def _outcome(task, speedup, device, noisy=False, feasible=True):
    return TaskOutcome(task, 1, compiled=True, feasible=feasible, speedup=speedup if feasible else None,
                       best_ms=1.0 / speedup if feasible else None, kernels=1, devices=[device],
                       best_device=device if feasible else "", noisy=noisy).to_dict()


H = "NVIDIA H100 80GB HBM3"


def fake_runner(per_run):
    """A stand-in for the bench process: writes the bench.json the next planned run would leave."""
    calls = []

    def run(cmd, timeout_s, log):
        out = Path(cmd[cmd.index("--out") + 1])
        gpus = cmd[cmd.index("--gpus") + 1].strip(",").split(",")
        tasks = cmd[cmd.index("--tasks") + 1].split(",")
        speed, seconds = per_run[len(calls)]
        calls.append((len(gpus), timeout_s))
        outcomes = [_outcome(t, speed.get(t, 1.0), f"{H} · GPU {gpus[i % len(gpus)]} (GPU-{gpus[i % len(gpus)]}x)",
                             noisy=t == "22_Tanh", feasible=t != "21_Sigmoid")
                    for i, t in enumerate(tasks)]
        for o in outcomes:
            if o["task"] == "21_Sigmoid":  # its verification crashed: a kernel, no verdict
                o["devices"] = [""]
        out.mkdir(parents=True)
        (out / "bench.json").write_text(json.dumps({"kind": "evokernel-bench", "format": 1, "started": 100.0,
                                                    "updated": 100.0 + seconds, "outcomes": outcomes}))
        log.write_text(log.read_text() + " ".join(cmd) + "\n" if log.exists() else " ".join(cmd) + "\n")
        return 0, False, seconds

    return run, calls


def test_report_from_three_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(mg, "device_name", lambda: H)
    names = ["19_ReLU", "21_Sigmoid", "22_Tanh", "23_Softmax"]
    alone = {"19_ReLU": 2.0, "22_Tanh": 1.0, "23_Softmax": 1.5}
    beside = {"19_ReLU": 2.02, "22_Tanh": 1.2, "23_Softmax": 1.35}
    run, calls = fake_runner([({}, 50.0), (alone, 40.0), (beside, 21.0)])
    argv = ["--results", str(tmp_path / "res"), "--work", str(tmp_path / "work"), "--tasks", ",".join(names),
            "--model-mode", "scripted", "--tag", "t1"]
    assert mg.main(argv, detect=TWO, cuda_ok=CUDA, runner=run) == 0
    assert [c[0] for c in calls] == [2, 1, 2]                     # cold pass on both, then 1, then 2
    stem = tmp_path / "res" / f"multi_gpu_{mg.dt.datetime.now(mg.dt.UTC):%Y-%m-%d}_nvidia-h100-80gb-hbm3_t1"
    report = json.loads(stem.with_suffix(".json").read_text())
    md = stem.with_suffix(".md").read_text()
    assert report["command"] == "python benchmarks/multi_gpu_bench.py " + " ".join(argv)
    assert f"Command: `{report['command']}`" in md
    assert [r["verdicts"] for r in report["runs"]] == [3, 3, 3] and [r["no_verdict"] for r in report["runs"]] == [1] * 3
    assert report["runs"][1]["verdicts_per_min"] == 4.5 and report["runs"][2]["verdicts_per_min"] == round(3 / 21 * 60, 2)
    (tp,) = report["throughput"]
    assert tp["gpus"] == 2 and tp["ratio"] == round(40 / 21, 3) and tp["met"] is True
    rows = {r["task"]: r for r in report["beside_vs_alone"]}
    assert set(rows) == {"19_ReLU", "22_Tanh", "23_Softmax"}            # sigmoid failed: no pair
    assert rows["19_ReLU"]["within"] and not rows["23_Softmax"]["within"] and rows["22_Tanh"]["noisy"]
    assert report["agreement"] == {"pairs": 3, "within": 1, "clean": 2, "within_clean": 1}
    assert report["runs"][2]["devices"] == {f"{H} · GPU 0 (GPU-0x)": 2, f"{H} · GPU 1 (GPU-1x)": 1}
    assert "| pool 2 GPUs | 0 | 21.0 | 3 | 3 | 0 | 8.57 | GPU 0 ×2, GPU 1 ×1 |" in md
    assert "pool 1 GPU: 1 kernel(s) with no verdict" in md
    assert "| pool | 19_ReLU | 2.000 | 2.020 | 1.010 |" in md and "Within 5%: 1 of 3 pairs; 1 of 2" in md
    assert "per-task scripted replies" in md
    assert stem.with_suffix(".log").exists()
    scripted = json.loads((tmp_path / "work" / "replies.json").read_text())
    assert set(scripted["tasks"]) == set(names)
    assert "pool on 2 GPUs: 1.9" in capsys.readouterr().out


def test_a_run_cut_short_counts_to_its_limit_and_the_budget_skips_the_rest(tmp_path, monkeypatch):
    monkeypatch.setattr(mg, "device_name", lambda: H)
    seen = []

    def slow(cmd, timeout_s, log):
        out = Path(cmd[cmd.index("--out") + 1])
        out.mkdir(parents=True)
        outcomes = [_outcome("19_ReLU", 1.0, f"{H} · GPU 0")]
        (out / "bench.json").write_text(json.dumps({"outcomes": outcomes, "started": 1.0, "updated": 2.0}))
        seen.append(timeout_s)
        return -2, True, timeout_s + 15.0                           # stopped at its limit, 15 s to stop

    argv = ["--results", str(tmp_path), "--work", str(tmp_path / "w"), "--tasks", "19", "--model-mode", "scripted",
            "--budget-s", "100", "--no-warmup"]
    assert mg.main(argv, detect=TWO, cuda_ok=CUDA, runner=slow) == 0
    (js,) = tmp_path.glob("*.json")
    report = json.loads(js.read_text())
    (first,) = report["runs"]
    assert first["timed_out"] and first["verdicts_per_min"] == round(1 / (first["timeout_s"] / 60), 2)
    assert any(n.startswith("pool 2 GPUs: not run") for n in report["notes"])
    assert len(seen) == 1
