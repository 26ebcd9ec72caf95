"""Showing a bench: the display strings of a level row (shared with the CLI's tables) and
`report.md`, which sets settings, level rows, task rows, a replay's recorded-vs-here table and the
plot side by side.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, cast

from core.bench.benchfile import atomic_write, outcomes_of
from core.bench.metrics import FAST_PS, compare_outcomes, learning_metrics, p_key, summarise_levels
from core.bench.plot import text_plot, write_plot
from core.bench.records import LevelSummary, short_device


def fmt_rate(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.0f}%"


def fmt_x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def fmt_speed(v: float | None, noisy: bool = False, interval: tuple[float, float] | None = None) -> str:
    """A task's speedup with its 95% interval when known, `1.07x [0.69-1.52] noisy` where the verifier marked
    its timing noisy (not counted in fast_p)."""
    if v is None:
        return fmt_x(v)
    text = fmt_x(v) + (f" [{interval[0]:.2f}-{interval[1]:.2f}]" if interval else "")
    return text + (" noisy" if noisy else "")


def noise_note(outcomes: Sequence[object]) -> str:
    """`Noisy speedups (1: relu): ...`, or "" when no correct task's speedup is noisy."""
    noisy = [o for o in outcomes if getattr(o, "feasible", False) and getattr(o, "noisy", False)]
    if not noisy:
        return ""
    names = ", ".join(str(getattr(o, "task", "")) for o in noisy)
    return (f"Noisy speedups ({len(noisy)}: {names}): the timing varied more than the verifier could resolve; "
            "shown with `noisy` and not counted as faster in fast_p.")


def device_counts(outcomes: Sequence[object]) -> dict[str, int]:
    """How many verdicts each device gave over a run's tasks (`TaskOutcome.devices`), most first."""
    counts: dict[str, int] = {}
    for o in outcomes:
        for d in getattr(o, "devices", None) or []:
            if d:
                counts[d] = counts.get(d, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def devices_line(outcomes: Sequence[object]) -> str:
    """`12 verdicts: NVIDIA H100 80GB HBM3 · GPU 0 ×6, … · GPU 1 ×6` (`cpu ×12` on the CPU); a run recorded
    before devices were written says so."""
    counts = device_counts(outcomes)
    if not counts:
        return "devices not recorded"
    total = sum(counts.values())
    return f"{total} verdict{'s' if total != 1 else ''}: " + ", ".join(f"{d} ×{n}" for d, n in counts.items())


def best_device_cell(o: object | None) -> str:
    """The card the best kernel of a task was timed on, short (`GPU 1`, `cpu`), or `-`."""
    label = getattr(o, "best_device", "") if o is not None else ""
    return short_device(label) or "-"


def fmt_fraction(v: float | None) -> str:
    """`86%` of the machine's memory bandwidth (speed of light), `-` without one."""
    return "-" if v is None else f"{100 * v:.0f}%"


def fmt_cost(v: float | None) -> str:
    return "unknown" if v is None else f"${v:.4f}"


def level_name(level: int | None) -> str:
    return "all" if level is None else f"L{level}"


SUMMARY_COLUMNS = ("level", "tasks", "compiled", "correct", "fast_1", "fast_1.5", "fast_2", "geomean", "refine (median)",
                   "tokens", "cost", "rejected")


def summary_cells(s: LevelSummary) -> list[str]:
    """One level row as display strings, in SUMMARY_COLUMNS order ("rejected": share of tasks whose every
    kernel anti-hacking rejected, kept apart from the compile rate)."""
    return [level_name(s.level), str(s.tasks), fmt_rate(s.compile_rate), fmt_rate(s.correct_rate),
            fmt_rate(s.fast["1"]), fmt_rate(s.fast["1.5"]), fmt_rate(s.fast["2"]), fmt_x(s.geomean_speedup),
            fmt_x(s.median_refine_speedup), str(s.tokens), fmt_cost(s.cost), fmt_rate(s.rejected_rate)]


def _md_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines


def render_markdown(data: dict[str, Any], plot_file: str | None = None) -> str:
    """report.md of a bench.json: settings, one row per level, one row per task, the plot."""
    s = data.get("settings", {})
    outs = outcomes_of(data)
    finished = [o for o in outs if not o.error]
    title = "Bench replay" if s.get("mode") == "replay" else "Bench"
    lines = [f"# {title}: {s.get('suite', '')} on {s.get('backend', '')}", ""]
    if s.get("mode") == "replay":
        lines.append(f"Kernels of the sessions in `{s.get('replayed_from')}` verified again here "
                     f"(recorded with model {s.get('recorded_model')}).")
    else:
        lines.append(f"Model `{s.get('model')}`, {s.get('draft_steps')} draft + {s.get('refine_steps')} refine steps "
                     f"per task, retrieval `{s.get('retrieval')}`, executor {s.get('executor')} x{s.get('workers')}.")
    devices = ", ".join(data.get("environment", {}).get("devices", [])) or "unknown"
    state = "complete" if data.get("complete") else f"incomplete ({len(finished)} of {len(data.get('tasks', []))} tasks)"
    lines += [f"Device: {devices}. Run {state}.", "", "## Per level", ""]
    lines += _md_table(SUMMARY_COLUMNS, [summary_cells(r) for r in summarise_levels(finished)] if finished else [])
    compile_rows = [r for r in summarise_levels(finished) if r.fast_vs_compile] if finished else []
    if compile_rows:
        lines += ["", "Against torch.compile:", ""]
        lines += _md_table(("level", "fast_0", "fast_1", "fast_1.5", "fast_2"),
                           [[level_name(r.level),
                             *(fmt_rate(cast("dict[str, float]", r.fast_vs_compile)[p_key(p)])
                               for p in FAST_PS)]
                            for r in compile_rows])  # compile_rows: only rows with fast_vs_compile
    learning: dict[str, Any] = learning_metrics([o for o in finished if o.counted]) if finished else {}
    if learning.get("slots"):
        lines += ["", f"Memory: value chose {learning['value_slots']} of {learning['slots']} retrieval slots "
                      f"({fmt_rate(learning['value_slot_share'])}) that similarity's top-k would not have chosen; "
                      f"median refine speedup {fmt_x(learning['median_refine_speedup'])} over correct tasks, "
                      f"{fmt_x(learning['median_refine_speedup_paper'])} over tasks with a feasible refinement (paper)."]
    if learning.get("curves", {}).get("correct"):
        r1, fin = learning["round1"], learning["final"]
        lines += ["", f"First kernel: compiled {fmt_rate(r1['compile_rate'])}, correct {fmt_rate(r1['correct_rate'])}; "
                      f"final: compiled {fmt_rate(fin['compile_rate'])}, correct {fmt_rate(fin['correct_rate'])}. "
                      "Correct by kernel: " + " ".join(fmt_rate(v) for v in learning["curves"]["correct"]) + "."]
    skipped = [o for o in finished if o.skipped]
    if skipped:
        lines += ["", f"Skipped (the reference cannot run here; not in any rate): {len(skipped)} task"
                      f"{'s' if len(skipped) != 1 else ''}: " + ", ".join(o.task for o in skipped) + "."]
    note = noise_note([o for o in finished if o.counted])
    if note:
        lines += ["", note]
    lines += ["", "fast_p as in KernelBench's score.py: share of all tasks (incorrect ones included) that are correct "
              "and strictly more than p times faster than eager PyTorch (fast_0 = correct); a speedup the verifier "
              "marked noisy is not counted as faster. compiled: a kernel "
              "compiled; rejected: every kernel was refused by anti-hacking (never counted as a compile failure). "
              "geomean: over correct tasks. refine: median over correct tasks of the first feasible draft's latency "
              "over the best latency.", "", "## Per task", ""]
    rows = []
    for o in outs:
        status = o.status
        if o.rejected and o.status not in ("rejected by anti-hacking",) and not o.error and not o.skipped:
            status += f" ({o.rejected} of {o.kernels} kernels rejected by anti-hacking)"
        rows.append([o.task, str(o.level), status, fmt_speed(o.speedup, o.noisy, o.speedup_interval),
                     fmt_speed(o.speedup_vs_compile, o.noisy),
                     "-" if o.best_ms is None else f"{o.best_ms:.4f}",
                     f"{fmt_fraction(o.bandwidth_fraction)} (eager {fmt_fraction(o.reference_bandwidth_fraction)})"
                     if o.bandwidth_fraction is not None else "-",
                     fmt_x(o.refine_speedup), str(o.kernels), str(o.tokens), fmt_cost(o.cost)])
    lines += _md_table(("task", "level", "result", "vs eager", "vs compile", "best ms", "of bandwidth", "refine",
                        "kernels", "tokens", "cost"), rows)
    recorded = outcomes_of(data, "recorded")
    if recorded:
        levels, tasks = compare_outcomes(recorded, outs)
        lines += ["", "## Recorded vs here", ""]
        lines += _md_table(("level", "correct (rec)", "correct (here)", "geomean (rec)", "geomean (here)"),
                           [[level_name(a.level), fmt_rate(a.correct_rate), fmt_rate(b.correct_rate),
                             fmt_x(a.geomean_speedup), fmt_x(b.geomean_speedup)] for a, b in levels])
        moved = [t for t in tasks if t.a and t.b and t.a.feasible != t.b.feasible]
        if moved:
            lines += ["", "Correctness changed here: " + ", ".join(t.task for t in moved) + "."]
    if plot_file:
        lines += ["", "## Speedups", ""]
        if plot_file.endswith(".png"):
            lines.append(f"![speedups]({plot_file})")
        else:
            lines += ["```", text_plot(outs), "```"]
    return "\n".join(lines) + "\n"


def write_report(out: Path, data: dict[str, object]) -> tuple[Path, Path]:
    """report.md and the plot next to bench.json."""
    plot = write_plot(outcomes_of(data), out)
    report = Path(out) / "report.md"
    atomic_write(report, render_markdown(data, plot.name))
    return report, plot
