"""Interval arithmetic for paired timing and the "improved only when the interval is clear" rule."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from verifier.clock.stats import (
    MIN_ROUNDS,
    PairedEstimate,
    achieved_bandwidth,
    achieved_gflops,
    is_improvement,
    is_regression,
    needs_more_rounds,
    paired_speedup,
)


def rounds(seed: int, n: int, ms: float, sigma: float) -> np.ndarray:
    """n per-round times around `ms` with multiplicative (log-normal) noise."""
    return ms * np.exp(np.random.default_rng(seed).normal(0.0, sigma, n))


def test_a_a_gives_one_with_an_interval_covering_one():
    est = paired_speedup(rounds(1, 30, 2.0, 0.05), rounds(2, 30, 2.0, 0.05))
    assert est.speedup == pytest.approx(1.0, abs=0.05)
    assert est.lo <= 1.0 <= est.hi
    assert est.lo <= est.speedup <= est.hi
    assert not est.noisy and est.rounds == 30
    assert not is_improvement(est) and not is_regression(est)


def test_a_a_interval_is_calibrated_over_many_data_sets():
    # a 95% interval should cover the true ratio (1) in roughly 95% of independent A/A experiments
    covered = 0
    for seed in range(120):
        est = paired_speedup(rounds(10_000 + seed, 25, 1.0, 0.08), rounds(20_000 + seed, 25, 1.0, 0.08),
                             rng_seed=seed, n_boot=1000)
        covered += est.lo <= 1.0 <= est.hi
    assert 0.88 <= covered / 120 <= 1.0


def test_clear_2x_speedup_excludes_one_and_counts_as_improvement():
    ref = rounds(3, 20, 4.0, 0.05)
    cand = rounds(4, 20, 2.0, 0.05)
    est = paired_speedup(ref, cand)
    assert est.speedup == pytest.approx(2.0, rel=0.06)
    assert est.lo > 1.5 and est.hi < 2.5
    assert est.ref_ms == pytest.approx(float(np.median(ref)))
    assert est.cand_ms == pytest.approx(float(np.median(cand)))
    assert est.ref_iqr_ms > 0 and est.cand_iqr_ms > 0
    assert is_improvement(est) and not is_regression(est)
    assert is_improvement(est, min_gain=0.3) and not is_improvement(est, min_gain=1.0)
    # the other way round it is a clear regression
    back = paired_speedup(cand, ref)
    assert back.hi < 1.0 and is_regression(back) and not is_improvement(back)


def test_heavy_noise_is_flagged_and_asks_for_more_rounds():
    est = paired_speedup(rounds(5, 10, 1.0, 0.6), rounds(6, 10, 0.8, 0.6))
    assert est.noisy
    assert est.halfwidth > 0.10
    assert needs_more_rounds(est, target_halfwidth=0.10)
    quiet = paired_speedup(rounds(7, 40, 1.0, 0.02), rounds(8, 40, 0.8, 0.02))
    assert not quiet.noisy and not needs_more_rounds(quiet, target_halfwidth=0.10)
    assert needs_more_rounds(quiet, target_halfwidth=quiet.halfwidth / 2)


def test_interval_straddling_one_is_not_an_improvement():
    est = paired_speedup(rounds(9, 12, 1.0, 0.15), rounds(10, 12, 0.97, 0.15))
    assert est.lo < 1.0 < est.hi
    assert not is_improvement(est)
    # the rule looks at the interval, not at the point estimate
    made_up = PairedEstimate(ref_ms=1.3, cand_ms=1.0, speedup=1.3, lo=0.95, hi=1.7, rounds=20, ref_iqr_ms=0.1,
                             cand_iqr_ms=0.1, halfwidth=0.35, noisy=True)
    assert not is_improvement(made_up)
    assert is_improvement(PairedEstimate(**{**made_up.to_dict(), "lo": 1.01}))
    assert not is_improvement(PairedEstimate(**{**made_up.to_dict(), "lo": 1.5, "rounds": MIN_ROUNDS - 1}))


def test_pairing_cancels_load_shared_by_both_sides():
    # machine load changes from round to round (x1..x3) and hits both sides of a round alike
    load = np.random.default_rng(11).uniform(1.0, 3.0, 30)
    ref = 2.0 * load * np.exp(np.random.default_rng(12).normal(0, 0.01, 30))
    cand = 1.0 * load * np.exp(np.random.default_rng(13).normal(0, 0.01, 30))
    est = paired_speedup(ref, cand)
    assert est.speedup == pytest.approx(2.0, rel=0.05)
    assert not est.noisy and est.halfwidth < 0.05
    # resampling the two sides independently (ignoring the pairing) would give a much wider interval
    rng = np.random.default_rng(0)
    ri, ci = rng.integers(0, 30, (2000, 30)), rng.integers(0, 30, (2000, 30))
    unpaired = np.median(ref[ri], axis=1) / np.median(cand[ci], axis=1)
    lo, hi = np.quantile(unpaired, [0.025, 0.975])
    assert (hi - lo) / 2 / est.speedup > 3 * est.halfwidth


def test_deterministic_for_a_seed_and_seed_dependent_otherwise():
    ref, cand = rounds(14, 15, 1.0, 0.1), rounds(15, 15, 0.9, 0.1)
    a = paired_speedup(ref, cand, rng_seed=3)
    b = paired_speedup(list(ref), list(cand), rng_seed=3)
    assert a == b
    c = paired_speedup(ref, cand, rng_seed=4)
    assert c.speedup == a.speedup and (c.lo, c.hi) != (a.lo, a.hi)


def test_few_rounds_are_always_noisy():
    est = paired_speedup([1.0, 1.0, 1.0], [0.5, 0.5, 0.5])
    assert est.speedup == 2.0 and est.noisy and est.rounds == 3
    assert not is_improvement(est) and needs_more_rounds(est, 0.5)


def test_round_trip_through_json():
    est = paired_speedup(rounds(16, 20, 1.0, 0.05), rounds(17, 20, 0.5, 0.05))
    again = PairedEstimate.from_dict(json.loads(json.dumps(est.to_dict())))
    assert again == est
    assert PairedEstimate.from_dict({**est.to_dict(), "extra": 1}) == est
    assert "x [" in est.describe() and "20 rounds" in est.describe()


@pytest.mark.parametrize("broken", [
    {"speedup": None},
    {"rounds": 2.5},
    {"noisy": "yes"},
    {"lo": "fast"},
])
def test_from_dict_rejects_bad_fields_in_one_line(broken):
    data = {**paired_speedup([1.0] * 6, [0.5] * 6).to_dict(), **broken}
    with pytest.raises(ValueError) as info:
        PairedEstimate.from_dict(data)
    assert "\n" not in str(info.value) and "re-measure" in str(info.value)


def test_from_dict_reports_missing_fields():
    data = paired_speedup([1.0] * 6, [0.5] * 6).to_dict()
    del data["hi"]
    with pytest.raises(ValueError, match="missing 'hi'"):
        PairedEstimate.from_dict(data)
    with pytest.raises(ValueError):
        PairedEstimate.from_dict([1, 2])


@pytest.mark.parametrize("ref,cand,words", [
    ([], [1.0], "empty"),
    ([1.0, 2.0], [1.0], "as many"),
    ([1.0, -1.0], [1.0, 1.0], "positive"),
    ([1.0, math.nan], [1.0, 1.0], "finite"),
    (["a"], [1.0], "numbers"),
])
def test_bad_rounds_are_one_line_errors(ref, cand, words):
    with pytest.raises(ValueError, match=words):
        paired_speedup(ref, cand)


def test_bandwidth_and_gflops():
    assert achieved_bandwidth(2e9, 1000.0) == pytest.approx(2.0)  # 2 GB in 1 s
    assert achieved_bandwidth(4e6, 1.0) == pytest.approx(4.0)  # 4 MB in 1 ms
    assert achieved_gflops(2 * 512**3, 10.0) == pytest.approx(2 * 512**3 / 0.01 / 1e9)
    for bad in (None, 0, -1, math.nan, math.inf, "x", True):
        assert achieved_bandwidth(bad, 1.0) is None
        assert achieved_gflops(1e9, bad) is None


def test_wall_floor_lifts_only_systematic_under_reporting():
    """Rounds whose self-reported times are far below what the parent's clock saw (less twice the trusted
    overhead) are lifted to their floors only when most rounds are: a machine stalling the odd round
    changes nothing, a kernel under-reporting every round is corrected."""
    from verifier.clock.stats import lift_rounds, wall_floor_ms

    assert wall_floor_ms(1000.0, 100.0) == pytest.approx(0.8 * (1000.0 - 200.0) - 8.0)
    assert wall_floor_ms(50.0, 100.0) == 0.0  # overhead-dominated rounds: no floor
    assert wall_floor_ms(50.0, 0.0) == pytest.approx(0.8 * 50.0 - 8.0)
    assert wall_floor_ms(500.0, None) == 0.0  # no trusted overhead measured: no floor
    honest = [10.0, 11.0, 10.5, 10.2, 9.8, 10.1]
    stalled = [0.0, 30.0, 0.0, 0.0, 25.0, 0.0]  # two rounds stalled by the machine
    assert lift_rounds(honest, stalled) == (honest, False)
    forged = [0.5, 0.6, 0.5, 0.4, 0.5, 0.6]
    floors = [8.0, 8.5, 0.0, 7.9, 8.2, 8.1]
    lifted, said = lift_rounds(forged, floors)
    assert said and lifted == [8.0, 8.5, 0.5, 7.9, 8.2, 8.1]
    assert lift_rounds(forged, []) == (forged, False)  # no floors recorded: nothing to say


# --- the attested clock (issue 21): disturbance, round selection, the robust estimate -----------------

def test_lost_share_from_run_queue_wait_and_cpu_time():
    from verifier.clock.stats import lost_share

    assert lost_share(100.0, wait_ms=0.0) == 0.0
    assert lost_share(100.0, wait_ms=48.0) == pytest.approx(0.48)
    # a trusted single-threaded side that got 60 ms of CPU in 100 ms lost 40%
    assert lost_share(100.0, wait_ms=5.0, cpu_ms=60.0) == pytest.approx(0.40)
    # more CPU than wall time (threads) is no loss; the share stays within [0, 1]
    assert lost_share(100.0, wait_ms=0.0, cpu_ms=180.0) == 0.0
    assert lost_share(100.0, wait_ms=250.0) == 1.0
    assert lost_share(0.0, wait_ms=5.0) == 0.0 and lost_share(float("nan"), wait_ms=5.0) == 0.0
    assert lost_share(100.0) == 0.0  # nothing known: nothing lost


def test_attested_round_subtracts_the_overhead_and_adds_idle_cpu():
    from verifier.clock.stats import IDLE_ALLOWANCE_MS, attested_round_ms

    assert attested_round_ms(100.0, 20.0, 4) == pytest.approx(20.0)
    # CPU the sandbox used while it should have been idle counts against it (beyond a small allowance)
    assert attested_round_ms(100.0, 20.0, 4, idle_cpu_ms=40.0 + IDLE_ALLOWANCE_MS) == pytest.approx(30.0)
    assert attested_round_ms(100.0, 20.0, 4, idle_cpu_ms=IDLE_ALLOWANCE_MS / 2) == pytest.approx(20.0)
    assert attested_round_ms(10.0, 20.0, 1) > 0  # an overhead above a tiny round: never zero or negative


def test_a_round_the_overhead_swallows_is_unresolved():
    from verifier.clock.stats import unresolved

    assert not unresolved(100.0, 80.0)
    assert unresolved(100.0, 97.0) and unresolved(10.0, 20.0)


def test_select_rounds_drops_rounds_where_any_side_lost_much():
    from verifier.clock.stats import DISTURBED_SHARE, select_rounds

    ref = [0.0, 0.5, 0.05, 0.0, 0.0]
    stub = [0.0, 0.0, 0.0, 0.3, 0.0]
    cand = [0.1, 0.0, 0.0, 0.0, DISTURBED_SHARE]
    assert select_rounds([ref, stub, cand]) == [0, 2, 4]
    assert select_rounds([ref, stub, cand], limit=0.6) == [0, 1, 2, 3, 4]
    assert select_rounds([]) == []


def test_robust_paired_is_the_median_ratio_and_ignores_dropped_rounds():
    from verifier.clock.stats import robust_paired

    ref = list(rounds(5, 20, 4.0, 0.03))
    cand = list(rounds(6, 20, 2.0, 0.03))
    # three wild rounds (a burner, a stalled parent): a ratio of means would move, the estimate barely does
    cand_bad = cand[:]
    for i in (3, 9, 15):
        cand_bad[i] = 0.02
    keep = [i for i in range(20) if i not in (3, 9, 15)]
    clean = robust_paired(ref, cand)
    assert clean.speedup == pytest.approx(2.0, rel=0.05) and not clean.noisy
    dropped = robust_paired(ref, cand_bad, keep)
    assert dropped.rounds == 17 and dropped.speedup == pytest.approx(clean.speedup, rel=0.03)
    unfiltered = robust_paired(ref, cand_bad)  # even kept, three odd rounds move a median of ratios little
    assert unfiltered.speedup < clean.speedup * 1.15
    assert dropped.lo <= dropped.speedup <= dropped.hi
    # every round disturbed: an estimate, but never a claim
    none = robust_paired(ref, cand, [])
    assert none.noisy and none.rounds == 0
    # too few kept rounds: noisy
    assert robust_paired(ref, cand, [0, 1, 2]).noisy
    with pytest.raises(ValueError):
        robust_paired(ref, cand[:5])


def test_robust_paired_a_a_covers_one():
    from verifier.clock.stats import robust_paired

    est = robust_paired(rounds(7, 30, 1.0, 0.04), rounds(8, 30, 1.0, 0.04))
    assert est.lo <= 1.0 <= est.hi and est.speedup == pytest.approx(1.0, abs=0.04) and not est.noisy


def test_busy_reason_says_how_much_time_was_lost():
    from verifier.clock.stats import busy_reason

    quiet = [[0.0] * 10, [0.01] * 10, [0.05] * 10]
    assert busy_reason(quiet) == ""
    busy = [[0.5] * 8 + [0.0] * 2, [0.0] * 10, [0.1] * 10]
    text = busy_reason(busy)
    assert text.startswith("the machine was busy: ") and "8 of 10 rounds disturbed" in text
    assert "42% of round time lost" in text  # (8 * 0.5 + 2 * 0.1) / 10
    assert busy_reason(busy, walls=[1.0] * 8 + [3.0] * 2).startswith("the machine was busy: 33%")  # 4.6 / 14
    assert busy_reason([[0.5] * 5 + [0.0] * 5]) == ""  # half the rounds: still enough quiet ones


def test_out_of_reach_only_when_even_the_projection_misses_the_target():
    from verifier.clock.stats import out_of_reach

    # 8 rounds at 0.3 s with 2.5 s left: 8 more rounds at best, the half-width at best x0.71
    assert out_of_reach(0.30, 8, 0.3, 2.5, 0.10)  # 0.21 > 0.15: the budget's end would still be noisy
    assert not out_of_reach(0.18, 8, 0.3, 2.5, 0.10)  # 0.127 < 0.15: keep measuring, a claim may come
    assert not out_of_reach(0.50, 7, 0.3, 2.5, 0.10)  # too few rounds to give up on
    assert not out_of_reach(0.30, 8, 0.3, 60.0, 0.10)  # plenty of budget left: 0.30 x sqrt(8/208) = 0.06
    assert not out_of_reach(float("nan"), 8, 0.3, 2.5, 0.10)


def test_a_padded_gpu_round_is_resolved_at_a_smaller_share_and_nothing_else_is():
    """Session 23 (H200): with a 150 µs spin before each call a 64-call round of a 5 µs ReLU is ~2% of its
    16 ms wall, so every such round fell under the 5% share and no verdict had a figure. Only the padded
    async GPU loop gets the smaller share; the CPU, the sync loop and an unpadded async loop keep 5%."""
    from verifier.clock.rounds import resolvable_share
    from verifier.clock.stats import PADDED_UNRESOLVED_SHARE, UNRESOLVED_SHARE, unresolved
    from verifier.config import VerifyConfig

    wall, stub = 16.78, 16.36  # ms: one round's replay and stub at pad 150 (ReLU v0)
    padded = VerifyConfig(gpu_loop="async", gpu_pad_us=150)
    assert resolvable_share("cuda", padded) == PADDED_UNRESOLVED_SHARE < UNRESOLVED_SHARE
    assert unresolved(wall, stub) and not unresolved(wall, stub, resolvable_share("cuda", padded))
    for device, config in (("cpu", padded), ("cuda", VerifyConfig(gpu_loop="sync", gpu_pad_us=150)),
                           ("cuda", VerifyConfig(gpu_loop="async")), ("cuda", VerifyConfig())):
        assert resolvable_share(device, config) == UNRESOLVED_SHARE, (device, config.gpu_loop, config.gpu_pad_us)
    assert unresolved(wall, wall - 0.05, PADDED_UNRESOLVED_SHARE)  # 0.3% of the round: still nothing to tell


def test_a_rounds_most_calls_come_from_the_config_then_the_environment_then_the_default(monkeypatch):
    """Session 24 (H200): the handoffs of a clocked window spread a padded round by ~0.2 ms, as much as 64
    calls of a 5 µs kernel, so the cap on a round's calls is a setting to try larger rounds with; a bad value
    in the environment falls back to the default instead of failing a verification."""
    from verifier.clock.rounds import MAX_CALLS_PER_ROUND, max_calls_of
    from verifier.config import VerifyConfig

    monkeypatch.delenv("EVOKERNEL_MAX_CALLS", raising=False)
    assert max_calls_of(VerifyConfig()) == MAX_CALLS_PER_ROUND == 64
    monkeypatch.setenv("EVOKERNEL_MAX_CALLS", "512")
    assert max_calls_of(VerifyConfig()) == 512
    assert max_calls_of(VerifyConfig(max_calls_per_round=8)) == 8  # the config wins over the environment
    monkeypatch.setenv("EVOKERNEL_MAX_CALLS", "many")
    assert max_calls_of(VerifyConfig()) == MAX_CALLS_PER_ROUND
    monkeypatch.setenv("EVOKERNEL_MAX_CALLS", "0")
    assert max_calls_of(VerifyConfig()) == MAX_CALLS_PER_ROUND  # unset-like: 0 is no cap to honour


def test_a_padded_gpu_wake_spins_the_card_up_before_the_window_and_an_unpadded_one_does_not(monkeypatch):
    """Session 24: a padded round is spins counted in the card's cycles, so a card back from idle at a lower
    clock stretches the whole round. With the pad on, `wake` (outside the clock) spins `WAKE_SPIN_PADS` pads
    first; without it, the wake stays one tiny kernel and a synchronise, as before."""
    from verifier.clock import paired_calls

    calls: list = []
    fake = {"event": object, "flush": [0, 1], "zero": lambda t: calls.append(("zero", len(t))),
            "spin": lambda cycles: calls.append(("spin", cycles)), "sync": lambda: calls.append(("sync",))}
    monkeypatch.setattr(paired_calls, "_CUDA", dict(fake))
    paired_calls.wake(None, "cuda")
    assert calls == [("zero", 1), ("sync",)]
    calls.clear()
    paired_calls.set_gpu_pad(150 * paired_calls.PAD_CYCLES_PER_US)
    paired_calls.wake(None, "cuda")
    assert calls == [("zero", 1), ("spin", 150 * paired_calls.PAD_CYCLES_PER_US * paired_calls.WAKE_SPIN_PADS), ("sync",)]
    calls.clear()
    paired_calls.wake(None, "cpu")  # the CPU has no card to spin
    assert calls == []


def test_a_padded_round_whose_gpu_queue_ran_dry_is_host_bound_and_other_loops_are_never_judged():
    """Session 24 (H200), the trusted replay's own loop detail: L2/76 at v0 with a 150 µs pad queued its calls
    in 7.4-8.8 ms and the card finished 0.2-0.3 ms later in every round (its reference then read 33-77 µs a
    call against KernelBench's 37.5); ReLU at pad 250 kept a tail of 9-14 ms. A sync, unpadded or CPU loop,
    or none reported, is never called host-bound."""
    from verifier.clock.stats import HOST_BOUND_TAIL_SHARE, host_bound

    padded = {"mode": "async", "pad_cycles": 300000}
    for queued, tail in ((7.4, 0.2), (8.8, 0.2), (8.5, 0.3), (21.5, 0.4)):
        assert host_bound({**padded, "loop_ms": queued, "tail_ms": tail}), (queued, tail)
    for queued, tail in ((6.0, 13.3), (10.3, 9.3), (14.2, 6.4), (9.0, 4.1), (17.1, 4.0)):
        assert not host_bound({**padded, "loop_ms": queued, "tail_ms": tail}), (queued, tail)
    edge = 10.0 * (1 - HOST_BOUND_TAIL_SHARE)
    assert host_bound({**padded, "loop_ms": edge + 0.01, "tail_ms": 10.0 - edge - 0.01})
    for loop in ({"mode": "async", "pad_cycles": 0, "loop_ms": 8.0, "tail_ms": 0.1},
                 {"mode": "sync", "pad_cycles": 300000, "loop_ms": 8.0, "tail_ms": 0.1},
                 {"mode": "async", "pad_cycles": 300000, "loop_ms": "x", "tail_ms": 0.1},
                 {"mode": "async", "pad_cycles": 300000}, None, [], "async"):
        assert not host_bound(loop), loop


def test_a_verdict_whose_lost_rounds_were_host_bound_says_to_raise_the_pad_not_that_the_machine_was_busy():
    from verifier.run.timed_calls import host_bound_reason

    said = host_bound_reason({"host_bound_rounds": 8, "disturbed_rounds": 8, "rounds": 8, "gpu_pad_us": 150.0})
    assert "8 of 8 rounds" in said and "150 µs" in said and "EVOKERNEL_GPU_PAD_US" in said
    assert host_bound_reason({"host_bound_rounds": 0, "disturbed_rounds": 5, "rounds": 8}) == ""
    assert host_bound_reason({"host_bound_rounds": 1, "disturbed_rounds": 6, "rounds": 8}) == ""  # mostly busy
    assert host_bound_reason({}) == ""
