"""End-to-end GPU verification: honest CUDA and Triton kernels pass every gate, hostile ones fail with
the right rule, nvcc and Triton errors reach the compile gate, and our timing agrees with do_bench."""

from __future__ import annotations

import pytest

from tests.gpu.conftest import CANDIDATES, task_source

pytestmark = pytest.mark.gpu

HONEST = [("cuda", "relu"), ("cuda", "softmax_rows"), ("cuda", "matmul"), ("cuda", "layernorm"),
          ("triton", "relu"), ("triton", "softmax_rows"), ("triton", "matmul")]
HOSTILE = [("cublas_macro", "matmul", "cuda", "reference-op-at-runtime"),
           ("side_stream_macro", "relu", "cuda", "unsynchronised-work"),
           ("cuda_graph_replay", "relu", "cuda", "cuda-graph"),
           ("side_stream_python", "relu", "triton", "gpu-stream")]


def _verify(backend, task, source, config):
    from verifier import verify

    return verify(task_source(task), source, backend=backend, config=config)


@pytest.mark.parametrize(("backend", "task"), HONEST, ids=[f"{b}-{t}" for b, t in HONEST])
def test_honest_kernel_is_feasible_and_timed(backend, task, gpu_config):
    res = _verify(backend, task, (CANDIDATES / backend / f"{task}.py").read_text(), gpu_config)
    assert res.outcome == "feasible", [(g.name, g.reason) for g in res.gates if g.status == "fail"]
    lat = next(g for g in res.gates if g.name == "latency")
    assert lat.detail["runs"] >= 50 and 0 < res.latency_ms < 50
    assert res.reference_ms and res.speedup and res.speedup > 0
    kernels = [r for r in res.profile if r.get("device_kernel")]
    assert kernels, res.profile


@pytest.mark.parametrize(("name", "task", "backend", "rule"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_gpu_candidate_fails_anti_hacking(name, task, backend, rule, gpu_config):
    res = _verify(backend, task, (CANDIDATES / "hostile_gpu" / f"{name}.py").read_text(), gpu_config)
    gate = res.gates[0]
    rules = {v["rule"] for v in gate.detail.get("violations", [])}
    assert res.outcome == "hack_fail" and rule in rules, (res.outcome, gate.reason)


def test_nvcc_error_fails_compile_with_mapped_line(gpu_config):
    src = (CANDIDATES / "cuda" / "relu.py").read_text().replace("float4 v = x[i];", "float4 v = x[i]; undefined_thing;")
    src = src.replace("evk_cuda_relu", "evk_cuda_relu_broken")
    res = _verify("cuda", "relu", src, gpu_config)
    comp = next(g for g in res.gates if g.name == "compile")
    assert res.outcome == "compile_fail"
    assert comp.reason.startswith("compile error: cuda_sources:7: error:") and "undefined_thing" in comp.reason


def test_unchanged_kernel_is_a_cache_hit(gpu_config):
    src = (CANDIDATES / "cuda" / "relu.py").read_text()
    _verify("cuda", "relu", src, gpu_config)
    res = _verify("cuda", "relu", src, gpu_config)
    comp = next(g for g in res.gates if g.name == "compile")
    assert comp.detail["cache_hits"] == 1 and comp.seconds < 5


def test_triton_compile_error_fails_compile_gate(gpu_config):
    src = (CANDIDATES / "triton" / "relu.py").read_text().replace("tl.maximum(x, 0.0)", "tl.maximimum(x, 0.0)")
    res = _verify("triton", "relu", src, gpu_config)
    comp = next(g for g in res.gates if g.name == "compile")
    assert res.outcome == "compile_fail", [(g.name, g.reason) for g in res.gates]
    assert "maximimum" in comp.reason and comp.detail["diagnostics"][0].startswith("candidate.py:")


def test_event_timing_matches_do_bench_within_5_percent():
    import torch
    from triton.testing import do_bench

    from verifier.gpu_timing import CudaClock
    from verifier.harness import Progress

    x = torch.randn(4096, 4096, device="cuda")

    def fn(t):
        return torch.softmax(t, dim=-1)

    ours = CudaClock(torch).time_calls(fn, [x], 10, 100, 1000, 0.3, Progress(None))["times_ms"]
    ours_med = sorted(ours)[len(ours) // 2]
    theirs = do_bench(lambda: fn(x), warmup=25, rep=300, return_mode="median")
    assert abs(ours_med / theirs - 1.0) <= 0.05, (ours_med, theirs)


def test_probe_sees_work_left_on_a_non_blocking_stream():
    """torch's own pool streams are ordered with the legacy default stream here, so use a non-blocking one."""
    import torch

    from verifier.gpu_timing import CudaClock

    cupy = pytest.importorskip("cupy")
    clock = CudaClock(torch)
    x = torch.randn(4096, 4096, device="cuda")
    y = torch.zeros_like(x)
    raw = cupy.cuda.Stream(non_blocking=True)
    side = torch.cuda.ExternalStream(raw.ptr)
    torch.cuda._sleep(1000)
    torch.mul(x, 2, out=y)
    clock.probe([y])  # lazy module loading of a kernel's first launch waits for the device: load them first
    y.zero_()
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        torch.cuda._sleep(20_000_000)
        torch.mul(x, 2, out=y)
    probe = clock.probe([y])
    assert probe["changed"] and probe["pending_ms"] > 1.0, probe
    honest = clock.probe([x * 2])
    assert not honest["changed"] and honest["pending_ms"] < 1.0, honest
