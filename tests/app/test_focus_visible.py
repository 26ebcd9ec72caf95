"""Issue 34: the pane with the keyboard shows it, in every theme at 80×24 and 120×40: a heavy top border
and its title in reverse, on that pane only, and it moves with tab (typed keys go where it shows)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import StaticSession

from evokernel_tui.app import EvoKernelApp
from evokernel_tui.themes import THEME_NAMES

PANES = ("kernel", "gates", "memories", "latency", "activity")
SIZES = [(80, 24), (120, 40)]


def test_every_theme_file_is_tested():
    files = {p.stem for p in (Path(__file__).parents[2] / "themes").glob("*.tcss")} - {"base"}
    assert files == set(THEME_NAMES)


def top_line(app: EvoKernelApp, pane: str) -> tuple[str, str]:
    """The pane's top border as drawn on screen, and the text drawn there in reverse."""
    region = app.screen.query_one(f"#{pane}").region
    line = app.screen._compositor.render_strips()[region.y].crop(region.x, region.x + region.width)
    return line.text, "".join(s.text for s in line if s.style is not None and s.style.reverse).strip()


def marked(app: EvoKernelApp) -> list[str]:
    """The panes drawn as the focused one."""
    out = []
    for pane in PANES:
        border, reversed_text = top_line(app, pane)
        title = str(app.screen.query_one(f"#{pane}").border_title)
        if "━" in border and reversed_text == title:
            out.append(pane)
        else:
            assert "━" not in border and not reversed_text, (pane, border, reversed_text)
    return out


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("theme", THEME_NAMES)
async def test_the_focused_pane_shows_it_and_tab_moves_it(tmp_path, theme, size):
    app = EvoKernelApp(StaticSession(tmp_path / "session"), theme_name=theme, watch_file=False)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        assert app.focused is app.screen.query_one("#gates")
        assert marked(app) == ["gates"]
        await pilot.press("tab")
        await pilot.pause()
        assert marked(app) == ["memories"]
        await pilot.press("tab")
        await pilot.pause()
        assert marked(app) == ["activity"]
        await pilot.press("tab")  # on into the editor: the kernel pane says the letters now go there
        await pilot.pause()
        assert app.focused is app.screen.query_one("#kernel-editor") and marked(app) == ["kernel"]
        await pilot.press("escape")  # out of the editor: the kernel pane no longer claims the keys
        await pilot.pause()
        holder = [p for p in PANES if app.focused is not None and app.screen.query_one(f"#{p}") in
                  (app.focused, *app.focused.ancestors)]
        assert "kernel" not in holder and marked(app) == holder
