"""The bench's scores as pure functions over `TaskOutcome` records, in the manner of KernelBench's
score.py: compile and correctness rates, fast_p, the geometric-mean speedup, EvoKernel's median
refine speedup, the learning curves, and the level rows and A/B pairs of a comparison.

No I/O and no state: a report can be recomputed from `bench.json` alone, and each function can be
tested on hand-made records.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import cast

from core.bench.records import LevelSummary, TaskOutcome

FAST_PS = (0.0, 1.0, 1.5, 2.0)


def compile_rate(outcomes: Sequence[TaskOutcome]) -> float:
    """Share of tasks where at least one kernel compiled."""
    return sum(o.compiled for o in outcomes) / len(outcomes) if outcomes else 0.0


def correct_rate(outcomes: Sequence[TaskOutcome]) -> float:
    """Share of tasks with a feasible (correct, honest) kernel."""
    return sum(o.feasible for o in outcomes) / len(outcomes) if outcomes else 0.0


def rejected_rate(outcomes: Sequence[TaskOutcome]) -> float:
    """Share of tasks whose every kernel was rejected by anti-hacking (apart from "did not compile")."""
    return sum(o.status == "rejected by anti-hacking" for o in outcomes) / len(outcomes) if outcomes else 0.0


def fast_p(outcomes: Sequence[TaskOutcome], p: float, against: str = "eager", strict: bool = True) -> float | None:
    """fast_p as KernelBench's score.py defines it: the share of all tasks (incorrect ones included in the
    denominator) that are correct and strictly more than p times faster. `strict=False` is the labelled
    variant "at least p times faster" (it differs only at exact ties).

    `against="compile"` uses the speedup over torch.compile; None when no task measured it.
    fast_0 is the correctness rate (a correct kernel counts even if its latency was not measured). A speedup
    the verifier marked noisy is not a claim of faster: such a task counts in fast_0 only.
    """
    if not outcomes:
        return 0.0
    attr = "speedup" if against == "eager" else "speedup_vs_compile"
    if against != "eager" and not any(o.feasible and o.speedup_vs_compile is not None for o in outcomes):
        return None
    hits = 0
    for o in outcomes:
        value = getattr(o, attr)
        faster = value is not None and not o.noisy and (value > p if strict else value >= p)
        if o.feasible and (p <= 0 or faster):
            hits += 1
    return hits / len(outcomes)


def geomean(values: Iterable[float]) -> float | None:
    vals = [v for v in values if v is not None and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def geomean_speedup(outcomes: Sequence[TaskOutcome]) -> float | None:
    """Geometric mean of the speedup over eager, over correct tasks with a measured latency."""
    return geomean(o.speedup for o in outcomes if o.feasible and o.speedup)


def median_refine_speedup(outcomes: Sequence[TaskOutcome]) -> float | None:
    """Median over correct tasks of (first feasible draft's latency / best latency), as in EvoKernel."""
    ratios = [o.refine_speedup for o in outcomes if o.refine_speedup is not None]
    return statistics.median(ratios) if ratios else None


def median_refine_speedup_paper(outcomes: Sequence[TaskOutcome]) -> float | None:
    """The paper's in-task refine speedup: the median over tasks with at least one feasible refinement
    beyond the first feasible draft (tasks whose refining produced nothing feasible are left out)."""
    ratios = [o.refine_speedup for o in outcomes if o.refine_speedup is not None and o.feasible_refinements > 0]
    return statistics.median(ratios) if ratios else None


def learning_metrics(outcomes: Sequence[TaskOutcome]) -> dict[str, object]:
    """How much the learned values steered retrieval: the share of retrieval slots chosen by value that
    similarity's top-k would not have chosen, and the paper's refine median next to today's."""
    slots = sum(o.slots for o in outcomes)
    value = sum(o.value_slots for o in outcomes)
    n = len(outcomes)
    horizon = max((o.kernels for o in outcomes), default=0)

    def curve(attr: str) -> list[float]:
        """Share of tasks with a compiled / correct kernel among their first i kernels, i = 1..horizon."""
        firsts = [getattr(o, attr) for o in outcomes]
        return [round(sum(1 for f in firsts if f is not None and f <= i) / n, 4) for i in range(1, horizon + 1)]

    compiled, correct = (curve("first_compiled_at"), curve("first_feasible_at")) if n else ([], [])
    return {
        "curves": {"compiled": compiled, "correct": correct},
        "round1": {"compile_rate": compiled[0] if compiled else None, "correct_rate": correct[0] if correct else None},
        "final": {"compile_rate": compiled[-1] if compiled else None, "correct_rate": correct[-1] if correct else None},
        "slots": slots,
        "value_slots": value,
        "value_slot_share": round(value / slots, 4) if slots else None,
        "median_refine_speedup": median_refine_speedup(outcomes),
        "median_refine_speedup_paper": median_refine_speedup_paper(outcomes),
    }


def total_cost(outcomes: Sequence[TaskOutcome]) -> float | None:
    """Summed cost; None when any task's cost is unknown."""
    if any(o.cost is None for o in outcomes):
        return None
    return sum(o.cost or 0.0 for o in outcomes)


def p_key(p: float) -> str:
    return f"{p:g}"


def summarise(outcomes: Sequence[TaskOutcome], level: int | None = None) -> LevelSummary:
    vs_compile = {p_key(p): fast_p(outcomes, p, "compile") for p in FAST_PS}
    return LevelSummary(
        level=level,
        tasks=len(outcomes),
        compile_rate=compile_rate(outcomes),
        correct_rate=correct_rate(outcomes),
        rejected_rate=rejected_rate(outcomes),
        fast={p_key(p): cast(float, fast_p(outcomes, p)) for p in FAST_PS},  # against eager: never None
        # fast_p's None against compile does not depend on p: all None or none
        fast_vs_compile=(None if all(v is None for v in vs_compile.values())
                         else cast(dict[str, float], vs_compile)),
        geomean_speedup=geomean_speedup(outcomes),
        median_refine_speedup=median_refine_speedup(outcomes),
        tokens=sum(o.tokens for o in outcomes),
        cost=total_cost(outcomes),
        noisy=sum(o.feasible and o.noisy for o in outcomes),
    )


def summarise_levels(outcomes: Sequence[TaskOutcome]) -> list[LevelSummary]:
    """One row per level present, then the row over all tasks (level None); skipped tasks (reference
    cannot run here) are left out of every rate."""
    outcomes = [o for o in outcomes if not o.skipped]
    levels = sorted({o.level for o in outcomes})
    rows = [summarise([o for o in outcomes if o.level == lv], lv) for lv in levels]
    return [*rows, summarise(outcomes, None)]


@dataclass
class ComparedTask:
    task: str
    level: int
    a: TaskOutcome | None
    b: TaskOutcome | None

    @property
    def ratio(self) -> float | None:
        """B's speedup over A's on this task (both correct)."""
        if self.a and self.b and self.a.speedup and self.b.speedup:
            return self.b.speedup / self.a.speedup
        return None

    @property
    def within_noise(self) -> bool:
        """A's and B's speedups differ by less than their timing resolved: either is marked noisy, or their
        95% intervals overlap. Such a ratio is no measured difference (`bench compare` says so)."""
        a, b = self.a, self.b
        if self.ratio is None or a is None or b is None:
            return False
        if a.noisy or b.noisy:
            return True
        ia, ib = a.speedup_interval, b.speedup_interval
        return ia is not None and ib is not None and ia[0] <= ib[1] and ib[0] <= ia[1]


def compare_outcomes(a: Sequence[TaskOutcome], b: Sequence[TaskOutcome]) -> tuple[list[tuple[LevelSummary, LevelSummary]],
                                                                                  list[ComparedTask]]:
    """Level rows of A and B side by side (over the tasks both ran), and per-task pairs (all tasks)."""
    common = {o.task for o in a} & {o.task for o in b}
    a_c = [o for o in a if o.task in common and not o.error]
    b_c = [o for o in b if o.task in common and not o.error]
    rows_a, rows_b = summarise_levels(a_c), summarise_levels(b_c)
    by_level_b = {r.level: r for r in rows_b}
    levels = [(ra, by_level_b[ra.level]) for ra in rows_a if ra.level in by_level_b]
    amap, bmap = {o.task: o for o in a}, {o.task: o for o in b}
    names = list(dict.fromkeys([o.task for o in a] + [o.task for o in b]))
    tasks = [ComparedTask(n, (amap.get(n) or bmap[n]).level, amap.get(n), bmap.get(n)) for n in names]
    return levels, tasks
