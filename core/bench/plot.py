"""The speedup plot of a bench: `speedup.png` with matplotlib (eager speedup and refine speedup per
task on log2 axes), or the same as a text bar chart where matplotlib is missing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from core.bench.records import TaskOutcome


def text_plot(outcomes: Sequence[TaskOutcome], width: int = 40) -> str:
    """Speedup over eager per task as a bar chart in text (log2 scale, `|` marks 1x), for terminals and
    machines without matplotlib."""
    timed = [o for o in outcomes if o.feasible and o.speedup]
    if not timed:
        return "no correct task with a measured speedup"
    span = max(1.0, max(abs(math.log2(cast(float, o.speedup))) for o in timed))
    half = width // 2
    name_w = max(len(o.task) for o in timed)
    lines = [f"{'task':<{name_w}}  speedup vs eager (log2 scale, | = 1x)"]
    for o in timed:
        assert o.speedup is not None  # timed holds only measured speedups
        n = round(abs(math.log2(o.speedup)) / span * half)
        left = " " * (half - n) + "#" * n if o.speedup < 1 else " " * half
        right = "#" * n if o.speedup >= 1 else ""
        lines.append(f"{o.task:<{name_w}}  {left}|{right:<{half}} {o.speedup:.2f}x")
    return "\n".join(lines)


def write_plot(outcomes: Sequence[TaskOutcome], out: Path) -> Path:
    """`speedup.png` (matplotlib) or, without matplotlib, `speedup.txt`; returns the file written."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        path = Path(out) / "speedup.txt"
        path.write_text(text_plot(outcomes) + "\n", encoding="utf-8")
        return path
    done = [o for o in outcomes if not o.error]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, max(3.0, 0.35 * len(done) + 1.5)), sharey=True,
                                   layout="constrained")
    ys = list(range(len(done)))
    eager = [o.speedup if o.feasible and o.speedup else None for o in done]
    refine = [o.refine_speedup for o in done]
    _log_bars(ax1, ys, eager, [o.task for o in done], "best kernel: speedup over eager PyTorch")
    _log_bars(ax2, ys, refine, None, "refine: first feasible latency / best latency")
    path = Path(out) / "speedup.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _log_bars(ax: Any, ys: list[int], values: list[float | None], names: list[str] | None, title: str) -> None:
    """Bars from 1x to each value on a log2 axis (green faster, orange slower); no value -> "no kernel"."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

    known = [v for v in values if v]
    lo = min([0.5, *known]) / 1.3
    hi = max([2.0, *known]) * 1.3
    for y, v in zip(ys, values, strict=True):
        if not v:
            ax.text(1.0, y, "  not correct", va="center", fontsize=8, color="grey")
            continue
        ax.barh(y, abs(v - 1.0) or 0.01, left=min(v, 1.0), color="tab:green" if v >= 1 else "tab:orange")
        ax.text(v, y, f" {v:.2f}x", va="center", fontsize=8)
    ax.axvline(1.0, color="black", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlim(lo, hi)
    ax.xaxis.set_major_locator(LogLocator(base=2))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}x"))
    ax.set_title(title, fontsize=10)
    ax.set_ylim(len(ys) - 0.5, -0.5)  # first task on top; rows without a bar still get their space
    if names is not None:
        ax.set_yticks(ys, names)
