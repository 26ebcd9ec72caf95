"""The Triton backend without a GPU: every gate but latency runs on the CPU under Triton's interpreter
(`TRITON_INTERPRET=1`), in the same sandbox as on a GPU, so CI exercises the Triton gates, the
anti-hacking rules and the seeds' Triton advice on every push.

Needs the `triton` package (a 286 MB wheel; it runs without a GPU in interpreter mode). Where it is
not installed these tests skip with the install line; where a GPU is visible the Triton backend runs
the real compiler instead and tests/gpu covers it.
"""

from __future__ import annotations

import dataclasses
import importlib.util

import pytest

from tests.verifier.conftest import CANDIDATES


def _gpu_visible() -> bool:
    import torch

    return bool(torch.cuda.is_available())


pytestmark = [
    pytest.mark.slow,  # each test starts a sandbox
    pytest.mark.skipif(importlib.util.find_spec("triton") is None,
                       reason="triton is not installed: pip install triton to run the interpreter tests"),
    pytest.mark.skipif(importlib.util.find_spec("triton") is not None and _gpu_visible(),
                       reason="a GPU is visible: the Triton backend compiles for it (tests/gpu covers that)"),
]

TRITON = CANDIDATES / "triton"
# The interpreter runs every program of a launch in Python, one after another: on the built-in tasks' 2048x4096
# input a softmax_rows trial took 6 s (2048 programs) and a verification launches 8 times (trials, numerics
# probes, the profiled call), 114 s on a loaded 2-core machine. Nothing asserted here depends on the size, so
# the tests verify against each task with its input made 64x4096 (the same Model, tolerance and probes).
FULL_INPUT, SMALL_INPUT = "torch.randn(2048, 4096)", "torch.randn(64, 4096)"


def _small(task_source: str) -> str:
    assert task_source.count(FULL_INPUT) == 1, "the task's input is not 2048x4096 any more: update FULL_INPUT"
    return task_source.replace(FULL_INPUT, SMALL_INPUT)


@pytest.fixture(scope="module")
def config(make_config):
    return make_config(trials=2)


def _verify(task_source, task: str, source: str, config):
    from verifier import verify

    return verify(_small(task_source(task)), source, backend="triton", config=config)


def _failed(res) -> list[tuple[str, str]]:
    return [(g.name, g.reason) for g in res.gates if g.status == "fail"]


def test_backend_says_it_interprets():
    from verifier.backends import get_backend

    be = get_backend("triton")
    assert be.interpreted and be.device == "cpu"
    assert be.child_env() == {"TRITON_INTERPRET": "1"} and be.job_fields() == {"triton_interpret": True}


@pytest.mark.parametrize("task", ["relu", "softmax_rows"])
def test_honest_kernel_is_feasible_under_the_interpreter(task, task_source, config):
    res = _verify(task_source, task, (TRITON / f"{task}.py").read_text(), config)
    assert res.outcome == "feasible", _failed(res)
    assert "interpreted: no latency" in res.notes
    assert res.latency_ms is None and res.gate("latency").status == "skip"
    assert res.gate("compile").status == "pass"
    # Triton builds at a kernel's first launch (in the first trial): the compile gate still lists it
    builds = res.gate("compile").detail["builds"]
    assert builds and {b["layout"] for b in builds} == {"triton-interpret"}, builds
    assert res.gate("correctness").detail["trials"] == 2
    assert res.device.startswith("cpu")


def test_unknown_language_name_fails_the_compile_gate_at_its_line(task_source, config):
    src = (TRITON / "relu.py").read_text()
    bad = src.replace("tl.maximum(x, 0.0)", "tl.maximimum(x, 0.0)")
    line = next(i for i, text in enumerate(bad.splitlines(), 1) if "maximimum" in text)
    res = _verify(task_source, "relu", bad, config)
    assert res.outcome == "compile_fail", _failed(res)
    comp = res.gate("compile")
    assert comp.detail["diagnostics"][0].startswith(f"candidate.py:{line}: error: AttributeError"), comp.detail
    assert "maximimum" in comp.reason


def test_wrong_kernel_fails_correctness(task_source, config):
    src = (TRITON / "relu.py").read_text().replace("tl.maximum(x, 0.0)", "tl.minimum(x, 0.0)")
    res = _verify(task_source, "relu", src, config)
    assert res.outcome == "incorrect", _failed(res)
    assert "differs from the reference" in res.gate("correctness").reason


def test_triton_starter_runs_and_is_caught_as_a_copy(task_source, config):
    """The starter the app writes for a Triton session builds and runs; it copies its input, so
    correctness must reject it until the person writes the real kernel."""
    from core.starter import starter_kernel

    src = starter_kernel("relu", task_source("relu"), "triton")
    res = _verify(task_source, "relu", src, config)
    assert res.gate("compile").status == "pass", _failed(res)
    assert res.outcome == "incorrect", _failed(res)


def test_torch_doing_the_work_is_caught_at_run_time(task_source, config):
    """With the static scan off, the run-time checks alone reject a launch whose output is discarded
    while torch computes the answer."""
    src = (TRITON / "relu.py").read_text().replace("return y", "return torch.relu(x)")
    res = _verify(task_source, "relu", src, dataclasses.replace(config, static_scan=False, policy="strict"))
    assert res.outcome == "hack_fail", _failed(res)
    rules = {v["rule"] for v in res.gates[0].detail.get("violations", [])}
    assert rules & {"reference-op-at-runtime", "torch-work-outside-kernel"}, (rules, res.gates[0].reason)
