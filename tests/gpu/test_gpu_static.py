"""GPU pieces that need no GPU: static rules on GPU idioms, availability lines, diagnostics, the parent's
unsynchronised-work and vendor-kernel checks over recorded evidence."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from verifier.backends import BackendUnavailable, get_backend
from verifier.backends.cuda import build_failure, cuda_unavailable_reason, map_cuda_diagnostics
from verifier.backends.triton import compile_diagnostics
from verifier.clock.gpu_timing import gpu_findings, vendor_kernels
from verifier.policy.static_scan import scan

CANDIDATES = Path(__file__).resolve().parents[1] / "candidates"
STATIC_HOSTILE = {
    "cublas_at_matmul.py": ("cuda", "cpp-torch-op", 10),
    "cublas_ldflags.py": ("cuda", "cpp-library", 18),
    "side_stream_python.py": ("triton", "gpu-stream", 19),
    "cpp_side_stream.py": ("cuda", "gpu-stream", 16),
    "cuda_graph_replay.py": ("cuda", "cuda-graph", 27),
    "cpp_graph_launch.py": ("cuda", "cuda-graph", 13),
    "event_timing_abuse.py": ("cuda", "gpu-stream", 29),
}
DYNAMIC_ONLY = ["cublas_macro.py", "side_stream_macro.py"]


@pytest.mark.parametrize("name", sorted(STATIC_HOSTILE))
def test_static_rules_catch_gpu_hacks(name):
    backend, rule, line = STATIC_HOSTILE[name]
    found = {(v.rule, v.line) for v in scan((CANDIDATES / "hostile_gpu" / name).read_text(), backend)}
    assert (rule, line) in found, found


@pytest.mark.parametrize("name", DYNAMIC_ONLY)
def test_evasive_hacks_pass_static_scan_so_runtime_checks_must_catch_them(name):
    assert scan((CANDIDATES / "hostile_gpu" / name).read_text(), "cuda") == []


@pytest.mark.parametrize("path", sorted((CANDIDATES / "cuda").glob("*.py")) + sorted((CANDIDATES / "triton").glob("*.py")),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_honest_gpu_candidates_pass_static_scan(path):
    assert scan(path.read_text(), path.parent.name) == []


def test_triton_import_is_a_standin_outside_the_triton_backend():
    src = (CANDIDATES / "triton" / "relu.py").read_text()
    assert "compiler-standin" in {v.rule for v in scan(src, "cuda")}


def test_stream_alias_without_call_is_caught():
    src = "import torch\nimport torch.nn as nn\nS = torch.cuda.Stream\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n"
    assert ("gpu-stream", 3) in {(v.rule, v.line) for v in scan(src, "cuda")}


def test_current_stream_and_synchronize_stay_allowed():
    src = ("import torch\nimport torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
           "        torch.cuda.synchronize()\n        s = torch.cuda.current_stream()\n        return x\n")
    assert scan(src, "cuda") == []


def test_cuda_backend_without_gpu_gives_one_line(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    reason = cuda_unavailable_reason()
    assert reason and "\n" not in reason and "--backend cpu" in reason
    with pytest.raises(BackendUnavailable) as exc:
        get_backend("cuda").check_available()
    assert str(exc.value) == reason


def test_verify_with_cuda_backend_and_no_gpu_raises_the_line(monkeypatch):
    import torch

    from verifier import verify

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(BackendUnavailable, match="GPU"):
        verify("x = 1", "y = 2", backend="cuda")


def test_missing_nvcc_is_named(monkeypatch):
    import torch

    from verifier.backends import cuda

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(cuda, "nvcc_path", lambda: None)
    reason = cuda.cuda_unavailable_reason()
    assert reason.startswith("nvcc (the CUDA compiler) was not found")


@pytest.mark.skipif(importlib.util.find_spec("triton") is not None, reason="triton is installed here")
def test_triton_backend_without_triton_says_how_to_install():
    with pytest.raises(BackendUnavailable, match=r"^triton is not installed: pip install triton"):
        get_backend("triton").check_available()


def test_triton_backend_without_gpu_is_interpreted(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    be = get_backend("triton")
    assert be.interpreted and be.device == "cpu" and be.child_env() == {"TRITON_INTERPRET": "1"}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    be = get_backend("triton")
    assert not be.interpreted and be.device == "cuda" and be.child_env() == {}


NVCC_LOG = """Error building extension 'evk_x': [1/3] /usr/local/cuda/bin/nvcc --generate-dependencies-with-compile -c /b/cuda.cu -o cuda.cuda.o
FAILED: cuda.cuda.o
/b/cuda.cu(15): error: identifier "blockIdy" is undefined
      int i = blockIdy.x;
              ^

/b/cuda.cu(9): warning #177-D: variable "unused" was declared but never referenced

1 error detected in the compilation of "/b/cuda.cu".
[2/3] c++ -MMD -MF main.o.d -c /b/main.cpp -o main.o
FAILED: main.o
/b/main.cpp:3:1: error: 'tensor' does not name a type
ninja: build stopped: subcommand failed.
"""


def test_nvcc_errors_are_parsed_and_mapped_to_the_persons_lines():
    message, diags = build_failure(NVCC_LOG)
    assert message == 'cuda_sources:12: error: identifier "blockIdy" is undefined'
    assert "cpp_sources:2: error: 'tensor' does not name a type" in diags
    assert diags[-1].startswith("cuda_sources:6: warning:")


def test_undefined_symbol_at_import_is_reported():
    message, diags = build_failure("ImportError: /b/evk_x.so: undefined symbol: _Z12relu_forwardN2at6TensorE\n")
    assert diags == ["link: error: undefined symbol _Z12relu_forwardN2at6TensorE (declared but not defined?)"]
    assert message == diags[0]


def test_other_files_keep_their_lines():
    assert map_cuda_diagnostics(["helper.cuh:7: error: x"]) == ["helper.cuh:7: error: x"]


def test_triton_compile_error_maps_to_candidate_line():
    class CompilationError(Exception):
        pass

    exc = CompilationError("at 3:8:\ndef k(x):\n    y = tl.lod(x)\n        ^\nAttributeError(\"module has no attribute 'lod'\")")
    assert compile_diagnostics(exc, "/w/candidate.py", 10) == [
        "candidate.py:12: error: AttributeError(\"module has no attribute 'lod'\")"]
    assert compile_diagnostics(exc, "/w/candidate.py", None)[0].startswith("candidate.py: error:")


def _marks(window_s: float, calls: int) -> list:
    return [(100.0, {"phase": "gpu_batch_start", "calls": calls}), (100.0 + window_s, {"phase": "gpu_batch_end"})]


def test_honest_gpu_bound_kernel_is_not_flagged():
    cand = {"gpu_probes": [{"pending_ms": 0.004, "changed": False}] * 5, "times_ms": [0.030] * 50,
            "host_ms": [0.008] * 50}
    assert gpu_findings(cand, {}, _marks(0.028 * 700 / 1000, 700)) == []


def test_honest_launch_bound_kernel_is_not_flagged():
    cand = {"gpu_probes": [{"pending_ms": 0.004, "changed": False}] * 5, "times_ms": [0.003] * 50,
            "host_ms": [0.020] * 50}
    assert gpu_findings(cand, {}, _marks(0.021 * 1000 / 1000, 1000)) == []


def test_work_hidden_from_the_timed_stream_is_flagged():
    cand = {"gpu_probes": [{"pending_ms": 0.004, "changed": False}] * 5, "times_ms": [0.003] * 50,
            "host_ms": [0.006] * 50}
    found = gpu_findings(cand, {}, _marks(0.040 * 500 / 1000, 500))
    assert [r for r, _ in found] == ["unsynchronised-work"]
    assert "0.0400 ms per call" in found[0][1]


def test_output_unfinished_on_current_stream_is_flagged():
    cand = {"gpu_probes": [{"pending_ms": 0.2, "changed": True}, {"pending_ms": 0.2, "changed": False}]}
    (rule, msg), = gpu_findings(cand, {}, [])
    assert rule == "unsynchronised-work" and msg.startswith("in 1 of 2 trials")


def test_device_busy_after_stream_drained_is_flagged():
    cand = {"gpu_probes": [{"pending_ms": 0.3, "changed": False}] * 3}
    assert [r for r, _ in gpu_findings(cand, {}, [])] == ["unsynchronised-work"]


def test_long_honest_kernel_with_sync_latency_is_not_flagged():
    """A 20 ms matmul on the current stream: the device synchronise after the drained stream took
    0.085-0.125 ms on an H100 with nothing pending (3 of 3 verdicts were refused before the limit became
    relative to the call's own time)."""
    cand = {"gpu_probes": [{"pending_ms": 0.12, "idle_ms": 0.01, "changed": False}] * 3, "times_ms": [20.0] * 50}
    assert gpu_findings(cand, {}, []) == []
    # no event times in the evidence (a verdict refused before timing): the stream's own drain time scales it
    # (an H200 showed 0.074 ms after a 5.8 ms matmul)
    drained = {"gpu_probes": [{"pending_ms": 0.085, "idle_ms": 0.01, "drain_ms": 5.8, "changed": False}] * 3}
    assert gpu_findings(drained, {}, []) == []
    short = {"gpu_probes": [{"pending_ms": 0.085, "idle_ms": 0.01, "drain_ms": 0.01, "changed": False}] * 3}
    assert [r for r, _ in gpu_findings(short, {}, [])] == ["unsynchronised-work"]


def test_hidden_side_stream_work_on_a_long_kernel_is_still_flagged():
    """The limit scales with the call, so work hidden beside a long kernel still counts once it is more
    than 2% of what the events saw (here 1 ms beside 20 ms)."""
    cand = {"gpu_probes": [{"pending_ms": 1.0, "idle_ms": 0.01, "changed": False}] * 3, "times_ms": [20.0] * 50}
    assert [r for r, _ in gpu_findings(cand, {}, [])] == ["unsynchronised-work"]


def test_idle_synchronise_cost_is_not_counted_as_pending():
    """What a synchronise costs on an idle device (measured right after) is taken off the pending time."""
    slow_sync = {"gpu_probes": [{"pending_ms": 0.09, "idle_ms": 0.08, "changed": False}] * 3, "times_ms": [0.01] * 50}
    assert gpu_findings(slow_sync, {}, []) == []
    hidden = {"gpu_probes": [{"pending_ms": 0.30, "idle_ms": 0.01, "changed": False}] * 3, "times_ms": [0.01] * 50}
    assert [r for r, _ in gpu_findings(hidden, {}, [])] == ["unsynchronised-work"]


GEMM = "sm90_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_warpgroupsize1x1x1_execute_segment_k_off_kernel"


def test_reference_library_kernel_in_candidate_is_flagged():
    ref = [{"name": "aten::mm", "self_ms": 0.1, "calls": 1, "device_kernel": False},
           {"name": GEMM, "self_ms": 0.5, "calls": 1, "device_kernel": True},
           {"name": "void at::native::vectorized_elementwise_kernel<4, FillFunctor<float>>", "self_ms": 0.2,
            "calls": 1, "device_kernel": True},
           {"name": "cudaLaunchKernel", "self_ms": 0.3, "calls": 1, "device_kernel": False}]
    cand = [{"name": GEMM, "self_ms": 0.5, "calls": 1, "device_kernel": True},
            {"name": "cudaLaunchKernel", "self_ms": 0.3, "calls": 1, "device_kernel": False},
            {"name": "void at::native::vectorized_elementwise_kernel<4, FillFunctor<float>>", "self_ms": 0.2,
             "calls": 1, "device_kernel": True}]
    assert vendor_kernels(cand, ref) == [GEMM]
    assert [r for r, _ in gpu_findings({"profile": cand}, {"profile": ref}, [])] == ["vendor-kernel"]
    own = [{"name": "matmul_tiled(float const*, float const*, float*, int, int, int)", "self_ms": 0.9, "calls": 1,
            "device_kernel": True}] + cand[1:]
    assert vendor_kernels(own, ref) == []


def test_rule_names_are_documented():
    from verifier.policy.static_scan import RULES

    for rule in ("gpu-stream", "cuda-graph", "unsynchronised-work", "vendor-kernel"):
        assert re.match(r"\w", RULES[rule])


def test_kernels_the_events_never_saw_are_flagged():
    cand = {"times_ms": [0.002] * 50, "host_ms": [0.015] * 50, "profile_device_ms": 0.021}
    (rule, msg), = gpu_findings(cand, {}, [])
    assert rule == "unsynchronised-work" and "0.0210 ms of GPU kernels" in msg
    honest = {"times_ms": [0.025] * 50, "host_ms": [0.015] * 50, "profile_device_ms": 0.021}
    assert gpu_findings(honest, {}, []) == []


def test_gpu_memory_figures(tmp_path):
    from verifier.backends.cuda import device_memory_mb, memory_cap_mb, memory_left_behind, parse_memory_query

    assert parse_memory_query("12345, 81559\n") == (12345, 81559)
    assert parse_memory_query("[N/A], 81559") is None and parse_memory_query("") is None
    assert memory_cap_mb(0.9, 81559) == 73403 and memory_cap_mb(None, 81559) is None
    with pytest.raises(ValueError, match="gpu_memory_fraction"):
        memory_cap_mb(1.5, 81559)
    assert memory_left_behind(1000, 1400) is None
    line = memory_left_behind(1000, 5100)
    assert line.startswith("4100 MiB of GPU memory were still in use") and "\n" not in line
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho \"$1 $2\" > \"$(dirname \"$0\")/args\"\necho '2048, 81559'\n")
    smi.chmod(0o755)
    assert device_memory_mb(0, nvidia_smi=str(smi)) == (2048, 81559)
    assert (tmp_path / "args").read_text().split() == ["--id=0", "--query-gpu=memory.used,memory.total"]
    assert device_memory_mb(0, nvidia_smi=str(tmp_path / "missing")) is None
