"""The device-side comparison (`verifier.correctness.device_compare`) reaches `compare_tensor`'s verdicts
and figures on the same data: run here with CPU tensors, the same code the trusted worker runs on the GPU."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from verifier.correctness import device_compare
from verifier.correctness.compare import compare_tensor, output_spread


def _cases():
    rng = np.random.default_rng(7)
    want = rng.standard_normal((64, 33)).astype(np.float32)
    close = want + 1e-6
    far = want.copy()
    far[5, 7] += 0.5
    nan_ref = want.copy()
    nan_ref[1, 1] = np.nan
    nan_both = nan_ref.copy()
    nan_got = want.copy()
    nan_got[2, 3] = np.nan
    inf_ref = want.copy()
    inf_ref[0, 0] = np.inf
    inf_wrong = inf_ref.copy()
    inf_wrong[0, 0] = -np.inf
    yield "same", want, want.copy(), {}
    yield "close", close, want, {}
    yield "far", far, want, {}
    yield "nan where expected", nan_both, nan_ref, {}
    yield "nan not expected", nan_got, want, {}
    yield "inf equal", inf_ref.copy(), inf_ref, {}
    yield "inf opposite", inf_wrong, inf_ref, {}
    yield "constant for a degenerate task", np.full_like(want, want.mean()), want, {"spread": True}
    yield "close, degenerate", close, want, {"spread": True}
    big = want * 1e4
    yield "magnitude close", big + 1.0, big, {"magnitude": True}
    blown = big.copy()
    blown[3, 3] = np.inf
    yield "magnitude blown", blown, big, {"magnitude": True}
    yield "float64", far.astype(np.float64), want.astype(np.float64), {}
    ints = rng.integers(-5, 5, (10, 10)).astype(np.int64)
    off = ints.copy()
    off[9, 9] += 1
    yield "int64 equal", ints.copy(), ints, {}
    yield "int64 off", off, ints, {}
    yield "0-dim", np.array(1.5, dtype=np.float32), np.array(1.25, dtype=np.float32), {}
    yield "shape", want[:10], want, {}


@pytest.mark.parametrize("block", [1 << 24, 100])
@pytest.mark.parametrize("case", list(_cases()), ids=lambda c: c[0])
def test_device_comparison_agrees_with_the_file_comparison(case, block, monkeypatch):
    _name, got, want, opts = case
    monkeypatch.setattr(device_compare, "BLOCK", block)
    dtype = str(want.dtype)
    spread = output_spread(want) if opts.get("spread") else None
    on_host = compare_tensor(got, want, dtype, dtype, 1e-4, 1e-4, "output 0", spread=spread,
                             magnitude=bool(opts.get("magnitude")))
    t_spread = device_compare.output_spread(torch, torch.from_numpy(want)) if opts.get("spread") else None
    if spread is not None:
        assert t_spread == pytest.approx(spread, rel=1e-9)
    on_device = device_compare.compare(torch, torch.from_numpy(np.array(got, copy=True)),
                                       torch.from_numpy(np.array(want, copy=True)), dtype, dtype, 1e-4, 1e-4,
                                       "output 0", spread=t_spread, magnitude=bool(opts.get("magnitude")))
    assert on_device.ok == on_host.ok
    assert on_device.reason == on_host.reason
    assert on_device.mismatch == on_host.mismatch
    for a, b in ((on_device.max_abs, on_host.max_abs), (on_device.max_rel, on_host.max_rel)):
        assert (math.isinf(a) and math.isinf(b)) or a == pytest.approx(b, rel=1e-6, abs=1e-12)


def test_bfloat16_is_compared_as_the_files_widen_it():
    want = torch.randn(300, 7).to(torch.bfloat16)
    got = (want.float() + 0.02).to(torch.bfloat16)
    host = compare_tensor(got.float().numpy(), want.float().numpy(), "bfloat16", "bfloat16", None, None, "out")
    dev = device_compare.compare(torch, got, want, "bfloat16", "bfloat16", None, None, "out")
    assert (dev.ok, dev.reason) == (host.ok, host.reason)
    assert dev.max_abs == pytest.approx(host.max_abs)


def test_digest_sees_any_changed_byte_and_depends_on_the_key():
    t = torch.randn(1001)
    base = device_compare.digest(torch, t, key=12345)
    assert device_compare.digest(torch, t.clone(), key=12345) == base
    for i in (0, 500, 1000):
        u = t.clone()
        u[i] = torch.nextafter(u[i], torch.tensor(math.inf))
        assert device_compare.digest(torch, u, key=12345) != base
    swapped = t.clone()
    swapped[[3, 4]] = t[[4, 3]]
    assert device_compare.digest(torch, swapped, key=12345) != base  # the same sum, another order
    assert device_compare.digest(torch, t, key=999) != base
    assert device_compare.digest(torch, t.view(torch.int32), key=12345) != base  # the dtype is part of it


def test_the_flush_size_is_the_trusted_sides_choice(monkeypatch):
    """`l2_flush_mb` (or the person's EVOKERNEL_L2_FLUSH_MB) sets the flush both processes allocate; a bad
    value is the default, never an error."""
    from verifier.clock import paired_calls
    from verifier.config import VerifyConfig

    monkeypatch.delenv("EVOKERNEL_L2_FLUSH_MB", raising=False)
    assert paired_calls.flush_bytes_of(VerifyConfig()) is None
    assert paired_calls.flush_bytes_of(VerifyConfig(l2_flush_mb=128)) == 128 * 1024**2
    monkeypatch.setenv("EVOKERNEL_L2_FLUSH_MB", "96")
    assert paired_calls.flush_bytes_of(VerifyConfig()) == 96 * 1024**2
    monkeypatch.setenv("EVOKERNEL_L2_FLUSH_MB", "lots")
    assert paired_calls.flush_bytes_of(VerifyConfig()) is None
    saved = dict(paired_calls._CUDA)
    try:
        paired_calls._CUDA["flush"] = object()
        paired_calls.set_flush_bytes(64 * 1024**2)
        assert paired_calls._CUDA["flush_bytes"] == 64 * 1024**2 and "flush" not in paired_calls._CUDA
        paired_calls.set_flush_bytes(10)  # never below a MiB
        assert paired_calls._CUDA["flush_bytes"] == 1 << 20
    finally:
        paired_calls._CUDA.clear()
        paired_calls._CUDA.update(saved)
