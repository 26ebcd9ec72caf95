"""Tolerance presets, scalar (0-dim) outputs, degenerate-task detection and the scale-aware comparison."""

from __future__ import annotations

import numpy as np
import pytest

from verifier.correctness.compare import (
    compare_tensor,
    degenerate_answers,
    describe_degenerate,
    output_spread,
    tolerance_for,
)


def test_tolerance_presets():
    assert tolerance_for("float32") == (1e-4, 1e-4)
    assert tolerance_for("float16") == tolerance_for("bfloat16") == (1e-2, 1e-2)
    assert tolerance_for("float32", "v0") == tolerance_for("float32", "paper") == (1e-2, 1e-2)
    with pytest.raises(ValueError, match="unknown tolerance preset 'loose'"):
        tolerance_for("float32", "loose")


def test_default_tolerance_is_precision_aware():
    want = np.linspace(-1, 1, 64, dtype=np.float32)
    off = want + np.float32(1e-3)
    assert not compare_tensor(off, want, "float32", "float32", None, None, "out").ok   # fp32: 1e-4
    assert compare_tensor(off, want, "float16", "float16", None, None, "out").ok       # fp16: 1e-2
    assert compare_tensor(off, want, "float32", "float32", 1e-2, 1e-2, "out").ok       # v0 / paper
    # at 1e-2 a ReLU that outputs 0.001 for negatives passes; at KernelBench's fp32 rule it does not
    x = np.random.default_rng(0).standard_normal(1000).astype(np.float32)
    relu, leaky = np.maximum(x, 0), np.where(x > 0, x, np.float32(0.001))
    assert compare_tensor(leaky, relu, "float32", "float32", 1e-2, 1e-2, "out").ok
    res = compare_tensor(leaky, relu, "float32", "float32", None, None, "out")
    assert not res.ok and "atol=0.0001" in res.mismatch


def test_scalar_outputs_compare():
    loss = np.array(0.25, dtype=np.float32)
    assert compare_tensor(loss.copy(), loss, "float32", "float32", None, None, "loss").ok
    bad = compare_tensor(np.array(0.3, dtype=np.float32), loss, "float32", "float32", None, None, "loss")
    assert not bad.ok and bad.mismatch.startswith("loss = 0.3, expected 0.25")
    shape = compare_tensor(np.array([0.25], dtype=np.float32), loss, "float32", "float32", None, None, "loss")
    assert not shape.ok and "shape [1], expected []" in shape.reason
    assert compare_tensor(np.array(3, dtype=np.int64), np.array(3, dtype=np.int64), "int64", "int64", None, None,
                          "n").ok


def _softmax(x, t):
    z = x / t
    e = np.exp(z - z.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)).astype(np.float32)


def test_degenerate_detection():
    rng = np.random.default_rng(1)
    flat = [[_softmax(rng.standard_normal((8, 4096)), 4.0)] for _ in range(3)]
    found = degenerate_answers(flat, atol=1e-2, rtol=1e-2)
    assert {"zeros", "a constant", "outputs that ignore the inputs"} <= set(found)
    assert describe_degenerate(found).startswith("degenerate: zeros pass, a constant passes")
    peaked = [[_softmax(rng.standard_normal((8, 256)), 0.2)] for _ in range(3)]
    assert degenerate_answers(peaked, atol=1e-2, rtol=1e-2) == []
    # a row mean broadcast back passes when rows are nearly constant; nothing else does
    rows = [[(rng.standard_normal((16, 1)) + 1e-4 * rng.standard_normal((16, 64))).astype(np.float32)] for _ in range(2)]
    assert degenerate_answers(rows, atol=1e-2, rtol=1e-2) == ["the mean over axis 1"]
    # a loss near a fixed value for every input: zeros do not pass, an input-independent answer does
    losses = [[np.array(2.0 + 1e-3 * rng.standard_normal(), dtype=np.float32)] for _ in range(3)]
    assert degenerate_answers(losses, atol=1e-2, rtol=1e-2) == ["outputs that ignore the inputs"]
    assert degenerate_answers(losses) == []                                   # not at fp32's 1e-4
    weights = [rng.standard_normal((4, 4)).astype(np.float32)]
    assert "outputs that ignore the weights" in degenerate_answers([[weights[0]]], reweighted=[weights[0] + 1e-6])
    assert describe_degenerate([]) == ""


def test_scale_aware_comparison_refuses_a_constant_but_not_an_honest_answer():
    rng = np.random.default_rng(2)
    want = _softmax(rng.standard_normal((8, 4096)), 4.0)
    spread = output_spread(want)
    constant = np.full_like(want, want.mean())
    zeros = np.zeros_like(want)
    honest = (want * (1 + 1e-6 * rng.standard_normal(want.shape))).astype(np.float32)
    for wrong in (constant, zeros):
        assert compare_tensor(wrong, want, "float32", "float32", 1e-2, 1e-2, "out").ok  # the plain rule is fooled
        assert not compare_tensor(wrong, want, "float32", "float32", 1e-2, 1e-2, "out", spread=spread).ok
    assert compare_tensor(honest, want, "float32", "float32", 1e-2, 1e-2, "out", spread=spread).ok
    assert compare_tensor(honest, want, "float32", "float32", None, None, "out", spread=spread).ok
