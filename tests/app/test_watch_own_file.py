"""Issue 34: `tui --watch path/to/kernel.py` (as aider's --watch-files): a kernel file in the person's own
repository is watched beside the session's copy; its content and each save are verified and credited as
the person's edit, and the model's kernels never write into it."""

from __future__ import annotations

import asyncio
import os

import pytest
from support import kernel, reply
from test_controls import settle

from evokernel_tui.app import EvoKernelApp


async def _wait_for(pilot, app, condition, what: str, timeout: float = 8.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, what
        await pilot.pause(0.05)
    await settle(app, pilot)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_a_watched_file_of_ones_own_is_credited_as_ones_edits(make_session, verifier, tmp_path, size):
    mine = tmp_path / "repo" / "my_kernel.py"
    mine.parent.mkdir()
    mine.write_text(kernel("feasible", 0.9, "mine at launch"))
    s = make_session([reply("feasible", 1.0)])
    app = EvoKernelApp(s, watch_file=True, debounce=0.1, watch_path=mine)
    async with app.run_test(size=size) as pilot:
        # the file's content at launch is the person's first edit
        await _wait_for(pilot, app, lambda: any(a.author == "person" for a in s.history), "launch content not taken")
        assert "mine at launch" in s.history[-1].source
        assert f"Watching {mine}" in "\n".join(app.activity.lines)
        await pilot.press("s")  # a model step writes the session's copy, never the person's file
        await settle(app, pilot)
        assert "mine at launch" in mine.read_text()
        tmp = mine.with_name(".my_kernel.py.swp")  # a vim-style save: temp file renamed over it
        tmp.write_text(kernel("feasible", 0.6, "saved in my repo"))
        os.replace(tmp, mine)
        await _wait_for(pilot, app, lambda: sum(a.author == "person" for a in s.history) == 2, "save not picked up")
        person = [a for a in s.history if a.author == "person"]
        assert "saved in my repo" in person[-1].source
        assert f"Picked up a save of {mine} from disk" in "\n".join(app.activity.lines)
        await asyncio.sleep(0.4)  # the session's own writes of current_kernel.py are not edits
        await settle(app, pilot)
        assert sum(a.author == "person" for a in s.history) == 2


def test_watch_needs_a_file_that_exists(tmp_path, monkeypatch):
    from click.testing import CliRunner

    import evokernel_tui.app
    from evokernel_tui.cli import cli

    def no_app(self, *a, **k):
        raise AssertionError("the full-screen app started")

    monkeypatch.setattr(evokernel_tui.app.EvoKernelApp, "run", no_app)
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(cli, ["tui", "relu", "--no-memory", "--watch", str(tmp_path / "nope.py")])
    assert res.exit_code == 1
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and "--watch" in lines[0] and "no such file" in lines[0], res.output
    assert not (tmp_path / "sessions").exists()
