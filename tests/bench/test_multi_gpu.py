"""Issue 36 on the CPU: which GPUs a bench's executor gets (`--gpus`, detection), one pool worker per GPU and
never two jobs on one GPU at once, and the device of every verdict in bench.json and `bench compare`.

The GPUs here are fake ids: a worker pinned to "1" only sees CUDA_VISIBLE_DEVICES=1, which is all the pool
does; the fake verifier reports the card from that variable the way the real reference worker does.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))

from bench_fakes import FAKE_GPU, gpu_interval, gpu_verify, reply, write_script  # noqa: E402

from core.bench import TaskOutcome, devices_line, outcome_from_results, short_device, verdict_device  # noqa: E402
from core.executors import (  # noqa: E402
    ExecutorError,
    ProcessPoolExecutor,
    choose_gpus,
    detect_gpus,
    make_executor,
    plan_gpus,
    pool_plan,
)
from evokernel_tui.cli import cli  # noqa: E402
from tests.fakes.verdicts import fake_verify, kernel  # noqa: E402
from verifier.result import device_label_id  # noqa: E402

FOUR = ["0", "1", "2", "3"]


# --------------------------------------------------------------------------- which GPUs


@pytest.mark.parametrize("spec, want", [
    (None, FOUR), ("all", FOUR), ("ALL", FOUR), ("2", ["0", "1"]), ("4", FOUR), ("1", ["0"]),
    ("1,3", ["1", "3"]), ("3,0", ["3", "0"]), ("2,", ["2"]), (" 0 , 1 ", ["0", "1"]),
])
def test_gpus_spec_picks_a_count_or_ids(spec, want):
    assert choose_gpus(spec, FOUR) == want


@pytest.mark.parametrize("spec, message", [
    ("5", "only 4 GPUs visible (0,1,2,3)"), ("0", "count of 1 or more"), ("1,7", "GPU 7 not visible"),
    ("1,1", "more than once"), (",", "ids separated by commas"),
])
def test_gpus_spec_refuses_what_the_machine_does_not_have(spec, message):
    with pytest.raises(ExecutorError) as err:
        choose_gpus(spec, FOUR)
    assert message in str(err.value)


def test_gpus_by_uuid():
    uuids = ["GPU-aaaa", "GPU-bbbb"]
    assert choose_gpus("GPU-bbbb,", uuids) == ["GPU-bbbb"]
    assert choose_gpus(None, uuids) == uuids


def test_detection_order_env_then_nvidia_smi_then_torch():
    never = lambda: pytest.fail("not asked when an earlier source answers")  # noqa: E731
    assert detect_gpus({"CUDA_VISIBLE_DEVICES": "2,3"}, smi=never, torch_count=never) == ["2", "3"]
    assert detect_gpus({"CUDA_VISIBLE_DEVICES": ""}, smi=never, torch_count=never) == []   # set and empty: none
    assert detect_gpus({}, smi=lambda: ["0", "1"], torch_count=never) == ["0", "1"]
    assert detect_gpus({}, smi=lambda: None, torch_count=lambda: 3) == ["0", "1", "2"]  # no nvidia-smi
    assert detect_gpus({}, smi=lambda: None, torch_count=lambda: 0) == []


def test_plan_gpus_per_executor_and_backend():
    assert plan_gpus("pool", "cuda", None, visible=["0", "1"]) == ["0", "1"]
    assert plan_gpus("pool", "triton", "1", visible=["0", "1"]) == ["0"]
    assert plan_gpus("ray", "cuda", "2", visible=FOUR) == ["0", "1"]                 # a local Ray instance
    assert plan_gpus("pool", "cpu", None, visible=FOUR) is None
    assert plan_gpus("inprocess", "cuda", None, visible=FOUR) is None
    assert plan_gpus("ray", "cuda", None, address="auto", visible=FOUR) is None      # a cluster: its nodes' GPUs
    for args, message in [(("pool", "cpu", "2"), "not --backend cpu"),
                          (("inprocess", "cuda", "2"), "--executor inprocess"),
                          (("pool", "cuda", None), "no GPU visible")]:
        with pytest.raises(ExecutorError, match=message):
            plan_gpus(*args, visible=[])
    with pytest.raises(ExecutorError, match="Ray cluster"):
        plan_gpus("ray", "cuda", "2", address="auto", visible=FOUR)


def test_pool_plan_is_one_worker_per_gpu_and_never_more():
    assert pool_plan(8, ["0", "1"]) == ["0", "1"]
    assert pool_plan(1, ["0", "1"]) == ["0"]
    with pytest.raises(ExecutorError, match="one worker per GPU"):
        pool_plan(2, ["0", "0"])
    with pytest.raises(ExecutorError, match="1 or more"):
        pool_plan(0, ["0"])


def test_make_executor_refuses_gpus_on_the_cpu_backend():
    with pytest.raises(ExecutorError, match="not --backend cpu"):
        make_executor("pool", 2, backend="cpu", gpus=["0"])


# --------------------------------------------------------------------------- the pool on N (fake) GPUs


def test_pool_runs_one_job_per_gpu_at_a_time_on_every_gpu():
    """Two GPUs, four workers asked: two workers, each pinned to its own GPU for life; on each GPU the jobs
    follow one another, and the two GPUs work at the same time."""
    with ProcessPoolExecutor(4, gpus=["0", "1"]) as pool:
        assert pool.workers == 2 and pool.describe() == "pool (2 workers, GPUs 0,1)"
        runs = pool.map(gpu_interval, range(12))
    by_pid: dict[int, set] = {}
    for gpu, pid, _, _ in runs:
        by_pid.setdefault(pid, set()).add(gpu)
    assert all(len(g) == 1 for g in by_pid.values()), by_pid            # a worker keeps its GPU
    assert sorted(g for gs in by_pid.values() for g in gs) == ["0", "1"]  # one worker per GPU, both used
    for gpu in ("0", "1"):
        spans = sorted((s, e) for g, _, s, e in runs if g == gpu)
        assert all(e0 <= s1 for (_, e0), (s1, _) in zip(spans, spans[1:], strict=False)), f"GPU {gpu} ran two jobs at once"
    spans0 = [(s, e) for g, _, s, e in runs if g == "0"]
    spans1 = [(s, e) for g, _, s, e in runs if g == "1"]
    assert any(s0 < e1 and s1 < e0 for s0, e0 in spans0 for s1, e1 in spans1), "the GPUs never worked at once"


# --------------------------------------------------------------------------- the device of each verdict


def test_device_id_as_the_worker_sees_it():
    assert device_label_id("1", 0, "8c1f-22") == "GPU 1 (GPU-8c1f-22)"            # pinned by the pool
    assert device_label_id("2,3", 1, "GPU-ab") == "GPU 3 (GPU-ab)"                # the second visible card
    assert device_label_id(None, 0, "") == "GPU 0"                                # nothing pinned
    assert device_label_id("GPU-ab12", 0, "ab12") == "GPU-ab12"                   # pinned by UUID
    assert device_label_id("MIG-1/2/3", 0, "") == "MIG-1/2/3"


def _result(backend, device="", device_id="", ms=1.0, verdict="feasible"):
    res = fake_verify("ref", kernel(verdict, ms), backend=backend)
    res.device, res.device_id = device, device_id
    return res


def test_verdict_device_labels():
    assert verdict_device(_result("cpu", "cpu (x86_64, 2 threads)", "cpu")) == "cpu"
    h100 = _result("cuda", "NVIDIA H100 80GB HBM3", "GPU 1 (GPU-ab)")
    assert verdict_device(h100) == "NVIDIA H100 80GB HBM3 · GPU 1 (GPU-ab)"
    assert short_device(verdict_device(h100)) == "GPU 1"
    assert verdict_device(_result("triton", "NVIDIA H200")) == "NVIDIA H200"       # a verdict from before device_id
    assert verdict_device(None) == "" and short_device("") == "" and short_device("cpu") == "cpu"


def test_outcome_keeps_every_verdicts_device_and_the_best_ones():
    results = [_result("cuda", "H", "GPU 0", 2.0), None, _result("cuda", "H", "GPU 1", 1.0),
               _result("cuda", "H", "GPU 0", verdict="incorrect")]
    out = outcome_from_results("relu", 1, results)
    assert out.devices == ["H · GPU 0", "", "H · GPU 1", "H · GPU 0"]
    assert out.best_device == "H · GPU 1" and out.best_ms == 1.0
    back = TaskOutcome.from_dict(json.loads(json.dumps(out.to_dict())))
    assert back.devices == out.devices and back.best_device == out.best_device
    old = TaskOutcome.from_dict({"task": "relu", "level": 1})                      # a bench.json from before
    assert old.devices == [] and old.best_device == ""
    assert devices_line([out]) == "3 verdicts: H · GPU 0 ×2, H · GPU 1 ×1"
    assert devices_line([old]) == "devices not recorded"


# --------------------------------------------------------------------------- `bench --backend cuda` end to end


TASKS = ["relu", "gelu", "sigmoid", "scale_add"]


@pytest.fixture
def two_fake_gpus(monkeypatch):
    """A machine with GPUs 0 and 1, as far as the bench command can tell; verification is the fake one."""
    import core.executors as executors
    import evokernel_tui.commands.bench as bench_cmd

    monkeypatch.setattr(bench_cmd, "JOB", gpu_verify)
    monkeypatch.setattr(bench_cmd, "task_shapes", lambda task: "")
    monkeypatch.setattr(bench_cmd, "check_backend", lambda backend: None)
    monkeypatch.setattr(executors, "detect_gpus", lambda *a, **k: ["0", "1"])
    monkeypatch.setenv("EVOKERNEL_MODEL_LESSONS", "0")


def _bench(tmp_path, out, *extra):
    script = write_script(tmp_path / "script.json", {t: [reply("feasible", 1.0 + i)] for i, t in enumerate(TASKS)})
    args = ["bench", "--tasks", ",".join(TASKS), "--model", f"scripted:{script}", "--draft-steps", "1",
            "--refine-steps", "0", "--backend", "cuda", "--executor", "pool", "--fresh-memory", "--out", str(out), *extra]
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def test_bench_on_two_gpus_records_each_verdicts_card(tmp_path, two_fake_gpus):
    out = tmp_path / "two"
    result = _bench(tmp_path, out)
    assert result.exit_code == 0, result.output
    assert "pool (2 workers, GPUs 0,1)" in result.output
    data = json.loads((out / "bench.json").read_text())
    assert data["settings"]["gpus"] == ["0", "1"] and data["settings"]["workers"] == 2  # one task per GPU by default
    outcomes = data["outcomes"]
    assert [len(o["devices"]) for o in outcomes] == [1] * len(TASKS)
    cards = {o["devices"][0] for o in outcomes}
    assert cards <= {f"{FAKE_GPU} · GPU 0 (GPU-fake-0)", f"{FAKE_GPU} · GPU 1 (GPU-fake-1)"} and len(cards) == 2
    assert all(o["best_device"] == o["devices"][0] for o in outcomes)
    assert sorted(data["environment"]["verdict_devices"]) == sorted(cards)

    one = tmp_path / "one"
    assert _bench(tmp_path, one, "--gpus", "1,").exit_code == 0
    single = json.loads((one / "bench.json").read_text())
    assert single["settings"]["gpus"] == ["1"] and single["settings"]["workers"] == 1
    assert {o["best_device"] for o in single["outcomes"]} == {f"{FAKE_GPU} · GPU 1 (GPU-fake-1)"}

    shown = CliRunner().invoke(cli, ["bench", "compare", str(one), str(out)], env={"COLUMNS": "100"})
    assert shown.exit_code == 0, shown.output
    assert f"A on 4 verdicts: {FAKE_GPU} · GPU 1 (GPU-fake-1) ×4" in shown.output
    b_line = next(line for line in shown.output.splitlines() if line.startswith("B on 4 verdicts"))
    assert "GPU 0" in b_line and "GPU 1" in b_line
    rows = [line for line in shown.output.splitlines() if any(line.strip("│ ").startswith(t + " ") for t in TASKS)]
    assert len(rows) == len(TASKS) and all("GPU 1 / GPU" in r for r in rows), rows
    js = json.loads(CliRunner().invoke(cli, ["bench", "compare", str(one), str(out), "--json"]).output)
    assert js["a"]["devices"] == {f"{FAKE_GPU} · GPU 1 (GPU-fake-1)": 4} and sum(js["b"]["devices"].values()) == 4


def test_bench_gpus_errors_are_one_line(tmp_path, two_fake_gpus):
    for extra, message in [(["--gpus", "3"], "only 2 GPUs visible (0,1)"), (["--gpus", "0,5"], "GPU 5 not visible"),
                           (["--gpus", "2", "--backend", "cpu"], "not --backend cpu"),
                           (["--gpus", "2", "--executor", "inprocess"], "--executor inprocess")]:
        result = _bench(tmp_path, tmp_path / "x", *extra)
        assert result.exit_code == 1 and message in result.output and "Traceback" not in result.output, result.output
        assert not (tmp_path / "x").exists()


def test_cpu_bench_says_cpu_for_every_verdict(tmp_path, monkeypatch):
    import evokernel_tui.commands.bench as bench_cmd

    monkeypatch.setattr(bench_cmd, "JOB", fake_verify)
    monkeypatch.setattr(bench_cmd, "task_shapes", lambda task: "")
    script = write_script(tmp_path / "s.json", {"relu": [reply("feasible", 1.0)], "gelu": [reply("incorrect")]})
    out = tmp_path / "cpu"
    result = CliRunner().invoke(cli, ["bench", "--tasks", "relu,gelu", "--model", f"scripted:{script}", "--draft-steps",
                                      "1", "--refine-steps", "0", "--executor", "inprocess", "--fresh-memory",
                                      "--out", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    data = json.loads((out / "bench.json").read_text())
    assert [o["devices"] for o in data["outcomes"]] == [["cpu"], ["cpu"]]
    assert "gpus" not in data["settings"]
    shown = CliRunner().invoke(cli, ["bench", "compare", str(out), str(out)], env={"COLUMNS": "100"})
    assert "A on 2 verdicts: cpu ×2" in shown.output
    relu = next(line for line in shown.output.splitlines() if line.strip("│ ").startswith("relu"))
    assert "cpu / cpu" in relu


def test_a_verdict_that_never_reached_the_reference_gets_the_workers_card(monkeypatch):
    """A kernel that fails to compile never meets the reference worker, which names the card: the worker's
    own pinning names it then, so the verdict still counts as one, on its card."""
    from core.executors import with_worker_card

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    failed = with_worker_card(_result("cuda", verdict="compile_fail"))
    assert failed.device_id == "GPU 3" and verdict_device(failed) == "GPU 3" and short_device("GPU 3") == "GPU 3"
    named = with_worker_card(_result("cuda", "H", "GPU 1 (GPU-ab)"))
    assert named.device_id == "GPU 1 (GPU-ab)"                                    # the reference's word stands
    assert with_worker_card(_result("cpu", "cpu (x86_64, 2 threads)", "")).device_id == ""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert with_worker_card(_result("triton", verdict="compile_fail")).device_id == "GPU 0"
