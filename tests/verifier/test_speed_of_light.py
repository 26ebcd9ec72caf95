"""Speed of light in every verdict (issue 35): the machine's bandwidth peak (measured by the trusted side,
cached per machine), each verdict's fraction of it, the bound, the flag above 1, and where it is shown."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from verifier.clock import bandwidth
from verifier.clock.bandwidth import OVER_PEAK_NOTE, machine_key, peak_bandwidth, speed_of_light
from verifier.config import VerifyConfig
from verifier.result import GateResult, VerificationResult

CANDIDATES = Path(__file__).resolve().parents[1] / "candidates"


# ----------------------------------------------------------------------------------------------------------
# the fractions, the bound and the flag


def test_fraction_from_a_given_peak():
    out = speed_of_light(8_000_000, gbps=12.2, reference_gbps=6.1, peak_gbps=20.0, flops=0)
    assert out["bandwidth_peak_gbps"] == 20.0
    assert out["bandwidth_fraction"] == pytest.approx(0.61)
    assert out["reference_bandwidth_fraction"] == pytest.approx(0.305)
    assert out["arithmetic_intensity"] == 0.0 and out["bound"] == "memory-bound"
    assert "bandwidth_over_peak" not in out and "bandwidth_note" not in out


def test_bound_needs_flops_and_a_low_intensity():
    unknown = speed_of_light(1000, 1.0, 1.0, 10.0, flops=None)
    assert unknown["bound"] is None and unknown["arithmetic_intensity"] is None
    assert unknown["bandwidth_fraction"] == pytest.approx(0.1)  # only the bandwidth fraction is said
    gemm = speed_of_light(3 * 4 * 512 * 512, 1.0, 1.0, 10.0, flops=2 * 512**3)  # ~85 FLOP/B: not memory-bound
    assert gemm["bound"] is None and gemm["arithmetic_intensity"] > 50


def test_no_peak_no_fraction():
    out = speed_of_light(1000, 5.0, 5.0, None, flops=0)
    assert out["bandwidth_peak_gbps"] is None and out["bandwidth_fraction"] is None
    assert out["reference_bandwidth_fraction"] is None


def test_fraction_over_one_is_flagged():
    out = speed_of_light(1000, gbps=25.0, reference_gbps=9.0, peak_gbps=20.0, flops=0)
    assert out["bandwidth_fraction"] == pytest.approx(1.25)
    assert out["bandwidth_over_peak"] == ["bandwidth_fraction"]
    assert out["bandwidth_note"] == OVER_PEAK_NOTE
    both = speed_of_light(1000, gbps=25.0, reference_gbps=21.0, peak_gbps=20.0)
    assert both["bandwidth_over_peak"] == ["bandwidth_fraction", "reference_bandwidth_fraction"]


# ----------------------------------------------------------------------------------------------------------
# the peak: measured once, cached per CPU model and thread count


def test_peak_is_cached_by_cpu_model_and_threads(tmp_path, monkeypatch):
    calls: list[int] = []

    def fake_triad(torch, threads, total_bytes=None, runs=6):
        calls.append(threads)
        return 10.0 * threads

    monkeypatch.setattr(bandwidth, "cpu_triad_gbps", fake_triad)
    monkeypatch.setattr(bandwidth, "cpu_model", lambda: "Test CPU 9000")
    monkeypatch.setattr(bandwidth, "PEAK_SAMPLES", 1)
    path = tmp_path / "peaks.json"
    first = peak_bandwidth(None, "cpu", 2, path=path)
    assert first is not None and first["gbps"] == 20.0 and first["cached"] is False
    again = peak_bandwidth(None, "cpu", 2, path=path)
    assert again is not None and again["gbps"] == 20.0 and again["cached"] is True
    assert calls == [2]  # reused, not measured again
    other = peak_bandwidth(None, "cpu", 1, path=path)  # another thread count: its own key
    assert other is not None and other["gbps"] == 10.0 and calls == [2, 1]
    stored = json.loads(path.read_text())
    assert set(stored) == {machine_key("cpu", 2), machine_key("cpu", 1)}
    assert all("Test CPU 9000" in k for k in stored)
    monkeypatch.setattr(bandwidth, "cpu_model", lambda: "Another CPU")  # another machine: measured again
    assert peak_bandwidth(None, "cpu", 2, path=path)["cached"] is False and calls == [2, 1, 2]
    assert peak_bandwidth(None, "cpu", 4, path=path, measure=False) is None  # no key, no measuring: none


def test_peak_is_the_best_of_a_few_occasions(tmp_path, monkeypatch):
    """One measurement on a busy machine does not stay the peak: a key is measured on PEAK_SAMPLES occasions
    (separate workers), the best kept, then reused; a peak written by hand (no samples) is used as is."""
    figures = iter([9.0, 19.0, 17.0, 99.0])
    monkeypatch.setattr(bandwidth, "cpu_triad_gbps", lambda torch, threads, total_bytes=None: next(figures))
    monkeypatch.setattr(bandwidth, "PEAK_SAMPLES", 3)
    path = tmp_path / "peaks.json"
    got = [peak_bandwidth(None, "cpu", 1, path=path) for _ in range(4)]
    assert [g["gbps"] for g in got if g] == [9.0, 19.0, 19.0, 19.0]
    assert [g["cached"] for g in got if g] == [False, False, False, True]
    assert json.loads(path.read_text())[machine_key("cpu", 1)]["samples"] == [9.0, 19.0, 17.0]
    path.write_text(json.dumps({machine_key("cpu", 1): {"gbps": 42.0}}))
    pinned = peak_bandwidth(None, "cpu", 1, path=path)
    assert pinned is not None and pinned["gbps"] == 42.0 and pinned["cached"] is True


def test_gpu_key_is_the_device_name():
    assert machine_key("cuda", 8, "NVIDIA H100 80GB HBM3") == machine_key("cuda", 1, "NVIDIA H100 80GB HBM3")
    assert machine_key("cuda", 1, "NVIDIA H100 80GB HBM3") != machine_key("cuda", 1, "NVIDIA H200")


def test_real_triad_is_fast_and_positive():
    torch = pytest.importorskip("torch")
    gbps = bandwidth.cpu_triad_gbps(torch, 1, total_bytes=48 * 1024**2, runs=3)
    assert 0.1 < gbps < 10_000


def test_compute_roof_from_a_flop_peak_and_the_ridge_point():
    """A matmul (2n^3 FLOPs over 3 n^2 float32 moved: n/6 FLOP/B) past the ridge point (peak FLOP/s over peak
    bytes/s) is compute-bound, and its FLOP rate is FLOPs over the call's time (bytes over GB/s)."""
    n = 512
    moved, flops = 3 * n * n * 4, 2 * n**3
    out = speed_of_light(moved, gbps=10.0, reference_gbps=5.0, peak_gbps=20.0, flops=flops, peak_gflops=200.0)
    assert out["ridge_intensity"] == pytest.approx(10.0) and out["arithmetic_intensity"] == pytest.approx(n / 6)
    assert out["bound"] == "compute-bound"
    assert out["gflops"] == pytest.approx(flops * 10.0 / moved) and out["flops_peak_gflops"] == 200.0
    assert out["flops_fraction"] == pytest.approx(out["gflops"] / 200.0)
    assert out["reference_flops_fraction"] == pytest.approx(out["flops_fraction"] / 2)
    # the same work with a roof so high the ridge lies past it: memory-bound after all
    assert speed_of_light(moved, 10.0, 5.0, 20.0, flops=flops, peak_gflops=1e6)["bound"] == "memory-bound"
    # above the compute peak: flagged as the bandwidth fraction is
    fast = speed_of_light(moved, gbps=1000.0, reference_gbps=5.0, peak_gbps=2000.0, flops=flops, peak_gflops=200.0)
    assert "flops_fraction" in fast["bandwidth_over_peak"]
    # elementwise work (0 FLOPs) gets no FLOP keys, whatever the peak
    assert "flops_fraction" not in speed_of_light(moved, 10.0, 5.0, 20.0, flops=0, peak_gflops=200.0)


def test_flop_peak_is_measured_once_per_occasion_and_cached(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    path = tmp_path / "peaks.json"
    calls = []
    monkeypatch.setattr(bandwidth, "cpu_matmul_gflops",
                        lambda t, threads=None, dtype="float32": calls.append(threads) or 50.0 + len(calls))
    first = bandwidth.peak_flops(torch, "cpu", 2, path=path)
    assert first is not None and first["gflops"] == 51.0 and first["cached"] is False
    assert first["key"].endswith("|flops-fp32") and first["key"] != machine_key("cpu", 2)
    for _ in range(bandwidth.PEAK_SAMPLES + 2):
        last = bandwidth.peak_flops(torch, "cpu", 2, path=path)
    assert len(calls) == bandwidth.PEAK_SAMPLES and last["cached"] is True
    assert last["gflops"] == 50.0 + bandwidth.PEAK_SAMPLES  # the best of the occasions
    assert bandwidth.peak_flops(torch, "cpu", 4, path=path, measure=False) is None


def test_real_matmul_probe_is_fast_and_positive():
    torch = pytest.importorskip("torch")
    gflops = bandwidth.cpu_matmul_gflops(torch, 1, n=256, runs=2, budget_s=0.05)
    assert 0.1 < gflops < 100_000


def test_compute_bound_verdict_says_the_fp32_fraction():
    from evokernel_tui.commands.render import verdict_line

    res = _result(0.3)
    res.timing.update(bound="compute-bound", gflops=61.0, reference_gflops=40.0, flops_peak_gflops=100.0,
                      flops_fraction=0.61, reference_flops_fraction=0.40)
    assert res.bandwidth_text() == "61% of FP32 peak, compute-bound"
    assert "61% of FP32 peak, compute-bound (61.0 of 100.0 GFLOP/s" in res.feedback()
    assert "the eager reference 40%" in res.feedback()
    assert "61% of FP32 peak" in _printed(verdict_line(res))


@pytest.mark.gpu
def test_cuda_copy_peak():  # 2.91-2.99 TB/s on an H100 80GB HBM3 in the verifier (session 13)
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    gbps = bandwidth.cuda_copy_gbps(torch, nbytes=256 * 1024**2, runs=3)
    assert 50 < gbps < 20_000


# ----------------------------------------------------------------------------------------------------------
# where it is shown: verify's verdict line and gate table, the feedback for the next prompt


def _result(fraction: float, noisy: bool = False) -> VerificationResult:
    timing = {"speedup": 1.0, "lo": 0.97, "hi": 1.03, "noisy": noisy, "threads": 1, "rounds": 9,
              "gbps": 20.0 * fraction, "reference_gbps": 20.0 * fraction, "bandwidth_peak_gbps": 20.0,
              "bandwidth_fraction": fraction, "reference_bandwidth_fraction": fraction, "bound": "memory-bound",
              "bandwidth_over_peak": ["bandwidth_fraction", "reference_bandwidth_fraction"] if fraction > 1 else None}
    latency = {"median_ms": 1.0, "reference_ms": 1.0, "speedup": 1.0, "lo": 0.97, "hi": 1.03, "rounds": 9,
               "calls_per_round": 3, "noisy": noisy, **timing}
    gates = [GateResult(n, "pass") for n in ("anti_hacking", "compile", "correctness")]
    gates += [GateResult("latency", "pass", detail=latency), GateResult("profile", "pass")]
    return VerificationResult(backend="cpu", gates=gates, latency_ms=1.0, reference_ms=1.0, timing=timing)


def _printed(*renderables) -> str:
    console = Console(width=400, no_color=True, record=True)
    for r in renderables:
        console.print(r)
    return console.export_text()


def test_verify_output_shows_the_fraction():
    from evokernel_tui.commands.render import gate_table, verdict_line

    res = _result(0.61)
    text = _printed(gate_table(res), verdict_line(res))
    assert "61% of memory bandwidth, memory-bound" in text
    assert "peak 20.0 GB/s" in text
    assert "reaches 61% of memory bandwidth, memory-bound (12.2 of 20.0 GB/s" in res.feedback()


def test_verify_output_flags_above_the_peak():
    from evokernel_tui.commands.render import verdict_line

    res = _result(1.4)
    assert "140% of memory bandwidth" in res.bandwidth_text()
    assert "figure or the model of its work is wrong" in _printed(verdict_line(res))


def test_noisy_verdict_states_no_fraction_in_the_claim():
    from evokernel_tui.commands.render import gate_table, verdict_line

    res = _result(0.5, noisy=True)
    assert res.bandwidth_text() == "" and "Speed of light" not in res.feedback()
    assert "memory bandwidth" not in _printed(verdict_line(res))
    assert "50% of memory bandwidth" in _printed(gate_table(res))  # the gate's own (noisy) figures


# ----------------------------------------------------------------------------------------------------------
# end to end: `evokernel verify` on the built-in relu, the peak read from a cache written beforehand


@pytest.mark.slow
def test_verify_reads_the_cached_peak(tmp_path, build_root):
    from verifier.config import VerifyConfig
    from verifier.workers.pools import _threads

    peaks = tmp_path / "peaks.json"
    peaks.write_text(json.dumps({machine_key("cpu", _threads(VerifyConfig())): {
        "gbps": 1000.0, "method": "given by the test", "measured_at": 0.0}}))
    env = {**os.environ, "EVOKERNEL_BUILD_DIR": str(build_root), "EVOKERNEL_PEAKS_CACHE": str(peaks),
           "NO_COLOR": "1", "COLUMNS": "160"}
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-m", "evokernel_tui.cli", "verify", "relu",
                           str(CANDIDATES / "cpu" / "relu.py"), "--json", "--trials", "2", "--no-cache"],
                          capture_output=True, text=True, timeout=600, env=env, cwd=root)
    failed = ""
    if proc.returncode != 0 and proc.stdout.strip().startswith("{"):  # which gate refused, and why (not the JSON's head)
        verdict = json.loads(proc.stdout.strip().splitlines()[-1])
        failed = "; ".join(f"{g['name']}: {g.get('reason', '')[:400]} {g.get('detail', {}).get('rule', '')}"
                           for g in verdict.get("gates", []) if g.get("status") == "fail")
    assert proc.returncode == 0, failed or proc.stderr[-2000:]
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    detail = next(g for g in data["gates"] if g["name"] == "latency")["detail"]
    if detail.get("no_figure"):
        pytest.skip("the busy machine left no figure")
    assert detail["bandwidth_peak_gbps"] == 1000.0  # the cached peak, not a fresh measurement
    assert "cached" in detail["bandwidth_peak_source"]
    assert detail["bandwidth_fraction"] == pytest.approx(detail["gbps"] / 1000.0)
    assert detail["reference_bandwidth_fraction"] == pytest.approx(detail["reference_gbps"] / 1000.0)
    # where each candidate round's window went by the harness's own account (session 14's GPU diagnostics):
    # drawing or loading the sets, then the loop, inside the parent's clock around the whole round
    walls, inner = detail["candidate_walls_ms"], detail["candidate_inner_ms"]
    assert walls and len(inner) == len(walls)
    for wall, split in zip(walls, inner, strict=True):
        assert len(split) == 2 and min(split) >= 0 and 0 < sum(split) <= wall, (wall, split)
    assert detail["arithmetic_intensity"] == 0.0 and detail["bound"] == "memory-bound"  # relu: no FLOPs counted
    assert data["timing"]["bandwidth_fraction"] == pytest.approx(detail["bandwidth_fraction"])
    assert list(json.loads(peaks.read_text())) == [machine_key("cpu", _threads(VerifyConfig()))]  # nothing new

    table = subprocess.run([sys.executable, "-m", "evokernel_tui.cli", "verify", "relu",
                            str(CANDIDATES / "cpu" / "relu.py"), "--trials", "2"],
                           capture_output=True, text=True, timeout=600, env=env, cwd=root)
    assert table.returncode == 0, table.stderr[-2000:]
    assert "% of memory bandwidth, memory-bound" in table.stdout and "peak 1000.0 GB/s" in table.stdout


def test_refine_prompt_carries_the_fraction():
    """The refine prompt's "What the verifier said" is the verdict's feedback (core/session/stepping.py)."""
    from core.prompting import render_previous

    prompt = render_previous("class ModelNew: ...", _result(0.61).feedback())
    assert "Speed of light: the kernel reaches 61% of memory bandwidth, memory-bound" in prompt
    assert "the eager reference 61%" in prompt
    assert "Speed of light" not in render_previous("x", _result(0.61, noisy=True).feedback())


def test_latency_detail_from_a_given_or_measured_peak():
    """The latency gate's keys (`verifier.run.timed_calls.speed_of_light_detail`): a peak given in the config
    wins over the worker's, the worker's source is said, above 1 is flagged, and it can be turned off."""

    from verifier.config import VerifyConfig
    from verifier.run.timed_calls import speed_of_light_detail

    worker = {"flops": 0, "bandwidth_peak": {"gbps": 40.0, "method": "triad", "cached": True, "key": "k"}}
    measured = speed_of_light_detail(VerifyConfig(), worker, "cpu", 1000, 10.0, 5.0)
    assert measured["bandwidth_fraction"] == pytest.approx(0.25) and measured["bound"] == "memory-bound"
    assert measured["bandwidth_peak_source"] == "triad, cached (k)"
    over = speed_of_light_detail(VerifyConfig(bandwidth_peak_gbps=8.0), worker, "cpu", 1000, 10.0, 5.0)
    assert over["bandwidth_peak_gbps"] == 8.0 and over["bandwidth_fraction"] == pytest.approx(1.25)
    assert over["bandwidth_over_peak"] == ["bandwidth_fraction"] and over["bandwidth_peak_source"] == "given"
    assert speed_of_light_detail(VerifyConfig(speed_of_light=False), worker, "cpu", 1000, 10.0, 5.0) == {}
    unknown = speed_of_light_detail(VerifyConfig(), {}, "cpu", 1000, 10.0, 5.0)
    assert unknown["bandwidth_fraction"] is None and unknown["bound"] is None



def test_the_reference_worker_counts_flops_and_reads_both_roofs_into_the_latency_detail(tmp_path, monkeypatch):
    """A matmul model through the trusted worker's speed-of-light step (FLOPs counted, both roofs read from
    the cache written beforehand), then into the latency detail as a run builds it: compute-bound past the
    ridge point, with the FP32 fraction; an elementwise model measures no FLOP peak at all."""
    torch = pytest.importorskip("torch")
    from verifier.run.timed_calls import speed_of_light_detail
    from verifier.workers.reference_worker import Worker

    key = machine_key("cpu", 1)
    peaks = tmp_path / "peaks.json"
    peaks.write_text(json.dumps({key: {"gbps": 10.0, "method": "given by the test", "measured_at": 0.0},
                                 key + "|flops-fp32": {"gflops": 50.0, "method": "given by the test",
                                                       "measured_at": 0.0}}))
    monkeypatch.setenv("EVOKERNEL_PEAKS_CACHE", str(peaks))
    worker = Worker.__new__(Worker)
    worker.torch, worker.device = torch, "cpu"
    n = 256
    a, b = torch.randn(n, n), torch.randn(n, n)
    found = worker._speed_of_light(lambda x, y: x @ y, [a, b], {"threads": 1, "measure_peak": False})
    assert found["flops"] == 2 * n**3 and found["flops_peak"]["gflops"] == 50.0
    elementwise = worker._speed_of_light(torch.relu, [a], {"threads": 1, "measure_peak": False})
    assert elementwise["flops"] == 0 and "flops_peak" not in elementwise

    class Run:
        config = VerifyConfig()
        reference = found
        be = type("B", (), {"device": "cpu"})()

    moved = 3 * n * n * 4
    detail = speed_of_light_detail(Run.config, Run.reference, Run.be.device, moved, gbps=2.0, reference_gbps=1.0)
    assert detail["bound"] == "compute-bound" and detail["ridge_intensity"] == pytest.approx(5.0)
    assert detail["flops_fraction"] == pytest.approx(2 * n**3 * 2.0 / moved / 50.0)
    assert "cached" in detail["flops_peak_source"]


def test_a_half_precision_task_is_held_to_its_own_dtypes_roof(tmp_path, monkeypatch):
    """A bfloat16 GEMM against the float32 roof read far above 100% (tensor cores run bfloat16 many times
    faster): the roof is measured in the dtype of the task's largest floating input, cached under its own
    key, and the verdict names it."""
    torch = pytest.importorskip("torch")
    from verifier.run.timed_calls import speed_of_light_detail
    from verifier.workers.reference_worker import Worker

    assert bandwidth.compute_dtype(torch, [torch.zeros(4, dtype=torch.bfloat16), torch.zeros(2)]) == "bfloat16"
    assert bandwidth.compute_dtype(torch, [torch.zeros(2, dtype=torch.float64), 3]) == "float32"
    assert bandwidth.compute_dtype(torch, [torch.zeros(8, dtype=torch.int64)]) == "float32"
    measured: list[str] = []
    monkeypatch.setattr(bandwidth, "cpu_matmul_gflops",
                        lambda t, threads=None, dtype="float32": measured.append(dtype) or 400.0)
    key = machine_key("cpu", 1)
    peaks = tmp_path / "peaks.json"
    peaks.write_text(json.dumps({key: {"gbps": 10.0, "method": "given by the test", "measured_at": 0.0},
                                 key + "|flops-fp32": {"gflops": 50.0, "method": "given by the test", "measured_at": 0.0}}))
    monkeypatch.setenv("EVOKERNEL_PEAKS_CACHE", str(peaks))
    worker = Worker.__new__(Worker)
    worker.torch, worker.device = torch, "cpu"
    n = 64
    a, b = torch.randn(n, n, dtype=torch.bfloat16), torch.randn(n, n, dtype=torch.bfloat16)
    found = worker._speed_of_light(lambda x, y: x @ y, [a, b], {"threads": 1, "measure_peak": True})
    assert measured == ["bfloat16"], measured  # not the cached float32 peak
    assert found["flops_peak"]["dtype"] == "bfloat16" and found["flops_peak"]["key"].endswith("|flops-bf16")
    assert found["flops_peak"]["gflops"] == 400.0

    class Run:
        config = VerifyConfig()
        reference = found
        be = type("B", (), {"device": "cpu"})()

    detail = speed_of_light_detail(Run.config, Run.reference, Run.be.device, 3 * n * n * 2, gbps=2.0,
                                   reference_gbps=1.0)
    assert detail["flops_peak_dtype"] == "bfloat16"
    res = _result(0.3)
    res.timing.update(bound="compute-bound", gflops=61.0, flops_peak_gflops=100.0, flops_fraction=0.61,
                      flops_peak_dtype="bfloat16")
    assert res.bandwidth_text() == "61% of BF16 peak, compute-bound"


@pytest.mark.gpu
def test_cuda_matmul_peak():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    gflops = bandwidth.cuda_matmul_gflops(torch, n=4096, runs=3)
    assert 1_000 < gflops < 2_000_000  # an H100's float32 is ~50 TFLOP/s (TF32 and below: more)


@pytest.mark.gpu
def test_cuda_bfloat16_peak_is_above_the_float32_one():
    """Tensor cores: an H100's bfloat16 matmul runs several times its float32 one (not yet measured here)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    fp32 = bandwidth.cuda_matmul_gflops(torch, n=4096, runs=3)
    bf16 = bandwidth.cuda_matmul_gflops(torch, n=4096, runs=3, dtype="bfloat16")
    print(f"float32 {fp32:.0f} GFLOP/s, bfloat16 {bf16:.0f} GFLOP/s")
    assert bf16 > 1.5 * fp32


def test_a_float32_kernel_above_the_fp32_roof_is_held_to_the_tf32_one():
    """On a GPU a float32 task's kernel may round its products to TF32 on the tensor cores (a loose tolerance
    lets it through): against the float32 roof it read above 100% and was flagged as a wrong figure. With the
    card's TF32 peak measured beside the float32 one, such a kernel is held to the TF32 roof and named so;
    one above both is still flagged; a kernel under the float32 roof keeps it, with the TF32 peak said."""
    flops, moved = 2.0e9, 1.0e6  # 2000 FLOP/B: compute-bound on any machine
    under = bandwidth.speed_of_light(moved, 20.0, 10.0, 1000.0, flops, 50_000.0, tf32_peak_gflops=400_000.0)
    assert under["flops_fraction"] == pytest.approx(40_000.0 / 50_000.0) and "bandwidth_over_peak" not in under
    assert under["tf32_peak_gflops"] == 400_000.0 and "flops_roof" not in under
    above = bandwidth.speed_of_light(moved, 100.0, 10.0, 1000.0, flops, 50_000.0, tf32_peak_gflops=400_000.0)
    assert above["flops_roof"] == "tf32" and above["flops_peak_gflops"] == 400_000.0
    assert above["flops_fraction"] == pytest.approx(200_000.0 / 400_000.0) and "bandwidth_over_peak" not in above
    beyond = bandwidth.speed_of_light(moved, 300.0, 10.0, 1000.0, flops, 50_000.0, tf32_peak_gflops=400_000.0)
    assert beyond["flops_roof"] == "tf32" and beyond["bandwidth_over_peak"] == ["flops_fraction"]
    no_tf32 = bandwidth.speed_of_light(moved, 100.0, 10.0, 1000.0, flops, 50_000.0)
    assert no_tf32["bandwidth_over_peak"] == ["flops_fraction"]  # the CPU: no tensor-core roof, flagged as before


def test_the_latency_detail_names_the_tf32_roof_and_the_prompt_offers_it():
    """The reference worker's report on a GPU carries `flops_peak_tf32` beside `flops_peak`: the latency detail
    names the roof a kernel is held to (`tf32`), the verdict line says "of TF32 peak", and a kernel under the
    float32 roof is told what the tensor cores would allow. A FLOP peak given by hand keeps that roof alone."""
    from verifier.run.timed_calls import speed_of_light_detail

    reference = {"bandwidth_peak": {"gbps": 1000.0, "method": "m", "cached": True}, "flops": 2.0e9,
                 "flops_peak": {"gflops": 50_000.0, "method": "fp32 probe", "cached": True, "dtype": "float32"},
                 "flops_peak_tf32": {"gflops": 400_000.0, "method": "tf32 probe", "cached": False, "dtype": "tf32"}}
    fast = speed_of_light_detail(VerifyConfig(), reference, "cuda", 1_000_000, 100.0, 10.0)
    assert fast["flops_peak_dtype"] == "tf32" and fast["flops_peak_gflops"] == 400_000.0
    assert fast["flops_peak_source"].startswith("tf32 probe")
    res = _result(0.3)
    res.timing.update({k: fast[k] for k in ("bound", "gflops", "flops_peak_gflops", "flops_fraction", "flops_peak_dtype")})
    assert res.bandwidth_text() == "50% of TF32 peak, compute-bound"
    slow = speed_of_light_detail(VerifyConfig(), reference, "cuda", 1_000_000, 20.0, 10.0)
    assert slow["flops_peak_dtype"] == "float32" and slow["tf32_peak_gflops"] == 400_000.0
    res = _result(0.3)
    res.timing.update({k: slow[k] for k in ("bound", "gflops", "flops_peak_gflops", "flops_fraction",
                                            "flops_peak_dtype", "tf32_peak_gflops")})
    assert res.bandwidth_text() == "80% of FP32 peak, compute-bound"
    assert "TF32 tensor cores reach 400000.0 GFLOP/s" in res.feedback()
    given = speed_of_light_detail(VerifyConfig(flops_peak_gflops=50_000.0), reference, "cuda", 1_000_000, 100.0, 10.0)
    assert given["flops_peak_dtype"] == "float32" and "tf32_peak_gflops" not in given
    assert given["bandwidth_over_peak"] == ["flops_fraction"]


def test_no_tf32_roof_off_the_gpu(tmp_path, monkeypatch):
    """TF32 is a GPU's tensor-core mode: on the CPU no such peak is measured or cached."""
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("EVOKERNEL_PEAKS_CACHE", str(tmp_path / "peaks.json"))
    assert bandwidth.peak_flops(torch, "cpu", 1, dtype="tf32") is None
    assert not (tmp_path / "peaks.json").exists()


@pytest.mark.gpu
def test_cuda_tf32_peak_is_above_the_float32_one_and_leaves_the_precision_alone():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    before = torch.backends.cuda.matmul.allow_tf32
    fp32 = bandwidth.cuda_matmul_gflops(torch, n=4096, runs=3)
    tf32 = bandwidth.cuda_matmul_gflops(torch, n=4096, runs=3, dtype="tf32")
    print(f"float32 {fp32:.0f} GFLOP/s, tf32 {tf32:.0f} GFLOP/s")
    assert tf32 > 1.5 * fp32
    assert torch.backends.cuda.matmul.allow_tf32 == before
