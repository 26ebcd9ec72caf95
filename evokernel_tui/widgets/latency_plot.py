"""The latency history: each verified step's latency, feasible points marked, references as lines."""

from __future__ import annotations

from textual_plotext import PlotextPlot

from evokernel_tui.view import LatencyPoint


def plot_title(speedup: float | None, best_ms: float | None) -> str:
    """The pane title: the best feasible kernel's speedup over eager (latency in ms by step below)."""
    if best_ms is None:
        return "Latency · no feasible kernel yet"
    if speedup is None:
        return f"Latency · best {best_ms:.4f} ms"
    return f"Latency · best {speedup:.2f}× vs eager"


class LatencyPlot(PlotextPlot):
    """Redrawn from the whole history on each change; histories are short (tens of steps)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "Latency"
        self._data: tuple = ((), None, None)

    def show(
        self,
        points: list[LatencyPoint],
        reference_ms: float | None,
        compiled_ms: float | None,
        speedup: float | None,
        best_ms: float | None,
    ) -> None:
        data = (tuple((p.step, p.latency_ms, p.feasible) for p in points), reference_ms, compiled_ms)
        self.border_title = plot_title(speedup, best_ms)
        if data == self._data:
            return
        self._data = data
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        if not points:
            plt.title("verified steps appear here")
            self.refresh()
            return
        steps = [p.step for p in points]
        lo, hi = min(steps), max(steps)
        span = [lo, hi] if hi > lo else [lo - 0.5, hi + 0.5]
        plt.plot(steps, [p.latency_ms for p in points], marker="dot", label="kernel")
        feasible = [p for p in points if p.feasible]
        if feasible:
            plt.scatter([p.step for p in feasible], [p.latency_ms for p in feasible], marker="●", color="green", label="feasible")
        infeasible = [p for p in points if not p.feasible]
        if infeasible:
            plt.scatter([p.step for p in infeasible], [p.latency_ms for p in infeasible], marker="x", color="red")
        if reference_ms:
            plt.plot(span, [reference_ms, reference_ms], color="blue", marker="braille", label="eager")
        if compiled_ms:
            plt.plot(span, [compiled_ms, compiled_ms], color="magenta", marker="braille", label="compile")
        plt.xticks(_step_ticks(lo, hi))
        self.refresh()


def _step_ticks(lo: int, hi: int, most: int = 8) -> list[int]:
    """Whole step numbers only (plotext would label 1.25, 1.50, ...), at most `most` of them."""
    stride = max(1, -(-(hi - lo + 1) // most))
    return list(range(lo, hi + 1, stride))
