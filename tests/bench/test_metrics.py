"""Bench metrics over hand-made outcomes; every expected number below was worked out by hand."""

from __future__ import annotations

import math

import pytest

from core.bench import (
    TaskOutcome,
    best_attempt,
    compile_rate,
    correct_rate,
    fast_p,
    geomean_speedup,
    median_refine_speedup,
    outcome_from_results,
    summarise_levels,
    text_plot,
    total_cost,
)
from verifier.result import GATE_ORDER, GateResult, VerificationResult


def rec(task, level, compiled=True, feasible=True, speedup=None, vs_compile=None, first=None, best=None,
        tokens=0, cost=0.0):
    return TaskOutcome(task, level, compiled=compiled, feasible=feasible, speedup=speedup,
                       speedup_vs_compile=vs_compile, first_feasible_ms=first, best_ms=best, tokens=tokens, cost=cost)


@pytest.fixture
def outcomes():
    return [
        rec("a", 1, speedup=2.0, vs_compile=1.2, first=4.0, best=1.0, tokens=100, cost=0.01),  # refine 4x
        rec("b", 1, speedup=0.5, first=2.0, best=2.0, tokens=50, cost=0.02),                    # refine 1x
        rec("c", 1, feasible=False, tokens=30),
        rec("d", 1, compiled=False, feasible=False, tokens=20),
        rec("e", 2, speedup=1.5, vs_compile=0.9, first=3.0, best=1.5, tokens=10, cost=None),    # refine 2x
        rec("f", 2, speedup=1.0, first=1.0, best=1.0),                                          # exactly 1x
    ]


def test_level_one_rates(outcomes):
    l1 = outcomes[:4]
    assert compile_rate(l1) == 0.75
    assert correct_rate(l1) == 0.5
    assert fast_p(l1, 0) == 0.5
    assert fast_p(l1, 1) == 0.25
    assert fast_p(l1, 1.5) == 0.25
    assert fast_p(l1, 2) == 0.0          # KernelBench's score.py: strictly faster than p
    assert fast_p(l1, 2, strict=False) == 0.25   # the labelled "at least p" variant counts the tie
    assert fast_p(l1, 1.99) == 0.25
    assert fast_p(l1, 2.01, strict=False) == 0.0
    assert geomean_speedup(l1) == pytest.approx(1.0)
    assert median_refine_speedup(l1) == 2.5
    assert total_cost(l1) == pytest.approx(0.03)


def test_fast_p_against_compile_counts_only_measured(outcomes):
    l1 = outcomes[:4]
    assert fast_p(l1, 1, against="compile") == 0.25   # a: 1.2x over compile; b not measured
    assert fast_p(l1, 0, against="compile") == 0.5
    assert fast_p(outcomes[2:4], 1, against="compile") is None


def test_summary_per_level_and_overall(outcomes):
    rows = summarise_levels(outcomes)
    assert [r.level for r in rows] == [1, 2, None]
    l1, l2, everything = rows
    assert (l1.tasks, l1.tokens, l1.cost) == (4, 200, pytest.approx(0.03))
    assert l1.fast == {"0": 0.5, "1": 0.25, "1.5": 0.25, "2": 0.0}   # a is exactly 2x: not strictly faster
    assert l1.fast_vs_compile["1"] == 0.25
    assert l2.compile_rate == 1.0 and l2.correct_rate == 1.0
    assert l2.fast == {"0": 1.0, "1": 0.5, "1.5": 0.0, "2": 0.0}   # f is exactly 1x, e exactly 1.5x: ties do not count
    assert l2.geomean_speedup == pytest.approx(math.sqrt(1.5))
    assert l2.median_refine_speedup == 1.5
    assert l2.cost is None                             # e's price is unknown
    assert everything.tasks == 6
    assert everything.compile_rate == pytest.approx(5 / 6)
    assert everything.correct_rate == pytest.approx(4 / 6)
    assert everything.fast["1"] == pytest.approx(2 / 6)
    assert everything.geomean_speedup == pytest.approx(1.5 ** 0.25)
    assert everything.median_refine_speedup == 1.5     # median of 4, 1, 2, 1
    assert everything.tokens == 210


def test_empty_inputs():
    assert compile_rate([]) == 0.0
    assert geomean_speedup([]) is None
    assert median_refine_speedup([rec("x", 1, feasible=False)]) is None


def result(outcome, ms=None, ref=1.0, compiled_ms=None):
    failing = {"compile_fail": "compile", "incorrect": "correctness", "hack_fail": "anti_hacking"}.get(outcome)
    gates, failed = [], False
    for name in GATE_ORDER:
        status = "skip" if failed else ("fail" if name == failing else "pass")
        failed = failed or status == "fail"
        gates.append(GateResult(name, status))
    feasible = failing is None
    return VerificationResult("cpu", gates, latency_ms=ms if feasible else None, reference_ms=ref if feasible else None,
                              compiled_ms=compiled_ms if feasible else None, device="test-cpu")


def test_best_attempt_is_the_fastest_feasible_kernel():
    rs = [result("compile_fail"), result("feasible", 2.0), None, result("feasible", 0.5), result("feasible", 0.5),
          result("incorrect")]
    assert best_attempt(rs) == 3                     # ties go to the earlier kernel, as the loop keeps it
    assert best_attempt([result("incorrect"), None]) is None
    untimed = [result("incorrect"), result("feasible", None), result("feasible", None)]
    assert best_attempt(untimed) == 1


def test_outcome_from_results():
    rs = [result("compile_fail"), result("feasible", 2.0, ref=1.0, compiled_ms=0.8), result("feasible", 0.5, ref=1.0,
                                                                                            compiled_ms=0.8)]
    o = outcome_from_results("relu", 1, rs, tokens=12, cost=None, category="activation")
    assert o.compiled and o.feasible
    assert o.first_feasible_ms == 2.0 and o.best_ms == 0.5
    assert o.speedup == 2.0 and o.speedup_vs_compile == pytest.approx(1.6)
    assert o.refine_speedup == 4.0
    assert (o.kernels, o.tokens, o.cost, o.device) == (3, 12, None, "test-cpu")
    failed = outcome_from_results("x", 2, [result("compile_fail")])
    assert not failed.compiled and not failed.feasible and failed.refine_speedup is None
    assert outcome_from_results("y", 1, [result("incorrect")]).compiled


def test_text_plot_marks_faster_and_slower():
    text = text_plot([rec("fast", 1, speedup=4.0), rec("slow", 1, speedup=0.25), rec("bad", 1, feasible=False)])
    lines = text.splitlines()
    assert len(lines) == 3 and "bad" not in text
    fast, slow = lines[1], lines[2]
    assert fast.index("|") < fast.index("#") and "4.00x" in fast
    assert slow.index("#") < slow.index("|") and "0.25x" in slow


def test_anti_hacking_rejections_are_not_compile_failures():
    rejected = outcome_from_results("t", 1, [result("hack_fail"), result("hack_fail")])
    broken = outcome_from_results("u", 1, [result("hack_fail"), result("compile_fail")])
    wrong = outcome_from_results("v", 1, [result("hack_fail"), result("incorrect")])
    assert (rejected.rejected, rejected.compile_failed, rejected.status) == (2, 0, "rejected by anti-hacking")
    assert (broken.rejected, broken.compile_failed, broken.status) == (1, 1, "did not compile")
    assert wrong.status == "incorrect" and wrong.compiled
    [row] = summarise_levels([rejected, broken, wrong])[:1]
    assert row.compile_rate == pytest.approx(1 / 3) and row.rejected_rate == pytest.approx(1 / 3)


def test_skipped_tasks_are_reported_apart_and_left_out_of_every_rate():
    ok = rec("a", 1, speedup=2.0)
    skipped = TaskOutcome("big", 1, skipped="the reference needs about 12.0 GiB, over the 8 GiB limit")
    assert skipped.status.startswith("skipped (the reference needs") and not skipped.counted
    with_skip = summarise_levels([ok, skipped])
    assert with_skip == summarise_levels([ok]) and with_skip[-1].tasks == 1


def test_outcome_uses_the_sessions_accepted_best_when_given():
    """Issue 12: bench's "best" is the session's accepted kernel (as in the app, `sessions` and replay), not
    a faster one the loop did not accept (e.g. a noisy measurement); re-verified results have no accepted
    kernel and take the fastest."""
    rs = [result("feasible", 2.0, ref=1.0), result("feasible", 1.0, ref=1.0), result("feasible", 0.5, ref=1.0)]
    accepted = outcome_from_results("t", 1, rs, best_index=1)
    assert accepted.best_ms == 1.0 and accepted.speedup == 1.0
    assert outcome_from_results("t", 1, rs).best_ms == 0.5


def test_the_metrics_module_is_pure():
    """core.bench.metrics reads no file and starts nothing: it imports only the standard library's
    arithmetic and the records it scores (so a report can be recomputed from bench.json alone)."""
    import ast
    from pathlib import Path

    import core.bench.metrics as metrics

    tree = ast.parse(Path(metrics.__file__).read_text(encoding="utf-8"))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert imported <= {"__future__", "math", "statistics", "collections.abc", "dataclasses", "typing",
                        "core.bench.records"}, imported


def test_a_noisy_speedup_is_not_counted_as_faster_and_travels_with_the_outcome():
    """Issue 34: `bench compare` showed fast_1 -33 points from one noisy ratio (the same relu read 1.07x,
    0.99x, 0.69x across three runs). fast_p counts correct and faster; a noisy figure is not a claim of faster."""
    from core.bench import fmt_speed, noise_note, summarise

    clean, noisy = rec("relu", 1, speedup=1.07), rec("gelu", 1, speedup=1.5)
    noisy.noisy = True
    row = summarise([clean, noisy])
    assert row.fast["0"] == 1.0                        # both correct
    assert row.fast["1"] == 0.5 and row.fast["1.5"] == 0.0
    assert row.noisy == 1
    assert fmt_speed(1.5, True) == "1.50x noisy" and fmt_speed(1.07, False) == "1.07x"
    assert "gelu" in noise_note([clean, noisy]) and "not counted as faster" in noise_note([clean, noisy])
    assert noise_note([clean]) == ""

    timed = result("feasible", 0.5, ref=1.0)
    timed.timing = {"noisy": True}
    o = outcome_from_results("relu", 1, [timed])
    assert o.noisy and o.speedup == 2.0 and fast_p([o], 1.0) == 0.0 and fast_p([o], 0) == 1.0
    assert TaskOutcome.from_dict(o.to_dict()).noisy                  # bench.json keeps it
    assert not outcome_from_results("relu", 1, [result("feasible", 0.5, ref=1.0)]).noisy


def test_report_md_marks_a_noisy_speedup():
    from core.bench import render_markdown

    data = {"settings": {"suite": "builtin", "backend": "cpu"}, "complete": True,
            "outcomes": [rec("relu", 1, speedup=1.07).to_dict() | {"noisy": True}, rec("gelu", 1, speedup=2.0).to_dict()]}
    md = render_markdown(data)
    relu = next(line for line in md.splitlines() if line.startswith("| relu"))
    gelu = next(line for line in md.splitlines() if line.startswith("| gelu"))
    assert "1.07x noisy" in relu and "noisy" not in gelu
    assert "Noisy speedups (1: relu)" in md
    all_row = next(line for line in md.splitlines() if line.startswith("| all"))
    assert "| 50% |" in all_row                                       # fast_1: gelu only


def test_speed_of_light_travels_to_bench_json_and_report_md_but_not_from_a_noisy_figure():
    """Issue 35: the best kernel's share of the measured memory bandwidth (and the eager reference's) is in
    the outcome, bench.json and the report's per-task table; a noisy verdict's fraction is no claim."""
    from core.bench import render_markdown

    timed = result("feasible", 0.5, ref=1.0)
    timed.timing = {"noisy": False, "bandwidth_fraction": 0.86, "reference_bandwidth_fraction": 0.43}
    o = outcome_from_results("relu", 1, [timed])
    assert o.bandwidth_fraction == 0.86 and o.reference_bandwidth_fraction == 0.43
    assert TaskOutcome.from_dict(o.to_dict()).bandwidth_fraction == 0.86
    noisy = result("feasible", 0.5, ref=1.0)
    noisy.timing = {"noisy": True, "bandwidth_fraction": 0.86}
    assert outcome_from_results("relu", 1, [noisy]).bandwidth_fraction is None
    data = {"settings": {"suite": "builtin", "backend": "cpu"}, "complete": True,
            "outcomes": [o.to_dict(), rec("gelu", 1, speedup=2.0).to_dict()]}
    md = render_markdown(data)
    assert "of bandwidth" in md
    relu = next(line for line in md.splitlines() if line.startswith("| relu"))
    gelu = next(line for line in md.splitlines() if line.startswith("| gelu"))
    assert "86% (eager 43%)" in relu and "%" not in gelu.split("|")[7]


def test_the_speedup_interval_travels_from_the_verdict_into_bench_json():
    """Issue 34: the interval travels with every figure: from the best kernel's verdict into the outcome
    (and through bench.json's round trip); an untimed kernel has none."""
    timed = result("feasible", 0.5, ref=1.0)
    timed.timing = {"lo": 1.8, "hi": 2.25}
    o = outcome_from_results("relu", 1, [timed])
    assert o.speedup == 2.0 and o.speedup_interval == (1.8, 2.25)
    assert TaskOutcome.from_dict(o.to_dict()).speedup_interval == (1.8, 2.25)
    assert outcome_from_results("relu", 1, [result("feasible", 0.5, ref=1.0)]).speedup_interval is None
