"""`verifier.correctness.compare.compare_tensor`'s rule, run by the trusted side on the device.

Why: a call whose outputs are gigabytes cannot be compared on the host in the time a verification has
(a 6.4 GB ReLU spent ~20 s per trial writing, reading and digesting files). The trusted reference worker
maps the candidate's staged outputs (`shared_device_memory.ImportedBuffer`), recomputes its own for the
same seed, and compares here, block by block so no full-size temporary is made. The arithmetic and the
answers are `compare_tensor`'s (tests hold the two to the same verdicts and figures on the same data):
|got - want| <= atol + rtol * |want| everywhere, NaN only where the reference has NaN, infinities equal;
a degenerate task's atol scaled by the output's spread; the magnitude probe's tolerance relative to the
output's magnitude, after a check that every element finite in the reference is finite in the output.
"""

from __future__ import annotations

from verifier.correctness.bit_digest import equal_bits
from verifier.correctness.compare import MAGNITUDE_ATOL, Comparison, tolerance_for

BLOCK = 1 << 24  # elements per block: 64 MB of float32, a few temporaries of that on the card


def output_spread(torch, want) -> float:
    """Standard deviation of the finite reference values (`compare.output_spread`), in float64, block by
    block (Chan's pairwise combination of counts, means and squared deviations): whole-tensor float64
    temporaries of a 6.4 GB softmax output took 27 GB beside the candidate and ran the card out of memory."""
    flat = want.reshape(-1)
    count, mean, m2 = 0, 0.0, 0.0
    for i in range(0, flat.numel(), BLOCK):
        w = flat[i:i + BLOCK].to(torch.float64)
        w = w[torch.isfinite(w)]
        n = int(w.numel())
        if not n:
            continue
        b_mean = float(w.mean())
        b_m2 = float(((w - b_mean) ** 2).sum())
        total = count + n
        delta = b_mean - mean
        mean += delta * n / total
        m2 += b_m2 + delta * delta * count * n / total
        count = total
    return (m2 / count) ** 0.5 if count else 0.0


def _common(torch, got, want):
    """float32 where the file path compares in float32 (float32, and float16/bfloat16 that files widen to
    float32), else float64: the same arithmetic, so the same figures."""
    narrow = (torch.float32, torch.float16, torch.bfloat16)
    return torch.float32 if got.dtype == want.dtype and got.dtype in narrow else torch.float64


def _finite_max_abs(torch, w) -> float:
    top = 0.0
    flat = w.reshape(-1)
    for i in range(0, flat.numel(), BLOCK):
        b = flat[i:i + BLOCK].abs()
        b = b[torch.isfinite(b)]
        if b.numel():
            top = max(top, float(b.max()))
    return top


def _nonfinite_where_finite(torch, g, w) -> str:
    inf = nan = 0
    gf, wf = g.reshape(-1), w.reshape(-1)
    for i in range(0, gf.numel(), BLOCK):
        gc, wc = gf[i:i + BLOCK], wf[i:i + BLOCK]
        where = torch.isfinite(wc) & ~torch.isfinite(gc)
        n = int(where.sum())
        if n:
            n_nan = int(torch.isnan(gc[where]).sum())
            nan += n_nan
            inf += n - n_nan
    if not inf and not nan:
        return ""
    what = "inf" if not nan else "nan" if not inf else f"inf ({inf}) or nan ({nan})"
    return f"{inf + nan} of {gf.numel()} elements {what} where the reference is finite"


def compare(torch, got, want, got_dtype: str, want_dtype: str, atol: float | None, rtol: float | None, label: str,
            *, spread: float | None = None, magnitude: bool = False) -> Comparison:
    """`compare_tensor` on device tensors (see the module's docstring)."""
    if tuple(got.shape) != tuple(want.shape):
        return Comparison(False, f"{label} has shape {list(got.shape)}, expected {list(want.shape)}")
    if got_dtype != want_dtype:
        return Comparison(False, f"{label} has dtype {got_dtype}, expected {want_dtype}")
    if got.numel() == 0:
        return Comparison(True)
    if not magnitude and spread is None and equal_bits(torch, got, want):  # equal bytes pass any tolerance
        return Comparison(True, max_abs=0.0, max_rel=0.0)
    common = _common(torch, got, want)
    if atol is None or rtol is None:
        preset_atol, preset_rtol = tolerance_for(want_dtype)
        atol = preset_atol if atol is None else atol
        rtol = preset_rtol if rtol is None else rtol
    if spread is not None and spread == spread and abs(spread) != float("inf"):
        atol = min(atol, atol * float(spread))
    if magnitude:
        blown = _nonfinite_where_finite(torch, got, want)
        if blown:
            return Comparison(False, f"{label}: {blown}", float("inf"), float("inf"), f"{label}: {blown}")
        atol = max(atol, MAGNITUDE_ATOL) * max(1.0, _finite_max_abs(torch, want))
    gf, wf = got.reshape(-1), want.reshape(-1)
    max_abs = max_rel = float("-inf")
    any_finite, all_finite = False, True
    bad, first = 0, -1
    for i in range(0, gf.numel(), BLOCK):
        gc, wc = gf[i:i + BLOCK].to(common), wf[i:i + BLOCK].to(common)
        diff = (gc - wc).abs()
        scale = wc.abs()
        close = (diff <= scale * rtol + atol) & torch.isfinite(wc)
        if not bool(close.all()):
            close |= (gc == wc) | (torch.isnan(gc) & torch.isnan(wc))
        finite = torch.isfinite(diff)
        if bool(finite.all()):
            fd, fs = diff, scale
        else:
            all_finite = False
            fd, fs = diff[finite], scale[finite]
        if fd.numel():
            any_finite = True
            max_abs = max(max_abs, float(fd.max()))
            max_rel = max(max_rel, float((fd / fs.clamp_min(1e-12)).max()))
        n_bad = int((~close).sum())
        if n_bad and first < 0:
            first = i + int((~close).nonzero()[0, 0])
        bad += n_bad
    if not any_finite:
        max_abs = max_rel = float("inf")
    if not all_finite and bad:
        max_abs = max_rel = float("inf")
    if not bad:
        return Comparison(True, max_abs=max_abs, max_rel=max_rel)
    idx = _unravel(first, list(want.shape))
    g, w = float(gf[first]), float(wf[first])
    where = f"[{', '.join(map(str, idx))}]" if want.dim() else ""
    mismatch = (f"{label}{where} = {g:.6g}, expected {w:.6g} "
                f"({bad} of {gf.numel()} elements differ beyond atol={atol:g}, rtol={rtol:g})")
    return Comparison(False, f"{label} differs from the reference: max abs error {max_abs:.3g}, max rel error {max_rel:.3g}",
                      max_abs, max_rel, mismatch)


def _unravel(flat: int, shape: list[int]) -> list[int]:
    idx = []
    for s in reversed(shape):
        idx.append(flat % s if s else 0)
        flat = flat // s if s else 0
    return list(reversed(idx))


def digest(torch, t, key: int) -> str:
    """A keyed checksum of `t`'s bytes, dtype and shape, computed on the device (the decoy probe compares a
    trial's outputs with its replay's: equal means the kernel's result never reached the output). Two
    int64 sums, one weighted by position under `key`: outputs that differ anywhere differ here unless
    made to collide, which needs the key the trusted side draws per run."""
    raw = t.contiguous().reshape(-1).view(torch.uint8)
    n = raw.numel()
    pad = (-n) % 8
    if pad:
        raw = torch.cat([raw, torch.zeros(pad, dtype=torch.uint8, device=raw.device)])
    words = raw.view(torch.int64)
    plain = weighted = 0
    mult = (int(key) | 1) & 0x7FFFFFFFFFFF
    for i in range(0, words.numel(), BLOCK):
        w = words[i:i + BLOCK]
        pos = torch.arange(i, i + w.numel(), device=w.device, dtype=torch.int64) * mult + 0x9E3779B9
        plain = (plain + int(w.sum())) & 0xFFFFFFFFFFFFFFFF
        weighted = (weighted + int((w * pos).sum())) & 0xFFFFFFFFFFFFFFFF
    return f"{t.dtype}{list(t.shape)}:{n}:{plain:016x}:{weighted:016x}"
