"""Pure comparisons of candidate outputs with the reference's, run in the parent on plain arrays."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass
class Comparison:
    ok: bool
    reason: str = ""
    max_abs: float = 0.0
    max_rel: float = 0.0
    mismatch: str = ""


#: named tolerance rules: "kernelbench" is KernelBench's current precision-aware rule, "v0"/"paper" the
#: 1e-2 rule of the original KernelBench and of the EvoKernel paper
TOLERANCE_PRESETS = ("kernelbench", "v0", "paper")
_LOW_PRECISION = {"float16", "bfloat16", "half", "torch.float16", "torch.bfloat16", "f16", "bf16"}


def tolerance_for(dtype: str, preset: str = "kernelbench") -> tuple[float, float]:
    """(atol, rtol) for outputs of `dtype` under a named preset.

    kernelbench: fp32 (and anything else) 1e-4, fp16/bf16 1e-2; v0 and paper: 1e-2 for every dtype.
    """
    name = str(dtype).lower()
    if preset in ("v0", "paper"):
        return 1e-2, 1e-2
    if preset != "kernelbench":
        raise ValueError(f"unknown tolerance preset {preset!r}; use one of {', '.join(TOLERANCE_PRESETS)}")
    return (1e-2, 1e-2) if name in _LOW_PRECISION else (1e-4, 1e-4)


MAGNITUDE_ATOL = 1e-2  # the large-magnitude probe's absolute tolerance, relative to the output's magnitude


def compare_tensor(got: np.ndarray, want: np.ndarray, got_dtype: str, want_dtype: str, atol: float | None,
                   rtol: float | None, label: str, *, spread: float | None = None,
                   magnitude: bool = False) -> Comparison:
    """Shape, dtype, then |got - want| <= atol + rtol * |want| everywhere (NaN only where the reference has NaN).

    atol/rtol None: KernelBench's precision-aware rule for `want_dtype` (`tolerance_for`). `spread`, for
    degenerate tasks (see `degenerate_answers`): the absolute tolerance shrinks to `atol * spread`, so an
    answer must be right relative to how much the output varies, and a constant or all-zeros cannot pass.

    `magnitude`, for the large-magnitude probe (`verifier.correctness.probes`): the tolerance is relative to the
    reference output's magnitude, M = max |want| over its finite elements:

        |got - want| <= max(atol, MAGNITUDE_ATOL) * max(1, M) + rtol * |want|

    so float rounding that grows with the values (a sum of large terms, cancellation near zero) is
    allowed. MAGNITUDE_ATOL (1e-2) is looser than the task's own tolerance on purpose: at x10000 an
    honest LSTM cell's cancelling GEMM terms differ from torch's by 1.2e-4 of M (found by the suite),
    and what this probe is for — overflow, non-finite values, a formula wrong at large values — is
    far beyond 1% of the output's scale. Before that, every
    element where `want` is finite must be finite in `got`: the failure says how many are not
    (`4096 of 8388608 elements inf where the reference is finite`).
    """
    if tuple(got.shape) != tuple(want.shape):
        return Comparison(False, f"{label} has shape {list(got.shape)}, expected {list(want.shape)}")
    if got_dtype != want_dtype:
        return Comparison(False, f"{label} has dtype {got_dtype}, expected {want_dtype}")
    if got.size == 0:
        return Comparison(True)
    if not magnitude and spread is None and got.dtype == want.dtype and _same_bits(got, want):
        return Comparison(True, max_abs=0.0, max_rel=0.0)  # bit for bit the reference's: close whatever the tolerance
    common = np.float32 if got.dtype == want.dtype == np.float32 else np.float64
    # 0-dim outputs (a loss) become 1-element arrays: numpy turns 0-dim arithmetic into scalars
    g = np.atleast_1d(np.asarray(got).astype(common, copy=False))
    w = np.atleast_1d(np.asarray(want).astype(common, copy=False))
    if atol is None or rtol is None:
        preset_atol, preset_rtol = tolerance_for(want_dtype)
        atol = preset_atol if atol is None else atol
        rtol = preset_rtol if rtol is None else rtol
    if spread is not None and np.isfinite(spread):
        atol = min(atol, atol * float(spread))
    if magnitude:
        blown = _nonfinite_where_finite(g, w)
        if blown:
            return Comparison(False, f"{label}: {blown}", float("inf"), float("inf"), f"{label}: {blown}")
        atol = max(atol, MAGNITUDE_ATOL) * max(1.0, _finite_max_abs(w))
    if g.size > CHUNK:
        quick = _within_chunked(g, w, float(atol), float(rtol))
        if quick is not None:  # everything close: the same figures as below, without full-size temporaries
            return Comparison(True, max_abs=quick[0], max_rel=quick[1])
        # a mismatch (the decoy's garbled probe is one by design): described block by block too. Before, a
        # 256 MB output took ~2 GB of the parent's memory here (a dozen temporaries and `argwhere` of
        # every differing element's index, 16 bytes each); the figures are the same
        max_abs, max_rel, bad, first = _mismatch_chunked(g, w, float(atol), float(rtol))
        idx = tuple(int(i) for i in np.unravel_index(first, g.shape))
        return _mismatch(label, g, w, idx, bad, g.size, max_abs, max_rel, atol, rtol, np.ndim(want))
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
    return _mismatch(label, g, w, idx, bad, close.size, max_abs, max_rel, atol, rtol, np.ndim(want))


def _mismatch(label: str, g: np.ndarray, w: np.ndarray, idx: tuple, bad: int, size: int, max_abs: float,
              max_rel: float, atol: float, rtol: float, ndim: int) -> Comparison:
    where = f"[{', '.join(map(str, idx))}]" if ndim else ""
    mismatch = (f"{label}{where} = {g[idx]:.6g}, expected {w[idx]:.6g} "
                f"({bad} of {size} elements differ beyond atol={atol:g}, rtol={rtol:g})")
    return Comparison(False, f"{label} differs from the reference: max abs error {max_abs:.3g}, max rel error {max_rel:.3g}",
                      max_abs, max_rel, mismatch)


def _mismatch_chunked(g: np.ndarray, w: np.ndarray, atol: float, rtol: float) -> tuple[float, float, int, int]:
    """`compare_tensor`'s full test over cache-sized blocks, for outputs that are not all close: (max_abs,
    max_rel, elements not close, flat index of the first). The same arithmetic as the whole-array path:
    the maxima over finite differences (inf when none is finite, or when any is not finite), NaN close only
    where the reference has NaN, infinities only where they match exactly."""
    gf, wf = g.reshape(-1), w.reshape(-1)
    max_abs = max_rel = -np.inf
    any_finite, all_finite = False, True
    bad, first = 0, -1
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        for i in range(0, gf.size, CHUNK):
            gc, wc = gf[i:i + CHUNK], wf[i:i + CHUNK]
            diff = np.subtract(gc, wc)
            np.abs(diff, out=diff)
            scale = np.abs(wc)
            close = (diff <= scale * rtol + atol) & np.isfinite(wc)
            close |= (gc == wc) | (np.isnan(gc) & np.isnan(wc))
            if not close.all():
                n = int(close.size - np.count_nonzero(close))
                if first < 0:
                    first = i + int(np.argmin(close))
                bad += n
            finite = np.isfinite(diff)
            if not finite.all():
                all_finite = False
            if finite.any():
                any_finite = True
                max_abs = max(max_abs, float(diff[finite].max()))
                np.maximum(scale, 1e-12, out=scale)
                np.divide(diff, scale, out=diff)
                max_rel = max(max_rel, float(diff[finite].max()))
    if not any_finite or not all_finite:
        return float("inf"), float("inf"), bad, max(first, 0)
    return max_abs, max_rel, bad, max(first, 0)


def _finite_max_abs(w: np.ndarray) -> float:
    """max |w| over the finite elements (0.0 when there are none), block by block."""
    top = 0.0
    flat = w.reshape(-1)
    with np.errstate(invalid="ignore", over="ignore"):
        for i in range(0, flat.size, CHUNK):
            block = np.abs(flat[i:i + CHUNK])
            block = block[np.isfinite(block)]
            if block.size:
                top = max(top, float(block.max()))
    return top


def _nonfinite_where_finite(g: np.ndarray, w: np.ndarray) -> str:
    """`4096 of 8388608 elements inf where the reference is finite` ("" when there are none)."""
    gf, wf = g.reshape(-1), w.reshape(-1)
    inf = nan = 0
    for i in range(0, gf.size, CHUNK):
        gc, wc = gf[i:i + CHUNK], wf[i:i + CHUNK]
        where = np.isfinite(wc) & ~np.isfinite(gc)
        if where.any():
            n_nan = int(np.isnan(gc[where]).sum())
            nan += n_nan
            inf += int(where.sum()) - n_nan
    if not inf and not nan:
        return ""
    what = "inf" if not nan else "nan" if not inf else f"inf ({inf}) or nan ({nan})"
    return f"{inf + nan} of {gf.size} elements {what} where the reference is finite"


def _same_bits(got: np.ndarray, want: np.ndarray) -> bool:
    """Whether two arrays hold the same bytes: one pass, where the tolerance test takes a dozen (every
    timed call of a round is compared in full, and an elementwise kernel often matches torch bit for
    bit). Equal bits pass any tolerance, NaN and infinities included, as they stand where the
    reference has them."""
    if got.nbytes != want.nbytes:
        return False
    a, b = np.ascontiguousarray(got), np.ascontiguousarray(want)
    if _MEMCMP is not None:
        return _MEMCMP(a.ctypes.data, b.ctypes.data, a.nbytes) == 0  # in place: no copies of a big output
    return a.tobytes() == b.tobytes()


def _libc_memcmp():
    import ctypes

    try:
        fn = ctypes.CDLL(None).memcmp
    except (OSError, AttributeError):
        return None
    fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t], ctypes.c_int
    return fn


_MEMCMP = _libc_memcmp()


CHUNK = 1 << 18  # elements per block of `_within_chunked` (1 MB of float32: stays in the cache)


def _within_chunked(g: np.ndarray, w: np.ndarray, atol: float, rtol: float) -> tuple[float, float] | None:
    """`compare_tensor`'s test block by block: (max_abs, max_rel) when every element is close, else None
    (the caller then recomputes everything on the whole arrays to describe the mismatch). Same
    arithmetic in the same dtype, so the same answer and figures; a big output costs a few passes over
    cache-sized blocks instead of a dozen full-size temporaries."""
    gf, wf = g.reshape(-1), w.reshape(-1)
    max_abs = max_rel = -np.inf
    any_finite = False
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        for i in range(0, gf.size, CHUNK):
            gc, wc = gf[i:i + CHUNK], wf[i:i + CHUNK]
            diff = np.subtract(gc, wc)
            np.abs(diff, out=diff)
            scale = np.abs(wc)
            close = (diff <= scale * rtol + atol) & np.isfinite(wc)
            if not close.all():
                close |= (gc == wc) | (np.isnan(gc) & np.isnan(wc))
                if not close.all():
                    return None
            finite = np.isfinite(diff)
            if finite.all():
                any_finite = True
                max_abs = max(max_abs, float(diff.max()))
                np.maximum(scale, 1e-12, out=scale)
                np.divide(diff, scale, out=diff)
                max_rel = max(max_rel, float(diff.max()))
            elif finite.any():
                any_finite = True
                max_abs = max(max_abs, float(diff[finite].max()))
                np.maximum(scale, 1e-12, out=scale)
                np.divide(diff, scale, out=diff)
                max_rel = max(max_rel, float(diff[finite].max()))
    if not any_finite:
        return float("inf"), float("inf")
    return max_abs, max_rel


def median_and_spread(times_ms: list[float]) -> tuple[float, float]:
    """Median and interquartile range: robust to the odd slow run on a shared machine."""
    arr = np.asarray(times_ms, dtype=np.float64)
    q1, med, q3 = np.percentile(arr, [25, 50, 75])
    return float(med), float(q3 - q1)


def output_spread(want: np.ndarray) -> float:
    """Standard deviation of the finite reference values: the scale a degenerate task is judged on."""
    w = np.asarray(want, dtype=np.float64).ravel()
    w = w[np.isfinite(w)]
    return float(w.std()) if w.size else 0.0


def _passes_everywhere(answers: Sequence[Sequence[np.ndarray]], trials: Sequence[Sequence[np.ndarray]],
                       dtypes: Sequence[str], atol: float | None, rtol: float | None) -> bool:
    for answer, trial in zip(answers, trials, strict=True):
        for got, want, dtype in zip(answer, trial, dtypes, strict=True):
            if np.asarray(want).size == 0 or not compare_tensor(got, want, dtype, dtype, atol, rtol, "out").ok:
                return False
    return True


PASS_THROUGH = "passed through"  # the label's ending for an output that is one of the call's inputs


def is_pass_through(label: str) -> bool:
    """Whether a `degenerate_answers` label is an input handed back as the output (`input 0 passed through`)."""
    return label.startswith("input ") and label.endswith(PASS_THROUGH)


def pass_throughs(trials: Sequence[Sequence[np.ndarray]], inputs: Sequence[Sequence[np.ndarray]],
                  dtypes: Sequence[str] | None = None, *, atol: float | None = None,
                  rtol: float | None = None) -> list[str]:
    """Inputs that, handed back unchanged as an output of the same shape, pass for these reference outputs
    (`trials[t]` computed from `inputs[t]`): ReLU on inputs drawn in [0, 1) is the identity, so a copy of
    the input is right there. Labels: `input 0 passed through`."""
    trials = [[np.asarray(o) for o in t] for t in trials]
    inputs = [[np.asarray(a) for a in t] for t in inputs]
    if not trials or not trials[0] or len(inputs) != len(trials):
        return []
    dtypes = list(dtypes) if dtypes is not None else [str(o.dtype) for o in trials[0]]
    found = []
    for i, first in enumerate(inputs[0]):
        if first.dtype.kind not in "fiub" or not all(len(t) > i for t in inputs):
            continue
        answers = []
        for outs, ins in zip(trials, inputs, strict=True):
            if any(o.shape != ins[i].shape for o in outs):
                break
            answers.append([ins[i].astype(o.dtype, copy=False) for o in outs])
        else:
            if _passes_everywhere(answers, trials, dtypes, atol, rtol):
                found.append(f"input {i} {PASS_THROUGH}")
    return found


def degenerate_answers(trials: Sequence[Sequence[np.ndarray]], dtypes: Sequence[str] | None = None, *,
                       atol: float | None = None, rtol: float | None = None,
                       reweighted: Sequence[np.ndarray] | None = None,
                       inputs: Sequence[Sequence[np.ndarray]] | None = None) -> list[str]:
    """Trivial answers that would pass the ordinary comparison for these reference outputs.

    `trials`: for each trial (different inputs), the reference's outputs. `reweighted`: the outputs of
    trial 0's inputs with the model's weights drawn from another seed, if measured. The checks are the
    ones used to filter KernelBench (robust-kbench, METR): all zeros, one constant (the mean), the mean
    broadcast along an axis, the outputs of other inputs, the outputs with other weights, and (given the
    trials' `inputs`) an input passed through unchanged. An empty list means the task is not degenerate.
    """
    trials = [[np.asarray(o) for o in t] for t in trials]
    if not trials or not trials[0]:
        return []
    dtypes = list(dtypes) if dtypes is not None else [str(o.dtype) for o in trials[0]]
    found: list[str] = []

    def check(label: str, make) -> None:
        if _passes_everywhere([[make(o) for o in t] for t in trials], trials, dtypes, atol, rtol):
            found.append(label)

    check("zeros", np.zeros_like)
    if any(o.size > 1 for o in trials[0]):  # a single number is its own constant and its own mean
        _constant_checks(trials, check)
    if len(trials) > 1 and _passes_everywhere([trials[0]] * (len(trials) - 1), trials[1:], dtypes, atol, rtol):
        found.append("outputs that ignore the inputs")
    if reweighted is not None and _passes_everywhere([list(reweighted)], [trials[0]], dtypes, atol, rtol):
        found.append("outputs that ignore the weights")
    if inputs is not None:
        found += pass_throughs(trials, inputs, dtypes, atol=atol, rtol=rtol)
    return found


def _constant_checks(trials: Sequence[Sequence[np.ndarray]], check) -> None:
    """One constant (the mean) everywhere, and the mean along each axis broadcast back."""
    with np.errstate(invalid="ignore", over="ignore"):
        check("a constant", lambda o: np.full_like(o, np.nanmean(o.astype(np.float64)) if o.size else 0))
        ndim = max(o.ndim for o in trials[0])
        for axis in range(ndim):
            if all(o.ndim > axis and o.shape[axis] > 1 for o in trials[0]):
                check(f"the mean over axis {axis}", lambda o, a=axis: np.broadcast_to(
                    np.nanmean(o.astype(np.float64), axis=a, keepdims=True), o.shape).astype(o.dtype))


def describe_degenerate(found: Sequence[str]) -> str:
    """`degenerate: zeros pass, a constant passes`; empty when nothing trivial passes."""
    if not found:
        return ""
    def said(f: str) -> str:
        if is_pass_through(f):
            return f"a copy of {f.removesuffix(' ' + PASS_THROUGH)} passes"
        return f"{f} {'passes' if f.startswith('a ') or f.startswith('the ') else 'pass'}"

    return "degenerate: " + ", ".join(said(f) for f in found)


def resolve_tolerance(preset: str = "kernelbench", atol: float | None = None,
                      rtol: float | None = None) -> tuple[float | None, float | None]:
    """What to put in VerifyConfig.atol/rtol for a preset: None keeps the precision-aware rule (resolved per
    output dtype by `compare_tensor`); explicit --atol/--rtol win over the preset."""
    if preset not in TOLERANCE_PRESETS:
        raise ValueError(f"unknown tolerance preset {preset!r}; use one of {', '.join(TOLERANCE_PRESETS)}")
    base = (None, None) if preset == "kernelbench" else tolerance_for("float32", preset)
    return (base[0] if atol is None else atol), (base[1] if rtol is None else rtol)


def describe_tolerance(atol: float | None, rtol: float | None, preset: str | None = None) -> str:
    """`kernelbench: fp32 atol=rtol=1e-4, fp16/bf16 1e-2`, `v0: atol=rtol=1e-2`, `atol=0.001, rtol=0.01`."""
    if atol is None and rtol is None:
        return "kernelbench: fp32 atol=rtol=1e-4, fp16/bf16 1e-2"
    if atol is None or rtol is None:
        fixed = f"atol={atol:g}" if atol is not None else f"rtol={rtol:g}"
        return f"{fixed}, otherwise kernelbench (fp32 1e-4, fp16/bf16 1e-2)"
    text = f"atol=rtol={atol:g}" if atol == rtol else f"atol={atol:g}, rtol={rtol:g}"
    return f"{preset}: {text}" if preset and preset != "kernelbench" and (atol, rtol) == (1e-2, 1e-2) else text
