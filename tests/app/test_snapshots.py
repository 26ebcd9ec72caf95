"""The main layout in each theme at 80×24 and 120×40, from a frozen session (stable across runs)."""

from __future__ import annotations

import pytest
from support import StaticSession

from evokernel_tui.app import EvoKernelApp
from evokernel_tui.themes import THEME_NAMES

SIZES = [(80, 24), (120, 40)]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("theme", THEME_NAMES)
def test_main_layout(snap_compare, tmp_path, theme, size):
    app = EvoKernelApp(StaticSession(tmp_path / "session"), theme_name=theme, watch_file=False)

    async def settle(pilot):
        await pilot.pause()
        await pilot.pause(0.1)

    assert snap_compare(app, terminal_size=size, run_before=settle)


# alone (tests/conftest.py): the picture depends on when the editor's focus and cursor settle; beside another
# worker's verification it came out with the cursor drawn (session 15, under -n 2), as on a loaded machine before
@pytest.mark.alone
def test_manual_mode_layout(snap_compare, tmp_path):
    app = EvoKernelApp(StaticSession(tmp_path / "session", manual=True), theme_name="dark", watch_file=False)

    async def steady_cursor(pilot):
        # manual mode focuses the kernel editor once the session has loaded, and its cursor blinks: the
        # picture depended on the moment it was taken (it failed on a loaded machine); focused, with a
        # steady cursor, it is the same picture every time
        from textual.widgets import TextArea

        # The editor takes focus once the session has loaded. On a loaded machine (load 5-8, fresh clone) the focus
        # had not arrived in 10 s, and once (full suite, session 20) the picture lacked the cursor though the
        # editor had been focused: what the picture is for is the layout, so the editor is focused here and
        # the picture waits until it has held the focus over several pauses (a late focus change is seen)
        steady = 0
        for _ in range(200):
            editor = next(iter(app.screen.query("#kernel-editor")), None)  # there once the screen is composed
            if editor is None:
                await pilot.pause(0.05)
                continue
            if app.focused is editor:
                steady += 1
                if steady >= 3:
                    break
            else:
                steady = 0
                if _ >= 20:  # a second for the app to focus it itself; then the test does
                    editor.focus()
            await pilot.pause(0.05)
        for area in app.screen.query(TextArea):  # the main screen's (`app.query` reads the default screen)
            area.cursor_blink = False  # set once the editor exists: set before, it missed it on a loaded machine
            # with a steady cursor TextArea's line cache is keyed without the cursor: a line drawn before the
            # focus came is served again without it (the session 20 failure). Textual has no public way to
            # drop the cache; a missing attribute fails here, not as a picture that differs now and then
            area._line_cache.clear()
            area.refresh()
        await pilot.pause()
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=(120, 40), run_before=steady_cursor)
