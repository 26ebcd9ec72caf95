"""End-to-end GPU verification under the isolated verifier (bubblewrap, device nodes bound, paired
rounds against the trusted reference worker): honest CUDA and Triton kernels pass every gate, hostile
ones fail with the right rule (or, for work hidden on another stream, are timed with it), nvcc and
Triton errors reach the compile gate, the split CUDA build takes its bindings from the trusted side,
the GPU memory cap holds, and our timing agrees with do_bench."""

from __future__ import annotations

import dataclasses

import pytest

from tests.gpu.conftest import CANDIDATES, task_source

pytestmark = pytest.mark.gpu

HONEST = [("cuda", "relu"), ("cuda", "softmax_rows"), ("cuda", "matmul"), ("cuda", "layernorm"),
          ("triton", "relu"), ("triton", "softmax_rows"), ("triton", "matmul")]
HOSTILE = [("cublas_macro", "matmul", "cuda", {"reference-op-at-runtime", "binary-import", "vendor-kernel"}),
           ("cuda_graph_replay", "relu", "cuda", {"cuda-graph"}),
           ("side_stream_python", "relu", "triton", {"gpu-stream"})]


def _verify(backend, task, source, config):
    from verifier import verify

    return verify(task_source(task), source, backend=backend, config=config)


@pytest.mark.parametrize(("backend", "task"), HONEST, ids=[f"{b}-{t}" for b, t in HONEST])
def test_honest_kernel_is_feasible_and_timed(backend, task, gpu_config):
    res = _verify(backend, task, (CANDIDATES / backend / f"{task}.py").read_text(), gpu_config)
    assert res.outcome == "feasible", [(g.name, g.reason) for g in res.gates if g.status == "fail"]
    assert res.isolated, res.notes
    assert res.device_id.startswith(("GPU ", "GPU-", "MIG-")), res.device_id  # the card, as the worker saw it
    # each side's device-memory peak over the verification (the plan's estimate is checked against these)
    assert set(res.device_peak_gb) == {"reference", "candidate"} and all(v > 0 for v in res.device_peak_gb.values())
    lat = next(g for g in res.gates if g.name == "latency")
    assert lat.detail["rounds"] >= gpu_config.min_rounds and lat.detail["sampled_checks"] >= 1
    assert 0 < res.latency_ms < 50
    assert res.reference_ms and res.speedup and res.speedup > 0
    kernels = [r for r in res.profile if r.get("device_kernel")]
    assert kernels, res.profile
    # every trial's output was probed as forward returned (the side-stream check), and the builds are listed
    # (Triton's happen at the first launch, inside the first trial)
    # (the numerics probes that ran are trials too: verifier/correctness/probes.py)
    correct = res.gate("correctness").detail
    probed = sum(1 for p in correct.get("probes") or [] if p.get("status") != "skip")
    assert res.gate("anti_hacking").detail.get("gpu_probes") == correct["trials"] + probed, correct.get("probes")
    builds = res.gate("compile").detail["builds"]
    assert builds and {b["layout"] for b in builds} <= {"split", "cached", "torch-ninja", "triton-jit"}, builds


@pytest.mark.parametrize(("name", "task", "backend", "wanted"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_gpu_candidate_fails_anti_hacking(name, task, backend, wanted, gpu_config):
    import dataclasses

    # strict: cuBLAS doing the work is reported, not refused, under the kernelbench preset
    config = dataclasses.replace(gpu_config, policy="strict") if "vendor-kernel" in wanted else gpu_config
    res = _verify(backend, task, (CANDIDATES / "hostile_gpu" / f"{name}.py").read_text(), config)
    gate = res.gates[0]
    rules = {v["rule"] for v in gate.detail.get("violations", [])} | {gate.detail.get("rule")}
    assert res.outcome == "hack_fail" and rules & wanted, (res.outcome, gate.reason)


def test_work_hidden_on_a_side_stream_gains_nothing(gpu_config):
    """The kernel runs on a non-blocking stream made through pasted names (no static rule sees it): it is
    rejected, or its time includes the hidden work (the host's clock), so it cannot look fast."""
    res = _verify("cuda", "relu", (CANDIDATES / "hostile_gpu" / "side_stream_macro.py").read_text(), gpu_config)
    if res.outcome == "hack_fail":
        return
    assert res.outcome == "feasible", [(g.name, g.reason) for g in res.gates if g.status == "fail"]
    assert res.speedup is not None and res.speedup < 1.0, (res.latency_ms, res.reference_ms)


def test_nvcc_error_fails_compile_with_mapped_line(gpu_config):
    src = (CANDIDATES / "cuda" / "relu.py").read_text().replace("float4 v = x[i];", "float4 v = x[i]; undefined_thing;")
    src = src.replace("evk_cuda_relu", "evk_cuda_relu_broken")
    res = _verify("cuda", "relu", src, gpu_config)
    comp = next(g for g in res.gates if g.name == "compile")
    assert res.outcome == "compile_fail"
    assert comp.reason.startswith("compile error: cuda_sources:7: error:") and "undefined_thing" in comp.reason


def test_split_build_takes_its_bindings_from_the_trusted_side(gpu_config):
    """Two versions of a kernel: each compiles its own kernel TU in its sandbox; the bindings object is
    built once by the trusted side and linked by both (never a sandbox-built artefact shared)."""
    src = (CANDIDATES / "cuda" / "relu.py").read_text()
    first = _verify("cuda", "relu", src, gpu_config)
    changed = _verify("cuda", "relu", src.replace("const int threads = 256;", "const int threads = 128;"), gpu_config)
    for res in (first, changed):
        assert res.outcome == "feasible", [(g.name, g.reason) for g in res.gates if g.status == "fail"]
        (build,) = res.gate("compile").detail["builds"]
        assert build["layout"] == "split", build
        assert any(s.startswith("bindings shared") for s in build["steps"]), build["steps"]
    print("cold", first.gate("compile").seconds, first.seconds, "changed", changed.gate("compile").seconds,
          changed.seconds)


def _alloc_in_forward(nbytes: int) -> str:
    """The honest Triton relu plus an allocation in forward (torch.empty: the caching allocator asks the
    driver at once, so the cap is met without a torch operator the static scan would refuse)."""
    src = (CANDIDATES / "triton" / "relu.py").read_text()
    return src.replace("        y = torch.empty_like(x)\n",
                       f"        y = torch.empty_like(x)\n        big = torch.empty({nbytes}, dtype=torch.uint8, device=x.device)\n")


def test_gpu_memory_cap_holds(gpu_config):
    """Under gpu_memory_fraction=0.05 (about 4 GB of an 80 GB card) a forward that allocates 8 GB fails with
    torch's out-of-memory error; 512 MB under the same cap passes."""
    import torch

    total = torch.cuda.get_device_properties(0).total_memory
    config = dataclasses.replace(gpu_config, gpu_memory_fraction=0.05)
    over = _verify("triton", "relu", _alloc_in_forward(int(total * 0.10)), config)
    assert over.outcome != "feasible"
    failed = next(g for g in over.gates if g.status == "fail")
    assert "out of memory" in failed.reason.lower(), (failed.name, failed.reason)
    under = _verify("triton", "relu", _alloc_in_forward(512 << 20), config)
    assert under.outcome == "feasible", [(g.name, g.reason) for g in under.gates if g.status == "fail"]


@pytest.mark.alone  # reads the whole card's memory: another worker's test would show as left behind
def test_device_memory_is_back_after_the_sandbox_ends(gpu_config):
    """A candidate that holds 4 GB for its whole life: once its sandbox is gone the driver reports no
    more memory in use than before it started (the warm reference worker's share excepted)."""
    from verifier.backends.cuda import device_memory_mb, memory_left_behind

    honest = (CANDIDATES / "triton" / "relu.py").read_text()
    _verify("triton", "relu", honest, gpu_config)  # the reference worker is warm from here on
    before = device_memory_mb()
    assert before is not None, "nvidia-smi could not report the GPU's memory"
    hog = honest.replace("class ModelNew", "_HOLD = torch.ones(4 << 30, dtype=torch.uint8, device='cuda')\n\n\nclass ModelNew")
    _verify("triton", "relu", hog, gpu_config)
    after = device_memory_mb()
    assert memory_left_behind(before[0], after[0]) is None, (before, after)


def test_triton_compile_error_fails_compile_gate(gpu_config):
    src = (CANDIDATES / "triton" / "relu.py").read_text().replace("tl.maximum(x, 0.0)", "tl.maximimum(x, 0.0)")
    res = _verify("triton", "relu", src, gpu_config)
    comp = next(g for g in res.gates if g.name == "compile")
    assert res.outcome == "compile_fail", [(g.name, g.reason) for g in res.gates]
    assert "maximimum" in comp.reason and comp.detail["diagnostics"][0].startswith("candidate.py:")


def test_event_timing_matches_do_bench_within_5_percent():
    import torch
    from triton.testing import do_bench

    from verifier.clock.gpu_timing import CudaClock
    from verifier.workers.harness import Progress

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

    from verifier.clock.gpu_timing import CudaClock

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


def test_own_stub_round_on_the_gpu_is_measured_and_the_kernel_still_checked(gpu_config):
    """`own_stub="on"` on the GPU (session 14's diagnostic): after each round's blocks are saved and checked
    the harness runs its own loop on the outputs it kept; the verdict carries its cost beside the trusted
    stub's, and each candidate round's wall with the harness's own [draw, loop] split inside it."""
    config = dataclasses.replace(gpu_config, own_stub="on")
    res = _verify("cuda", "relu", (CANDIDATES / "cuda" / "relu.py").read_text(), config)
    assert res.outcome == "feasible", [(g.name, g.reason) for g in res.gates if g.status == "fail"]
    detail = res.gate("latency").detail
    assert detail["own_overhead_ms"] is not None and detail["own_overhead_ms"] > 0, detail
    assert 0 < detail["own_overhead_ratio"] <= 1.0  # never subtracts more than the trusted stub
    for wall, split in zip(detail["candidate_walls_ms"], detail["candidate_inner_ms"], strict=True):
        assert 0 < sum(split) <= wall, (wall, split)
    print("own stub", detail["own_overhead_ms"], "trusted", detail["trusted_overhead_ms"])


def test_the_candidates_window_holds_no_harness_work_the_trusted_one_lacks(gpu_config):
    """Session 15 (H200): the harness read `torch.cuda.max_memory_reserved()` (the allocator's whole
    statistics dict) and freed the last round's sets at the start of every command, clocked ones included:
    0.27-0.43 ms of "before sets" in each candidate round against 0.01 ms in the trusted worker's, all charged
    to the kernel (GELU head 0.80 of KernelBench-style timing; 0.97 once removed). Each window is split by the
    workers' own stamps (`window_segments`); the candidate's part before its sets must stay as small as the
    trusted worker's."""
    res = _verify("cuda", "relu", (CANDIDATES / "cuda" / "relu.py").read_text(), gpu_config)
    assert res.outcome == "feasible", [(g.name, g.reason) for g in res.gates if g.status == "fail"]
    detail = res.gate("latency").detail
    names = detail["window_segments"]
    before = names.index("before sets")
    cand = sorted(s["round"][before] for s in detail["candidate_segments_ms"] if s["round"])
    ref = sorted(r["replay"][2 + before] for r in detail["reference_inner_ms"] if len(r["replay"]) == 9)
    assert cand and ref, detail["candidate_segments_ms"]
    assert cand[len(cand) // 2] < 0.1, (cand, ref)
    for seg in detail["candidate_segments_ms"]:
        loop = seg.get("loop")  # the loop's own detail: one host span per call, each at least the empty call's
        assert loop and loop["calls_ms"] and all(c[0] >= 0.5 * loop["empty_ms"] for c in loop["calls_ms"]), loop
    # where each side's device memory peaked, read only between clocked windows (the memory plan's measure)
    phases = res.device_peak_phases_gb
    assert {"prepare", "rounds"} <= set(phases.get("reference", {})), phases
    assert {"trials", "rounds"} <= set(phases.get("candidate", {})), phases
    assert max(phases["reference"].values()) <= res.device_peak_gb["reference"] + 0.01, (phases, res.device_peak_gb)


def test_the_queued_gpu_loop_checks_every_call_and_times_the_kernel(gpu_config):
    """`gpu_loop="async"` (issue 33's A/B for µs kernels): no synchronise between a round's calls. Every call
    is still checked (the blocks of every output), the round's wall is still the parent's, and the loop says
    which way it ran."""
    config = dataclasses.replace(gpu_config, gpu_loop="async")
    res = _verify("cuda", "relu", (CANDIDATES / "cuda" / "relu.py").read_text(), config)
    assert res.outcome == "feasible", [(g.name, g.reason) for g in res.gates if g.status == "fail"]
    detail = res.gate("latency").detail
    assert detail["checked_calls"] >= detail["calls_per_round"] >= 1
    loops = [s["loop"] for s in detail["candidate_segments_ms"] if s.get("loop")]
    assert loops and all(loop.get("mode") == "async" for loop in loops), loops
    assert all(r["replay"] and r["replay"].get("mode") == "async" for r in detail["reference_loops"]), detail["reference_loops"]
    print("async loop", res.speedup, detail.get("lo"), detail.get("hi"), detail.get("noisy"))


def test_compare_of_a_kernel_with_itself_runs_on_the_gpu(gpu_config):
    """`compare` (the A/A check, `evokernel compare`) on the card: both kernels correct, a paired figure.
    Session 23 found every trial of kernel B failing "malformed (KeyError: 'file')": run B's shared
    reference side had no device-side comparison of its own."""
    from verifier.api import compare

    ref = task_source("relu")
    same = ref.replace("class Model(", "class ModelNew(")
    got = compare(ref, same, same, backend="cuda", config=gpu_config)
    assert "error" not in got, got.get("error")
    assert got["speedup"] > 0 and got["a_ms"] > 0 and got["b_ms"] > 0
