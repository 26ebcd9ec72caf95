"""Paired re-timing of two kernels (`evokernel compare`, the app's "compare two")."""

from __future__ import annotations

import pytest

from core.verifying import describe_comparison
from verifier.api import compare

pytestmark = [pytest.mark.slow, pytest.mark.alone]  # alone: it times things (tests/conftest.py)


def test_two_honest_kernels_get_a_paired_ratio_with_an_interval(task_source, make_config, kernel_source):
    from tests.verifier.conftest import RELU_BODY

    # two kernels of the same cost (the same loop, different sources): the paired ratio's median and the ratio
    # of the medians are then both near 1 and must agree. Against the honest OpenMP relu (15-25x faster), B's
    # per-round figure was a few hundred µs inside the subtraction's noise and the two read 25.3 and 14.7 once
    # in CI, a statistic of a near-zero denominator rather than a fault of the comparison
    a = kernel_source(RELU_BODY + "\n// compare A")
    b = kernel_source(RELU_BODY + "\n// compare B")
    told: list[tuple[str, str]] = []
    out = compare(task_source("relu"), a, b, config=make_config(timing="full"),
                  on_gate=lambda gate, state, progress=None: progress and told.append((gate, progress.text)))
    assert "error" not in out, out
    # issue 34: a comparison says what it is doing (two builds, two checks, the paired rounds), kernel by kernel
    texts = [text for _gate, text in told]
    assert "kernel A: building the kernel" in texts and "kernel B: building the kernel" in texts
    assert any(t.startswith("kernel A: trial") for t in texts) and any(t.startswith("kernel B: trial") for t in texts)
    assert any(t.startswith("A and B: timing round") for t in texts), texts
    assert texts.index("kernel B: building the kernel") > texts.index("kernel A: building the kernel")
    assert out["a_ms"] > 0 and out["b_ms"] > 0
    assert out["lo"] <= out["speedup"] <= out["hi"]
    assert out["speedup"] == pytest.approx(out["a_ms"] / out["b_ms"], rel=0.25)
    assert out["rounds"] >= make_config(timing="full").min_rounds and out["sampled_checks"] >= out["rounds"]
    line = describe_comparison(out, "v1", "v2")
    assert line.startswith("v2 vs v1: ") and "paired" in line


def test_a_wrong_kernel_is_not_compared(task_source, make_config, kernel_source):
    from tests.verifier.conftest import RELU_BODY

    a = kernel_source(RELU_BODY + "\n// compare A2")
    b = kernel_source(RELU_BODY.replace("in[i] : 0.0f", "in[i] : 1.0f") + "\n// compare wrong")
    out = compare(task_source("relu"), a, b, config=make_config())
    assert out["error"].startswith("kernel B is not correct")
    assert describe_comparison(out).startswith("no comparison: kernel B is not correct")
