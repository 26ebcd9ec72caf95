"""Speed decisions from paired measurements: the interval rule and the best kernel in the same frame."""

from __future__ import annotations

from types import SimpleNamespace

from core.rewards import best_in_frame, is_improvement, reward_for
from verifier.result import GateResult, VerificationResult


def _result(ref_ms: float, cand_ms: float, lo: float, hi: float, noisy: bool = False) -> VerificationResult:
    gates = [GateResult(n, "pass") for n in ("anti_hacking", "compile", "correctness", "latency", "profile")]
    return VerificationResult(backend="cpu", gates=gates, latency_ms=cand_ms, reference_ms=ref_ms,
                              timing={"speedup": ref_ms / cand_ms, "lo": lo, "hi": hi, "noisy": noisy})


def test_improvement_needs_the_whole_interval_on_the_faster_side():
    best_ms = 10.0
    clear = _result(20.0, 8.0, lo=2.3, hi=2.7)       # slow end 20/2.3 = 8.7 ms < 9.8
    straddles = _result(20.0, 9.0, lo=1.9, hi=2.6)   # slow end 10.5 ms: could be slower than the best
    assert is_improvement(clear, best_ms)
    assert not is_improvement(straddles, best_ms)


def test_noisy_measurement_is_never_progress():
    assert not is_improvement(_result(20.0, 2.0, lo=5.0, hi=15.0, noisy=True), 10.0)


def test_best_is_compared_in_the_candidates_frame():
    """Load doubled between the best's measurement and this one: both sides slowed, the speedups did
    not change, so this kernel (same speedup) is no improvement and gets a zero refine reward."""
    best = SimpleNamespace(result=_result(10.0, 5.0, lo=1.95, hi=2.05), latency_ms=5.0)
    now = _result(20.0, 10.0, lo=1.95, hi=2.05)     # same kernel speed relative to eager, twice the load
    frame = best_in_frame(now, best)
    assert frame == 10.0
    assert not is_improvement(now, frame)
    assert abs(reward_for("refine", now, frame).value) < 1e-9
    # against the best's raw latency (5 ms, taken on a quiet machine) it would look 2x slower
    assert reward_for("refine", now, best.latency_ms).value < -0.5


def test_without_a_paired_best_the_raw_latency_is_used():
    best = SimpleNamespace(result=None, latency_ms=7.0)
    assert best_in_frame(_result(20.0, 10.0, 1.9, 2.1), best) == 7.0
    assert best_in_frame(_result(20.0, 10.0, 1.9, 2.1), None) is None
