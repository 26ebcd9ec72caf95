"""Issue 34: a latency plot with one verified point shows it, with its value, at 80×24 as at 120×40
(the eager and compiled lines shared its rows and hid it; a lone value got ticks that missed it)."""

from __future__ import annotations

import pytest
from support import StaticSession
from textual.app import App, ComposeResult

from evokernel_tui.app import EvoKernelApp
from evokernel_tui.view import LatencyPoint
from evokernel_tui.widgets.latency_plot import LatencyPlot


def pane_lines(app: App, selector: str) -> list[str]:
    """The widget's rows as drawn on screen."""
    region = app.screen.query_one(selector).region
    strips = app.screen._compositor.render_strips()
    return [strips[y].crop(region.x, region.x + region.width).text for y in range(region.y, region.bottom)]


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_only_verified_point_is_drawn_with_its_value(tmp_path, size):
    # the frozen session: v1 failed to compile, v2 is the one verified point (1.25 ms; eager 2, compiled 1.6)
    app = EvoKernelApp(StaticSession(tmp_path / "session"), theme_name="dark", watch_file=False)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await pilot.pause(0.1)
        lines = pane_lines(app, "#latency")
        marked = [line for line in lines if "● 1.25 ms" in line]
        assert len(marked) == 1, "\n".join(lines)
        rest = [line for line in lines if line not in marked and "● feasible" not in line]  # not the legend
        assert "●" not in "".join(rest)  # one marker, beside its value


class PlotApp(App):
    def compose(self) -> ComposeResult:
        yield LatencyPlot(id="latency")


@pytest.mark.parametrize(("point", "label"), [(LatencyPoint(1, 0.8, True), "● 0.8 ms"),
                                              (LatencyPoint(4, 3.5, False, 2.0), "x 3.5 ms")],
                         ids=["feasible-no-eager", "failed"])
async def test_a_lone_point_sits_on_a_tick_of_its_own_value(point, label):
    app = PlotApp()
    async with app.run_test(size=(46, 10)) as pilot:
        app.query_one(LatencyPlot).series = ((point,), point.reference_ms, None)
        await pilot.pause()
        lines = pane_lines(app, "#latency")
        (row,) = [line for line in lines if label in line]
        assert row.split("┤")[0].strip() == f"{point.latency_ms:.3g} ms", "\n".join(lines)  # its row's tick is its value
