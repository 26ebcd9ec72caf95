"""The live app, its replay and the session agree after a person's faster edit is accepted while a
refinement is pending: nobody shows the stale pending refinement (one fold, core.events.apply)."""

from __future__ import annotations

import asyncio

from support import kernel, reply

from core.events import fold, read_events
from evokernel_tui.app import EvoKernelApp
from evokernel_tui.view import view_at
from evokernel_tui.widgets.kernel_pane import KernelPane


async def _settle(app, pilot, timeout=10.0):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    await pilot.pause()
    while app.running is not None or any(w.is_running for w in app.workers):
        assert loop.time() < deadline, f"still running: {app.running}"
        await pilot.pause(0.05)
    await pilot.pause()


async def test_faster_edit_while_pending_live_replay_and_session_agree(make_session):
    s = make_session([reply("feasible", 1.0), reply("feasible", 0.5, "model")], draft=1, refine=2)
    app = EvoKernelApp(s, watch_file=False)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(2):
            await pilot.press("s")
            await _settle(app, pilot)
        assert s.pending is not None and app.view.pending == s.pending.source
        pane = app.screen.query_one(KernelPane)
        pane.editor.load_text(kernel("feasible", 0.25, "person"))
        pane.editor.focus()
        await pilot.press("ctrl+s")
        await _settle(app, pilot)
        live = app.view
        assert s.best.author == "person" and s.pending is None
        assert live.pending is None and live.best_version == s.best.version == live.state.best_version
        assert live.state == fold(read_events(s.path))  # the live view folded exactly what was recorded
    events = read_events(s.path)
    replayed = view_at(events, events[-1].step)
    assert replayed.pending is None and replayed.best_version == s.best.version
    assert replayed.source == live.source == s.current_source
