"""Replay shows what the live session showed, step by step, and never calls a model."""

from __future__ import annotations

from support import reply

from evokernel_tui.app import EvoKernelApp
from evokernel_tui.commands.tui import load_replay_events
from evokernel_tui.screens.prompts import NumberPrompt
from evokernel_tui.screens.replay import ReplayScreen
from evokernel_tui.widgets.gate_panel import GatePanel
from evokernel_tui.widgets.kernel_pane import KernelPane
from evokernel_tui.widgets.mode_banner import ModeBanner


def recorded(make_session):
    s = make_session([reply("compile_fail", tag="one"), reply("feasible", 0.8, tag="two"), reply("feasible", 0.5, tag="three")])
    snapshots = {}
    for _ in range(3):
        s.step()
        snapshots[s.step_no] = s.current_source
    return s, snapshots


async def test_replay_moves_through_the_timeline(make_session):
    s, sources = recorded(make_session)
    events = load_replay_events(s.path)
    app = EvoKernelApp(replay_events=events)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, ReplayScreen)
        assert screen.steps == [0, 1, 2, 3]
        assert "Replay · step 0" in str(screen.query_one(ModeBanner).render())
        await pilot.press("right")
        assert screen.query_one(KernelPane).editor.text == sources[1]
        assert screen.query_one(GatePanel).gate("compile").state == "fail"
        await pilot.press("right", "right")
        assert screen.query_one(KernelPane).editor.text == sources[3]
        await pilot.press("left")
        assert screen.query_one(KernelPane).editor.text == sources[2]
        assert screen.query_one(GatePanel).gate("compile").state == "pass"
        await pilot.press("j")
        await pilot.pause()
        assert isinstance(app.screen, NumberPrompt)
        app.screen.query_one("#prompt-input").value = "1"
        await pilot.press("enter")
        await pilot.pause()
        assert screen.step == 1 and screen.query_one(KernelPane).editor.text == sources[1]
        await pilot.press("s")  # no step binding in replay: nothing runs
        await pilot.pause()
        assert app.session is None and app.running is None


async def test_replay_matches_the_live_fold(make_session):
    """The last replay position shows the same panes as the live app did at the end."""
    s, _ = recorded(make_session)
    live = EvoKernelApp(s, watch_file=False)
    async with live.run_test(size=(120, 40)):
        live_view = live.view
    app = EvoKernelApp(replay_events=load_replay_events(s.path))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("end")
        from evokernel_tui.view import view_at

        replayed = view_at(app.screen._events, app.screen.step)
        assert replayed.source == live_view.source
        assert [(p.step, p.latency_ms, p.feasible) for p in replayed.points] == [
            (p.step, p.latency_ms, p.feasible) for p in live_view.points
        ]
        assert [g.state for g in replayed.gate_list()] == [g.state for g in live_view.gate_list()]
        assert [m.item_id for m in replayed.memories] == [m.item_id for m in live_view.memories]
