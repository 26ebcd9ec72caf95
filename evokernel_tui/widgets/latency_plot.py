"""The latency history: each verified step's latency, feasible points marked, references as lines."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from textual.reactive import reactive
from textual_plotext import PlotextPlot

from evokernel_tui.view import LatencyPoint


def plot_title(speed: str | float | None, best_ms: float | None) -> str:
    """The pane title: the accepted best kernel's speedup over eager, as `core.events.speed_text` writes it
    (`≈1.84× (noisy)`, `1.84× (cached, measured 4 min ago)`); latency in ms by step below."""
    if best_ms is None:
        return "Latency · no feasible kernel yet"
    if not speed:
        return f"Latency · best {best_ms:.4f} ms"
    if not isinstance(speed, str):
        speed = f"{speed:.2f}×"
    figure, _, note = speed.partition(" (")
    return f"Latency · best {figure} vs eager" + (f" ({note}" if note else "")


LEGEND = "· kernel  ● feasible  x failed  ─ eager  ─ compile"


def eager_series(points: Sequence[LatencyPoint], reference_ms: float | None) -> tuple[list[float], list[float]]:
    """The eager time each measurement was compared with, by step (the latest known eager time for a
    point recorded without one): the line moves where the reference was re-timed, never backwards."""
    xs, ys = [], []
    last = None
    for p in points:
        ref = p.reference_ms if p.reference_ms else last
        last = ref or last
        if ref:
            xs.append(float(p.step))
            ys.append(float(ref))
    if not ys and reference_ms:
        xs, ys = [float(p.step) for p in points], [float(reference_ms)] * len(points)
    return xs, ys


def value_label(point: LatencyPoint) -> str:
    """The marker of a lone point with its value beside it: `● 1.25 ms` (`x 3.5 ms` when it failed)."""
    return f"{'●' if point.feasible else 'x'} {point.latency_ms:.4g} ms"


def ms_ticks(lo: float, hi: float, count: int = 4) -> tuple[list[float], list[str]]:
    """Y ticks labelled with their unit (`12.5 ms`), so the axis says what it measures."""
    if hi <= lo:  # one value: it is the middle tick, ±10% around it
        value = lo or 1.0
        return [value * 0.9, value, value * 1.1], [f"{v:.3g} ms" for v in (value * 0.9, value, value * 1.1)]
    step = (hi - lo) / (count - 1)
    values = [lo + i * step for i in range(count)]
    return values, [f"{v:.3g} ms" for v in values]


class LatencyPlot(PlotextPlot):
    """Redrawn from the whole history when `series` (points, eager ms, compiled ms) or the pane's height
    changes; histories are short (tens of steps). `best` (speedup, best ms) makes the title."""

    series: reactive[tuple[tuple[LatencyPoint, ...], float | None, float | None] | None] = reactive(
        None, init=False, repaint=False)
    best: reactive[tuple[str | float | None, float | None] | None] = reactive(None, init=False, repaint=False)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "Latency"
        self._drawn_height: int | None = None

    def on_resize(self) -> None:
        if self.series is not None and self.size.height != self._drawn_height:
            self._draw()

    def watch_best(self, best: tuple[str | float | None, float | None] | None) -> None:
        if best is not None:
            self.border_title = plot_title(*best)

    def validate_series(self, series: tuple | None) -> tuple | None:
        """A copy of the points, so a change to one of them is a change of `series`."""
        if series is None:
            return None
        points, reference_ms, compiled_ms = series
        return tuple(replace(p) for p in points), reference_ms, compiled_ms

    def watch_series(self) -> None:
        self._draw()

    def _draw(self) -> None:
        points, reference_ms, compiled_ms = self.series or ((), None, None)
        self._drawn_height = self.size.height
        self.border_subtitle = LEGEND if points else ""
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        if not points:
            plt.title("verified steps appear here (latency in ms by step)")
            self.refresh()
            return
        steps = [p.step for p in points]
        lo, hi = min(steps), max(steps)
        span: list[float] = [lo, hi] if hi > lo else [lo - 0.5, hi + 0.5]
        # the reference lines first, the kernel's points last: in a pane a few rows high they share rows,
        # and a line drawn after a point would hide it (at 80×24 the only point vanished under them)
        xs, ys = eager_series(points, reference_ms)
        if len(xs) == 1:
            xs, ys = span, ys * 2
        if ys:
            plt.plot(xs, ys, color="blue", marker="braille")
        if compiled_ms:
            plt.plot(span, [compiled_ms, compiled_ms], color="magenta", marker="braille")
        if hi > lo:
            plt.plot(steps, [p.latency_ms for p in points], marker="dot")
        feasible = [p for p in points if p.feasible]
        if feasible:
            plt.scatter([p.step for p in feasible], [p.latency_ms for p in feasible], marker="●", color="green")
        infeasible = [p for p in points if not p.feasible]
        if infeasible:
            plt.scatter([p.step for p in infeasible], [p.latency_ms for p in infeasible], marker="x", color="red")
        if hi == lo:
            # one step verified: no line to read it from, so its marker says its value
            last = points[-1]
            plt.text(value_label(last), x=last.step, y=last.latency_ms, alignment="left",
                     color="green" if last.feasible else "red")
        values = [p.latency_ms for p in points] + ys + ([compiled_ms] if compiled_ms else [])
        # as many labelled ticks as the plot has rows for (plotext would otherwise pick among them)
        ticks, labels = ms_ticks(min(values), max(values), max(2, min(4, self.size.height - 5)))
        plt.yticks(ticks, labels)
        if min(values) == max(values):
            plt.ylim(ticks[0], ticks[-1])  # plotext would span the lone value alone
        plt.xticks(_step_ticks(lo, hi))
        plt.xlabel("step")
        self.refresh()


def _step_ticks(lo: int, hi: int, most: int = 8) -> list[float]:
    """Whole step numbers only (plotext would label 1.25, 1.50, ...), at most `most` of them."""
    stride = max(1, -(-(hi - lo + 1) // most))
    return list(range(lo, hi + 1, stride))
