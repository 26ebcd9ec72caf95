"""Pure comparisons of candidate outputs with the reference's, run in the parent on plain arrays."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Comparison:
    ok: bool
    reason: str = ""
    max_abs: float = 0.0
    max_rel: float = 0.0
    mismatch: str = ""


def compare_tensor(got: np.ndarray, want: np.ndarray, got_dtype: str, want_dtype: str, atol: float, rtol: float,
                   label: str) -> Comparison:
    """Shape, dtype, then |got - want| <= atol + rtol * |want| everywhere (NaN only where the reference has NaN)."""
    if tuple(got.shape) != tuple(want.shape):
        return Comparison(False, f"{label} has shape {list(got.shape)}, expected {list(want.shape)}")
    if got_dtype != want_dtype:
        return Comparison(False, f"{label} has dtype {got_dtype}, expected {want_dtype}")
    if got.size == 0:
        return Comparison(True)
    common = np.float32 if got.dtype == want.dtype == np.float32 else np.float64
    g = got.astype(common, copy=False)
    w = want.astype(common, copy=False)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        diff = np.subtract(g, w)
        np.abs(diff, out=diff)
        scale = np.abs(w)
        close = (diff <= scale * rtol + atol) & np.isfinite(w)
        if not close.all():
            close |= (g == w) | (np.isnan(g) & np.isnan(w))  # infinities must match exactly; NaN only where expected
        finite = np.isfinite(diff)
        all_finite = bool(finite.all())
        max_abs = float(diff.max() if all_finite else (diff[finite].max() if finite.any() else np.inf))
        np.maximum(scale, 1e-12, out=scale)
        np.divide(diff, scale, out=diff)
        max_rel = float(diff.max() if all_finite else (diff[finite].max() if finite.any() else np.inf))
    if not all_finite and not close.all():
        max_abs = max_rel = float("inf")
    if close.all():
        return Comparison(True, max_abs=max_abs, max_rel=max_rel)
    idx = tuple(int(i) for i in np.argwhere(~close)[0])
    bad = int((~close).sum())
    mismatch = (f"{label}[{', '.join(map(str, idx))}] = {g[idx]:.6g}, expected {w[idx]:.6g} "
                f"({bad} of {close.size} elements differ beyond atol={atol:g}, rtol={rtol:g})")
    return Comparison(False, f"{label} differs from the reference: max abs error {max_abs:.3g}, max rel error {max_rel:.3g}",
                      max_abs, max_rel, mismatch)


def inputs_unchanged(got: np.ndarray, want: np.ndarray) -> bool:
    """Inputs after the candidate's call must equal the inputs after the reference's call, bit for bit."""
    return got.shape == want.shape and bool(np.array_equal(got, want, equal_nan=True))


def median_and_spread(times_ms: list[float]) -> tuple[float, float]:
    """Median and interquartile range: robust to the odd slow run on a shared machine."""
    arr = np.asarray(times_ms, dtype=np.float64)
    q1, med, q3 = np.percentile(arr, [25, 50, 75])
    return float(med), float(q3 - q1)
