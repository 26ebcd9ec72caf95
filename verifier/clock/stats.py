"""Statistics for paired, interleaved timing: a speedup with a 95% interval, and when to call it noisy.

The reference and the candidate are timed in alternating short rounds inside one window; round i gives
one time per side (for example the median of a short burst). Rounds are paired, since both sides of a
round share whatever the machine was doing then, so the bootstrap resamples *round indices* and takes
both sides of each chosen round together. The speedup is the ratio of medians (reference / candidate:
above 1 means the candidate is faster) with a percentile-bootstrap interval.

Pure and deterministic for a given seed: no timing happens here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Any

import numpy as np

MIN_ROUNDS = 5  # fewer rounds than this give no usable interval: the estimate is always "noisy"
CONFIDENCE = 0.95


@dataclass(frozen=True)
class PairedEstimate:
    ref_ms: float  # median reference time over the rounds
    cand_ms: float  # median candidate time over the rounds
    speedup: float  # ref_ms / cand_ms: above 1 means the candidate is faster
    lo: float  # lower end of the 95% interval of the speedup
    hi: float  # upper end
    rounds: int
    ref_iqr_ms: float  # spread of the reference rounds (interquartile range)
    cand_iqr_ms: float
    halfwidth: float  # relative half-width of the interval: max(hi - s, s - lo) / s
    noisy: bool  # interval wider than the threshold, or too few rounds to tell
    confidence: float = CONFIDENCE
    n_boot: int = 0

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> PairedEstimate:
        """Inverse of to_dict; unknown keys are ignored, missing or non-numeric ones are a ValueError."""
        if not isinstance(data, dict):
            raise ValueError("a paired estimate must be a JSON object: re-measure the kernel")
        kwargs: dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in data:
                if f.default is not MISSING:
                    continue
                raise ValueError(f"paired estimate is missing {f.name!r}: re-measure the kernel")
            value = data[f.name]
            try:
                if f.name == "noisy":
                    if not isinstance(value, bool):
                        raise TypeError
                    kwargs[f.name] = value
                elif f.name in ("rounds", "n_boot"):
                    if isinstance(value, bool) or int(value) != value:
                        raise TypeError
                    kwargs[f.name] = int(value)
                else:
                    if isinstance(value, bool):
                        raise TypeError
                    kwargs[f.name] = float(value)
            except (TypeError, ValueError):
                raise ValueError(f"paired estimate field {f.name!r} is not valid ({value!r}): re-measure the "
                                 "kernel") from None
        return cls(**kwargs)

    def describe(self) -> str:
        """'1.84x [1.71-1.97], 20 rounds' (+ ', noisy')."""
        text = f"{self.speedup:.2f}x [{self.lo:.2f}-{self.hi:.2f}], {self.rounds} rounds"
        return text + (", noisy" if self.noisy else "")


def _as_rounds(values: Sequence[float] | np.ndarray, side: str) -> np.ndarray:
    try:
        arr = np.asarray(list(values), dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{side} rounds must be numbers (milliseconds per round)") from None
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{side} rounds are empty: time at least one round of each side")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{side} rounds must be finite positive times in milliseconds")
    return arr


def _iqr(arr: np.ndarray) -> float:
    q1, q3 = np.percentile(arr, [25, 75])
    return float(q3 - q1)


def paired_speedup(ref_rounds: Sequence[float], cand_rounds: Sequence[float], rng_seed: int = 0,
                   n_boot: int = 2000, noisy_halfwidth: float = 0.10,
                   confidence: float = CONFIDENCE) -> PairedEstimate:
    """Speedup of the candidate over the reference from paired rounds (ref_rounds[i] and cand_rounds[i]
    were timed in the same round), with a bootstrap interval over rounds."""
    ref = _as_rounds(ref_rounds, "reference")
    cand = _as_rounds(cand_rounds, "candidate")
    if ref.size != cand.size:
        raise ValueError(f"paired timing needs as many reference rounds as candidate rounds "
                         f"({ref.size} vs {cand.size})")
    if n_boot < 100:
        raise ValueError("n_boot must be at least 100")
    if not 0.5 < confidence < 1.0:
        raise ValueError("confidence must lie between 0.5 and 1")
    n = ref.size
    ref_ms = float(np.median(ref))
    cand_ms = float(np.median(cand))
    speedup = ref_ms / cand_ms
    rng = np.random.default_rng(rng_seed)
    idx = rng.integers(0, n, size=(n_boot, n))  # the same rounds for both sides: pairs stay pairs
    ratios = np.median(ref[idx], axis=1) / np.median(cand[idx], axis=1)
    alpha = (1.0 - confidence) / 2.0
    lo, hi = (float(x) for x in np.quantile(ratios, [alpha, 1.0 - alpha]))
    lo, hi = min(lo, speedup), max(hi, speedup)
    halfwidth = max(hi - speedup, speedup - lo) / speedup
    noisy = bool(halfwidth > noisy_halfwidth or n < MIN_ROUNDS)
    return PairedEstimate(ref_ms=ref_ms, cand_ms=cand_ms, speedup=speedup, lo=lo, hi=hi, rounds=n,
                          ref_iqr_ms=_iqr(ref), cand_iqr_ms=_iqr(cand), halfwidth=halfwidth, noisy=noisy,
                          confidence=confidence, n_boot=n_boot)


def is_improvement(candidate_vs_best: PairedEstimate, min_gain: float = 0.0) -> bool:
    """True only when the whole interval lies on the faster side: lo > 1 + min_gain, from enough rounds.
    `candidate_vs_best` is the paired estimate with the current best as the reference."""
    est = candidate_vs_best
    return est.rounds >= MIN_ROUNDS and est.lo > 1.0 + min_gain


def is_regression(candidate_vs_best: PairedEstimate) -> bool:
    """True only when the whole interval lies on the slower side."""
    return candidate_vs_best.rounds >= MIN_ROUNDS and candidate_vs_best.hi < 1.0


def needs_more_rounds(est: PairedEstimate, target_halfwidth: float = 0.10) -> bool:
    """Keep measuring (within the time budget) while the interval is wider than the target."""
    return est.rounds < MIN_ROUNDS or est.halfwidth > target_halfwidth


OUT_OF_REACH_SLACK = 1.5  # stop early only when even the hopeful projection misses the target by this factor
OUT_OF_REACH_MIN_ROUNDS = 8  # a half-width from fewer rounds is too unsteady to give up on


def out_of_reach(halfwidth: float, rounds: int, round_s: float, seconds_left: float, target: float,
                 slack: float = OUT_OF_REACH_SLACK) -> bool:
    """Whether the interval cannot narrow to `target` in the time budget that is left. A half-width
    shrinks about as 1/sqrt(rounds), so with `seconds_left / round_s` more rounds the most to hope for is
    `halfwidth * sqrt(rounds / (rounds + more))`; when that still misses the target by `slack`, the
    verdict at the budget's end would be as noisy as now, only later (on a 2-core machine the clock
    used its whole 5 s for candidates that ended at half-widths of 0.13-0.33). Stopping gives the same
    noisy verdict, without a claim, seconds sooner."""
    if rounds < OUT_OF_REACH_MIN_ROUNDS or round_s <= 0 or not math.isfinite(halfwidth):
        return False
    more = max(0, int(seconds_left / round_s))
    return halfwidth * math.sqrt(rounds / (rounds + more)) > target * slack


def _positive(x: float | None) -> float | None:
    if x is None or isinstance(x, bool):
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) and v > 0 else None


def achieved_bandwidth(bytes_moved: float | None, ms: float | None) -> float | None:
    """GB/s (10^9 bytes per second) for `bytes_moved` in `ms` milliseconds; None when either is unknown."""
    b, t = _positive(bytes_moved), _positive(ms)
    return None if b is None or t is None else b / (t * 1e-3) / 1e9


def achieved_gflops(flops: float | None, ms: float | None) -> float | None:
    """GFLOP/s for `flops` floating-point operations in `ms` milliseconds; None when either is unknown."""
    f, t = _positive(flops), _positive(ms)
    return None if f is None or t is None else f / (t * 1e-3) / 1e9


# Superseded by the attested clock below (kept for callers of the old floor): the candidate's per-call
# times are measured in its own process, which it controls. The parent's wall
# clock over a whole round (the command sent to the sampled outputs saved) is not: whatever that span
# holds beyond the round's trusted overhead (loading the sets, refills and copies, saving; measured by
# the reference worker on the same sets) was spent by the candidate's side, so its calls took at least a
# share of it. Generous (twice the overhead, 80%, 8 ms for four messages' scheduling), and applied only
# when most rounds fall below their floor: on a loaded machine a round can stall between calls, but a
# stall is the odd round, while a kernel that under-reports does so in every round.
FLOOR_OVERHEAD_FACTOR = 2.0
FLOOR_SHARE = 0.8
FLOOR_SLACK_MS = 8.0
FLOOR_MARGIN = 0.10  # a round counts as under-reported when its floor is this much above what it reported


def wall_floor_ms(wall_ms: float, overhead_ms: float | None) -> float:
    """The least total call time a round that took `wall_ms` (parent's clock) can honestly report; none
    when the trusted overhead is unknown (a reference worker that does not measure it)."""
    if overhead_ms is None:
        return 0.0
    overhead = _positive(overhead_ms) or 0.0
    return max(0.0, FLOOR_SHARE * (float(wall_ms) - FLOOR_OVERHEAD_FACTOR * overhead) - FLOOR_SLACK_MS)


def lift_rounds(reported: Sequence[float], floors: Sequence[float]) -> tuple[list[float], bool]:
    """Per-round figures lifted to their wall-clock floors when most rounds reported clearly less than
    their floor (True then); otherwise `reported` unchanged."""
    pairs = list(zip(reported, floors, strict=False))
    under = sum(1 for r, f in pairs if f > r * (1 + FLOOR_MARGIN))
    if not pairs or len(pairs) != len(reported) or under * 2 <= len(pairs):
        return list(reported), False
    return [max(r, f) for r, f in pairs], True


# ---------------------------------------------------------------------------------------------------
# The attested clock (issue 21). A candidate's round is the parent's clock from sending `round` to
# receiving `timing_end`, less the trusted overhead of that window (the reference worker runs the
# candidate side's loop with a stub model that returns ready outputs, clocked by the parent the same
# way), plus any CPU the candidate's sandbox used while it should have been idle. What disturbed each
# round is measured (run-queue wait and CPU time against wall time), and disturbed rounds are left out.
DISTURBED_SHARE = 0.20  # a side that lost this share of a round's wall time to waiting for a CPU: disturbed
IDLE_ALLOWANCE_MS = 1.0  # CPU an idle sandbox may use per round (a thread pool winding down) before it counts
REPORTED_DISAGREES = 0.5  # self-reported call times below this share of the attested ones: noted
BUSY_SHARE = 0.5  # more than this share of rounds disturbed: the verdict says the machine was busy
UNRESOLVED_SHARE = 0.05  # a round whose calls left less than this share of its wall time over the overhead


#: the share for a padded GPU round (`clock.paired_calls.set_gpu_pad`): the pad is a clock-counting spin that
#: repeats to a fraction of a percent, so a 64-call round of a 5 µs kernel, 2% of a 16 ms padded round,
#: is still told apart from it; 5% dropped every such round on an H200 (session 23)
PADDED_UNRESOLVED_SHARE = 0.005


#: a padded async GPU loop whose card was still busy for less than this share of the window after the host
#: had queued every call: the queue ran (nearly) dry, so the round timed the host's launch path, not the card
HOST_BOUND_TAIL_SHARE = 0.10


def host_bound(loop: dict | None) -> bool:
    """Whether a padded async GPU loop (`paired_calls` `loop_detail`: `loop_ms`, the host queueing the calls;
    `tail_ms`, the card finishing after that) was bound by the host: the pad is meant to keep the card's
    queue full, so the round reads the card's time; when a call's host work outlasts the pad the queue
    drains and the round reads the host's. Session 24 (H200): L2/76 at v0 with a 150 µs pad queued its 33
    calls in 7-9 ms and the card finished 0.2 ms later in every round of a verification, whose reference then
    read 33-77 µs a call against KernelBench's 37.5; its GPU-bound rounds kept a tail of 2.5-14 ms. Any other
    loop (sync, unpadded, the CPU's, none reported) is never judged here."""
    if not isinstance(loop, dict) or loop.get("mode") != "async" or not loop.get("pad_cycles"):
        return False
    try:
        queued, tail = float(loop.get("loop_ms") or 0.0), float(loop.get("tail_ms") or 0.0)
    except (TypeError, ValueError):
        return False
    return queued + tail > 0 and tail < HOST_BOUND_TAIL_SHARE * (queued + tail)


def unresolved(wall_ms: float, overhead_ms: float, share: float = UNRESOLVED_SHARE) -> bool:
    """True when the overhead measured for a round leaves (almost) nothing of its wall time for the calls
    (less than `share` of it): that round cannot tell the calls' time apart from the overhead's noise, and
    is left out. Rounds kept near the share are still judged by the estimate's interval (noisy or not)."""
    return float(wall_ms) - float(overhead_ms) < share * float(wall_ms)


def lost_share(wall_ms: float, wait_ms: float | None = None, cpu_ms: float | None = None,
               threads: int = 1) -> float:
    """The share of a window's wall time a side lost, in [0, 1]: the time its thread sat runnable on a
    run queue (`wait_ms`, from schedstat), and, when `cpu_ms` is given (single-threaded work on a trusted
    side), the wall time not covered by CPU time (`1 - cpu / (wall * threads)`)."""
    wall = _positive(wall_ms)
    if wall is None:
        return 0.0
    lost = 0.0
    wait = _positive(wait_ms)
    if wait is not None:
        lost = wait / wall
    cpu = None if cpu_ms is None else max(0.0, float(cpu_ms))
    if cpu is not None and math.isfinite(cpu):
        lost = max(lost, 1.0 - cpu / (wall * max(1, int(threads))))
    return float(min(1.0, max(0.0, lost)))


def attested_round_ms(wall_ms: float, overhead_ms: float, count: int, idle_cpu_ms: float = 0.0) -> float:
    """A candidate's per-call figure for one round: the parent's wall time over the round less the
    trusted overhead, plus the CPU its sandbox used while it should have been idle (beyond a small
    allowance), over the calls. Never below a microsecond (an overhead estimate can exceed a tiny round)."""
    extra = max(0.0, float(idle_cpu_ms) - IDLE_ALLOWANCE_MS)
    return max(1e-3, (float(wall_ms) - max(0.0, float(overhead_ms)) + extra) / max(1, int(count)))


OWN_OVERHEAD_MARGIN = 0.02  # an own stub at least this much cheaper than the trusted one before it counts


def own_overhead_ratio(trusted_ms: Sequence[float], own_ms: Sequence[float | None]) -> float:
    """How much of the trusted stub a candidate's figures may subtract, in (0, 1]: the median over rounds
    of its own stub round (`stub_round` run by its harness, in its process) over the trusted stub of the same
    round where that is clearly below 1, else 1 (and 1 when no own stub was measured).

    Why this holds. A candidate's round is clocked in its own process, so whatever it sets there (glibc's
    `mallopt(M_MMAP_MAX, 0)`, trim and mmap thresholds, thread counts, page state) changes the cost of the
    harness's loop around its calls; the trusted stub, run by the reference worker, does not see it. With
    the trusted stub alone the candidate made its loop cheaper than the stub and the difference came off
    its calls (softmax 2048x4096: 1.46x and 5.95x for the kernel that measured 0.78x and 0.58x without
    the line). Subtracting `ratio * trusted` instead:
    - is never more than the trusted stub (ratio <= 1): no figure is better than it was with the trusted
      stub alone, whatever the own stub says, so a candidate gains nothing by making its own stub slow;
    - is no more than its own loop costs when its own stub is like its real round: the same harness code
      on the same sets, in the same process right after the round, with the same allocator and page
      state. A setting that makes its loop cheaper makes its stub cheaper by as much, and that much less
      is subtracted. Code that runs only inside `forward` can leave a costly state behind its round's
      last call, but no forward runs between the stub and the next round's draw: the next round starts
      in that same state, so only the refills after a round's first call could differ.
    - is the median of the per-round ratios where that is clearly below 1 (by more than twice its robust
      standard error, from the median absolute deviation, and by at least `OWN_OVERHEAD_MARGIN`), else 1.
      An honest candidate's own stub is the trusted one give or take noise: a bare median below 1 by
      noise alone subtracted a few percent less of a stub that is three quarters of a relu round (its
      figure ~8-10% slower; measured honest medians 0.97-1.0). A loop that is really cheaper (mallopt:
      medians 0.54-0.74) is subtracted at its own median, not raised towards the trusted stub: a relu
      whose calls are 3% of its round read 7.7x when 4% too much was subtracted. On a machine so busy
      that the median is not clearly below 1 the trusted stub is subtracted, as before, and the verdict
      is noisy. One disturbed round moves a median by one round.
    What it does not cover: code that runs beside the harness (a thread, a signal handler, an allocator
    it patched) and makes only the stub round slow. That brings the subtraction back up to the trusted
    stub's, no further: the gap between the trusted stub and its own loop, as before this bound."""
    ratios = [float(o) / float(t) for t, o in zip(trusted_ms, own_ms, strict=False)
              if o is not None and t is not None and float(t) > 0 and math.isfinite(float(o)) and float(o) > 0]
    if not ratios:
        return 1.0
    r = np.asarray(ratios)
    median = float(np.median(r))
    spread = 1.4826 * float(np.median(np.abs(r - median)))  # a robust standard deviation of one round's ratio
    stderr = 1.2533 * spread / math.sqrt(r.size)  # ... and of their median
    return median if median < 1.0 - max(2.0 * stderr, OWN_OVERHEAD_MARGIN) else 1.0


def select_rounds(lost: Sequence[Sequence[float]], limit: float = DISTURBED_SHARE) -> list[int]:
    """Indices of the rounds where no side lost more than `limit` of its time (`lost[side][round]`)."""
    if not lost:
        return []
    n = min(len(x) for x in lost)
    return [i for i in range(n) if all(float(x[i]) <= limit for x in lost)]


def robust_paired(ref_rounds: Sequence[float] | np.ndarray, cand_rounds: Sequence[float] | np.ndarray,
                  keep: Sequence[int] | None = None,
                  rng_seed: int = 0, n_boot: int = 2000, noisy_halfwidth: float = 0.10,
                  confidence: float = CONFIDENCE) -> PairedEstimate:
    """The speedup as the median of the per-round paired ratios (reference / candidate) over the kept
    rounds (`keep`: indices; None keeps all), with a bootstrap over rounds. One odd round moves a
    median of ratios no more than one round's worth, where a ratio of means could swing."""
    ref_all = _as_rounds(ref_rounds, "reference")
    cand_all = _as_rounds(cand_rounds, "candidate")
    if ref_all.size != cand_all.size:
        raise ValueError(f"paired timing needs as many reference rounds as candidate rounds "
                         f"({ref_all.size} vs {cand_all.size})")
    idx_keep = np.arange(ref_all.size) if keep is None else np.asarray(sorted(set(int(i) for i in keep)), dtype=int)
    if idx_keep.size == 0:  # every round disturbed: an estimate from all of them, always noisy
        est = robust_paired(ref_all, cand_all, None, rng_seed, n_boot, noisy_halfwidth, confidence)
        return PairedEstimate(**{**est.to_dict(), "rounds": 0, "noisy": True})
    ref, cand = ref_all[idx_keep], cand_all[idx_keep]
    if n_boot < 100:
        raise ValueError("n_boot must be at least 100")
    n = ref.size
    ratios = ref / cand
    speedup = float(np.median(ratios))
    rng = np.random.default_rng(rng_seed)
    boot = np.median(ratios[rng.integers(0, n, size=(n_boot, n))], axis=1)
    alpha = (1.0 - confidence) / 2.0
    lo, hi = (float(x) for x in np.quantile(boot, [alpha, 1.0 - alpha]))
    lo, hi = min(lo, speedup), max(hi, speedup)
    halfwidth = max(hi - speedup, speedup - lo) / speedup
    noisy = bool(halfwidth > noisy_halfwidth or n < MIN_ROUNDS)
    return PairedEstimate(ref_ms=float(np.median(ref)), cand_ms=float(np.median(cand)), speedup=speedup, lo=lo,
                          hi=hi, rounds=n, ref_iqr_ms=_iqr(ref), cand_iqr_ms=_iqr(cand), halfwidth=halfwidth,
                          noisy=noisy, confidence=confidence, n_boot=n_boot)


def busy_reason(lost: Sequence[Sequence[float]], walls: Sequence[float] | None = None,
                limit: float = DISTURBED_SHARE) -> str:
    """'the machine was busy: 48% of round time lost (9 of 14 rounds disturbed)' when more than
    BUSY_SHARE of the rounds were disturbed, else ''. `lost[side][round]`; a round's loss is its worst side's,
    weighted by `walls` (the round's wall time) when given."""
    if not lost:
        return ""
    n = min(len(x) for x in lost)
    if n == 0:
        return ""
    worst = [max(float(x[i]) for x in lost) for i in range(n)]
    disturbed = sum(1 for w in worst if w > limit)
    if disturbed * 1.0 <= BUSY_SHARE * n:
        return ""
    weights = [max(1e-9, float(w)) for w in walls[:n]] if walls is not None and len(walls) >= n else [1.0] * n
    share = sum(w * x for w, x in zip(weights, worst, strict=False)) / sum(weights)
    return f"the machine was busy: {share:.0%} of round time lost ({disturbed} of {n} rounds disturbed)"
