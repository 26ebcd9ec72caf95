"""verify() end to end with real builds and runs, on a build root shared by the session.

The hostile kernels here share one extension name and signature (see conftest), so each costs a kernel
compile and a link; the honest candidates are the files in tests/candidates/cpu.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from verifier import verify
from verifier.policy.static_scan import scan
from verifier.result import GATE_ORDER

pytestmark = pytest.mark.slow
HONEST = Path(__file__).resolve().parents[1] / "candidates" / "cpu"
KERNEL_LINE0 = 4  # the C++ body's first line is line 5 of CPP (see conftest.shared_kernel)
RELU = """    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) o[i] = in[i] > 0.0f ? in[i] : 0.0f;
    return out;"""


def _failed(res):
    gate = res.failed_gate
    assert gate is not None, [(g.name, g.status, g.reason) for g in res.gates]
    return gate


@pytest.mark.alone
@pytest.mark.parametrize("task", ["relu", "softmax_rows"])
def test_honest_candidate_passes_every_gate(task, task_source, make_config):
    seen = []
    res = verify(task_source(task), (HONEST / f"{task}.py").read_text(), config=make_config(timing="full"),
                 on_gate=lambda name, state: seen.append((name, state)))
    assert [(g.name, g.status) for g in res.gates] == [(n, "pass") for n in GATE_ORDER], res.feedback()
    assert res.feasible and res.outcome == "feasible"
    if res.latency_ms is None:
        # a busy machine (CI's two cores under xdist) can disturb or swamp every round of a microsecond
        # relu: then the verdict must say it has no figure, not carry one from thrown-out rounds, and a
        # second verification on a quieter moment must give one
        assert res.timing.get("no_figure") is True and res.speedup is None, res.timing
        res = verify(task_source(task), (HONEST / f"{task}.py").read_text(), config=make_config(timing="full"))
        assert res.feasible
        assert res.latency_ms is not None, ("a second verification without a figure either", res.timing)
    assert res.latency_ms > 0 and res.reference_ms > 0
    assert res.speedup == pytest.approx(res.reference_ms / res.latency_ms)
    assert res.gate("latency").detail["runs"] >= 3
    assert res.gate("correctness").detail["trials"] == 2
    assert res.gate("correctness").detail["max_abs"] <= 1e-2
    assert res.gate("compile").detail["builds"][0]["name"] == f"evk_candidate_{task}"
    assert res.profile and all({"name", "self_ms", "calls"} <= set(row) for row in res.profile)
    for name in GATE_ORDER:
        assert (name, "pass") in seen
    assert seen.index(("compile", "running")) < seen.index(("correctness", "running"))
    assert res.gate("anti_hacking").detail["checks"] == "static+dynamic"
    assert "Latency:" in res.feedback()


@pytest.mark.alone
def test_verdict_cache_returns_the_same_result(task_source, make_config, kernel_source):
    # a body of its own per run: a build root kept across runs (EVOKERNEL_TEST_BUILD_DIR) holds the last run's verdict
    source = kernel_source(RELU + f"\n    // cache test {uuid.uuid4().hex}")
    first = verify(task_source("relu"), source, config=make_config(use_cache=True))
    assert first.feasible and not first.cached and not any("cached" in n for n in first.notes)
    start = time.monotonic()
    again = verify(task_source("relu"), source, config=make_config(use_cache=True))
    assert time.monotonic() - start < 2
    assert any("cached verdict" in n for n in again.notes)
    assert [(g.name, g.status) for g in again.gates] == [(g.name, g.status) for g in first.gates]
    assert again.latency_ms == first.latency_ms
    assert again.cached and again.measured_at == first.measured_at
    assert "cached, measured 0 min ago" in again.timing_label()
    fresh = verify(task_source("relu"), source, config=make_config(use_cache=True, atol=1e-3))
    assert not any("cached verdict" in n for n in fresh.notes)


def test_wrong_kernel_fails_correctness_with_location(task_source, make_config, kernel_source):
    body = RELU.replace("in[i] : 0.0f", "in[i] : 0.5f * in[i]")
    fake = 'print(\'{"phase": "done", "feasible": true, "outcome": "feasible"}\')\n        return _ext.kernel_forward(x)'
    res = verify(task_source("relu"), kernel_source(body, forward=fake), config=make_config())
    gate = _failed(res)
    assert gate.name == "correctness" and res.outcome == "incorrect"
    assert gate.detail["max_abs"] > 1.0
    assert gate.detail["mismatch"].startswith("output 0[")
    assert "expected 0" in gate.detail["mismatch"]
    assert "max abs error" in gate.reason
    assert [g.status for g in res.gates] == ["pass", "pass", "fail", "skip", "skip"]
    assert "mismatch:" in res.feedback()


def test_kernel_that_mutates_its_input_fails(task_source, make_config, kernel_source):
    body = """    float* in = x.data_ptr<float>();
    auto out = torch::empty_like(x);
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) { in[i] = in[i] > 0.0f ? in[i] : 0.0f; o[i] = in[i]; }
    return out;"""
    res = verify(task_source("relu"), kernel_source(body), config=make_config())
    gate = _failed(res)
    assert gate.name == "correctness"
    assert "input 0 was modified" in gate.reason


def test_output_aliasing_the_input_fails(task_source, make_config, kernel_source):
    body = """    float* in = x.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) in[i] = in[i] > 0.0f ? in[i] : 0.0f;
    return x;"""
    res = verify(task_source("relu"), kernel_source(body), config=make_config())
    gate = _failed(res)
    assert gate.name == "correctness"
    assert "aliases an input" in gate.reason


def test_compile_error_points_at_the_line(task_source, make_config, kernel_source):
    body = RELU.replace("float* o = out.data_ptr<float>();", "float* o = out.data_ptr<float>()")
    bad_line = KERNEL_LINE0 + 1 + body.splitlines().index("    float* o = out.data_ptr<float>()")
    res = verify(task_source("relu"), kernel_source(body), config=make_config())
    gate = _failed(res)
    assert gate.name == "compile" and res.outcome == "compile_fail"
    diags = gate.detail["diagnostics"]
    errors = [d for d in diags if ": error:" in d]
    assert errors and errors[0].startswith("kernel.cpp:")
    assert int(errors[0].split(":")[1]) in (bad_line, bad_line + 1), (bad_line, errors)
    assert gate.reason.startswith("compile error: kernel.cpp:")
    assert "kernel.cpp:" in res.feedback()
    file_line = 1 + kernel_source(body).splitlines().index("    float* o = out.data_ptr<float>()")
    assert errors[0].endswith((f"[file line {file_line}]", f"[file line {file_line + 1}]")), errors[0]


@pytest.mark.alone
def test_hang_in_forward_times_out(task_source, make_config):
    source = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        while True:
            pass
"""
    cfg = make_config(build_timeout_s=5, run_timeout_s=10)
    start = time.monotonic()
    res = verify(task_source("relu"), source, config=cfg)
    assert time.monotonic() - start < 40
    gate = _failed(res)
    assert "timed out" in gate.reason
    assert gate.name == "correctness", "the run got past building: a hang is not a compile failure"
    assert not res.feasible


def test_segfault_in_kernel_is_a_clear_failure(task_source, make_config, kernel_source):
    body = """    volatile float* p = reinterpret_cast<float*>(static_cast<intptr_t>(x.numel() < 0));
    p[0] = 1.0f;
    return torch::empty_like(x);"""
    res = verify(task_source("relu"), kernel_source(body), config=make_config())
    gate = _failed(res)
    assert gate.name == "correctness"
    assert "crashed with SIG" in gate.reason
    assert not res.feasible


def test_allocation_beyond_the_memory_limit_fails(task_source, make_config, kernel_source):
    body = """    auto big = torch::empty({int64_t(1) << 31}, x.options());
    float* b = big.data_ptr<float>();
    for (int64_t i = 0; i < big.numel(); i += 4096) b[i] = 1.0f;
    return torch::empty_like(x);"""
    res = verify(task_source("relu"), kernel_source(body), config=make_config(memory_gb=3))
    gate = _failed(res)
    assert gate.name == "correctness"
    assert "memory" in gate.reason.lower() or "allocate" in gate.reason.lower(), gate.reason


def test_exit_from_the_kernel_is_a_clear_failure(task_source, make_config, kernel_source):
    body = """    std::_Exit(0);
    return x;"""
    res = verify(task_source("relu"), kernel_source(body, prelude=""), config=make_config())
    gate = _failed(res)
    assert gate.name == "correctness"
    assert "without a result" in gate.reason


def test_what_the_kernel_printed_before_it_exited_is_in_the_verdict(task_source, make_config, kernel_source):
    """A process that ends without a report leaves one clue, what it printed last (a CUDA error, an
    allocator abort): kept in the gate's detail, bounded, with the host's paths scrubbed."""
    import os

    here = os.getcwd()
    body = ('    std::cerr << "kernel gave up: out of scratch at ' + here + '/scratch.bin" << std::endl;\n'
            "    std::_Exit(0);\n"
            "    return x;")
    res = verify(task_source("relu"), kernel_source(body), config=make_config())
    gate = _failed(res)
    assert "without a result" in gate.reason
    tail = gate.detail.get("output_tail", "")
    assert "kernel gave up: out of scratch" in tail, gate.detail
    assert here not in tail
    assert len(tail) <= 1503


def test_torch_op_hidden_behind_an_alias_is_caught_at_run_time(task_source, make_config, kernel_source):
    """`act = torch.relu` (the static scan now flags the alias too, so it is switched off here to test the
    run-time check alone): the profiler sees the reference's op (aten::relu dispatches to
    aten::clamp_min on CPU)."""
    source = kernel_source(RELU, forward="return act(_ext.kernel_forward(x))", prelude="act = torch.relu\n")
    res = verify(task_source("relu"), source, config=make_config(static_scan=False, policy="strict"))
    gate = res.gates[0]
    assert gate.status == "fail" and gate.detail["rule"] == "reference-op-at-runtime"
    assert gate.detail["line"] == 0 and "ran inside ModelNew.forward" in gate.reason
    assert any(op in gate.reason for op in ("aten::relu", "aten::clamp_min")), gate.reason
    assert res.outcome == "hack_fail"


def test_no_custom_kernel_is_caught_at_run_time(task_source, make_config):
    source = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return getattr(x, "__mul__")(getattr(x, "__gt__")(0))
"""
    res = verify(task_source("relu"), source, config=make_config())
    gate = res.gates[0]
    assert gate.status == "fail" and gate.detail["rule"] == "no-custom-kernel", gate.reason


def test_custom_kernel_built_but_unused(task_source, make_config, kernel_source):
    source = kernel_source(RELU, forward='return getattr(x, "__mul__")(getattr(x, "__gt__")(0))')
    res = verify(task_source("relu"), source, config=make_config())
    gate = res.gates[0]
    assert gate.status == "fail" and gate.detail["rule"] == "custom-kernel-unused", gate.reason


def test_patching_the_clock_through_a_dunder_is_caught_at_run_time(task_source, make_config, kernel_source):
    source = kernel_source(RELU, prelude="import time\ntime.__setattr__('perf_counter_ns', lambda: 0)\n")
    res = verify(task_source("relu"), source, config=make_config())
    gate = res.gates[0]
    assert gate.status == "fail" and gate.detail["rule"] == "monkey-patch", gate.reason
    assert "time.perf_counter_ns" in gate.reason


def test_operator_arithmetic_beside_a_copy_kernel_is_caught(task_source, make_config, kernel_source):
    copy = RELU.replace("in[i] > 0.0f ? in[i] : 0.0f", "in[i]")
    # operators reached through getattr slip past the static tensor-arithmetic rule: the profiler's work split must not
    source = kernel_source(copy, forward='y = _ext.kernel_forward(x)\n        return getattr(y, "__mul__")(getattr(y, "__gt__")(0))')
    res = verify(task_source("relu"), source, config=make_config(policy="strict"))
    assert res.gates[0].status == "fail", "the copy kernel plus torch arithmetic passed every gate"
    assert res.gates[0].detail["rule"] in ("torch-work-outside-kernel", "copy-kernel")  # both refuse under strict
    assert "aten::" in res.gates[0].reason


def test_cpp_assembled_at_run_time_is_scanned_before_it_runs(task_source, make_config, kernel_source):
    """A string built by concatenation never appears as a literal; the builder reports the real text."""
    body = RELU.replace("return out;", 'SYS' + 'TEM_CALL("true");\n    return out;')
    source = kernel_source(body).replace('CPP = r"""', 'CPP = ("#define SYSTEM_CALL sys" + "tem\\n") + r"""', 1)
    assert "system(" not in source and not [v for v in scan(source) if v.rule == "cpp-escape"]
    res = verify(task_source("relu"), source, config=make_config())
    gate = res.gates[0]
    assert gate.status == "fail" and gate.detail["rule"] == "cpp-escape", res.gates
    assert "built at run time" in gate.reason
