"""Every control of the live screen, driven by keys through Pilot against a real Session.

The session runs a scripted model and `VerdictVerifier` (kernels carry their verdict), so each test
decides what the gates find without a C++ build; `test_real_verifier.py` covers the real one.
"""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap

from support import kernel, reply

from evokernel_tui.app import EvoKernelApp
from evokernel_tui.screens.detail import GateDetailScreen, MemoryDetailScreen
from evokernel_tui.screens.prompts import NumberPrompt, PathPrompt
from evokernel_tui.screens.task_picker import TaskPickerScreen
from evokernel_tui.themes import load_theme_name
from evokernel_tui.widgets.activity_log import ActivityLog
from evokernel_tui.widgets.gate_panel import GatePanel
from evokernel_tui.widgets.kernel_pane import KernelPane
from evokernel_tui.widgets.memory_table import MemoryTable
from evokernel_tui.widgets.mode_banner import ModeBanner

SIZE = (120, 40)


async def settle(app: EvoKernelApp, pilot, timeout: float = 10.0) -> None:
    """Wait until no session call runs and every message it posted has been handled."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    await pilot.pause()
    while app.running is not None or any(w.is_running for w in app.workers):
        assert loop.time() < deadline, f"still running: {app.running}"
        await pilot.pause(0.05)
    await pilot.pause()


def log_text(app: EvoKernelApp) -> str:
    return "\n".join(app.screen.query_one(ActivityLog).lines)


def app_for(session, **kw) -> EvoKernelApp:
    return EvoKernelApp(session, watch_file=kw.pop("watch_file", False), **kw)


async def test_step_fills_every_pane(make_session):
    s = make_session([reply("feasible", 0.5)])
    app = app_for(s)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("s")
        await settle(app, pilot)
        assert s.best is not None and s.best.version == 1
        assert app.screen.query_one(KernelPane).editor.text == s.current_source
        assert [g.state for g in app.view.gate_list()] == ["pass"] * 5
        table = app.screen.query_one(MemoryTable)
        assert table.row_count == len(s.retrieved) > 0
        assert app.view.points and app.view.points[0].latency_ms == 0.5 and app.view.points[0].feasible
        assert "kernel v1 from model" in log_text(app)
        assert app.view.stage == "refine"


async def test_failed_gate_detail_shows_diagnostics(make_session):
    s = make_session([reply("compile_fail")])
    app = app_for(s)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("s")
        await settle(app, pilot)
        gates = app.screen.query_one(GatePanel)
        assert gates.gate("compile").state == "fail"
        gates.focus()
        gates.highlighted = 1
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, GateDetailScreen)
        body = str(app.screen.query_one(".modal-body").render())
        assert "C++ line 3: error: expected ';'" in body
        await pilot.press("escape")
        assert not isinstance(app.screen, GateDetailScreen)


async def test_memory_values_update_in_place_with_delta(make_session):
    s = make_session([reply("feasible", 0.5)])
    app = app_for(s)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("s")
        await settle(app, pilot)
        changed = [m for m in app.view.memories if m.delta1 is not None]
        assert changed, "a draft reward should move Q1 of the memories on screen"
        table = app.screen.query_one(MemoryTable)
        cell = str(table.get_cell(changed[0].item_id, "q1"))
        delta = changed[0].delta1
        assert cell.endswith(("▲" if delta > 0 else "▼") + f"{abs(delta):.2f}".removeprefix("0"))
        table.focus()
        table.move_cursor(row=0)
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, MemoryDetailScreen)


async def test_second_step_is_refused_while_one_runs_and_ui_stays_live(make_session, verifier):
    s = make_session([reply("feasible", 0.5), reply("feasible", 0.4)])
    hold = verifier.block()
    app = app_for(s)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("s")
        await asyncio.get_running_loop().run_in_executor(None, verifier.entered.wait, 10)
        await pilot.pause()
        assert app.view.gates["compile"].state == "running"
        await pilot.press("s")
        await pilot.pause()
        assert "Refused: step not started while step is still running" in log_text(app)
        await pilot.press("d")  # keys still work mid-build
        await pilot.pause()
        assert app.screen.query_one(KernelPane).show_diff
        hold.set()
        await settle(app, pilot)
        assert len(verifier.calls) == 1 and s.used["draft"] == 1


async def test_run_n_steps_and_pause(make_session, verifier):
    s = make_session([reply("compile_fail"), reply("incorrect"), reply("feasible", 0.7)], draft=3)
    app = app_for(s)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("n")
        await pilot.pause()
        assert isinstance(app.screen, NumberPrompt)
        app.screen.query_one("#prompt-input").value = "3"
        await pilot.press("enter")
        await settle(app, pilot)
        assert s.used["draft"] == 3 and s.best is not None

    s2 = make_session([reply("compile_fail"), reply("incorrect"), reply("feasible", 0.7)], draft=3)
    hold = verifier.block()
    app = app_for(s2)
    async with app.run_test(size=SIZE) as pilot:
        app.calls.run_steps(3)
        await asyncio.get_running_loop().run_in_executor(None, verifier.entered.wait, 10)
        await pilot.press("p")
        hold.set()
        await settle(app, pilot)
        assert s2.used["draft"] == 1
        assert "Pausing after the current step" in log_text(app)


async def test_accept_and_reject_pending_refinement(make_session):
    insight = "Clamp in place: one pass over memory."  # accepting asks the model to distil an insight
    s = make_session([reply("feasible", 1.0), reply("feasible", 0.5, "faster"), insight, reply("feasible", 0.4, "fastest")])
    app = app_for(s)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("a")
        await pilot.pause()
        assert "No refinement is pending" in log_text(app)
        await pilot.press("s")
        await settle(app, pilot)
        await pilot.press("s")
        await settle(app, pilot)
        assert s.pending is not None and app.view.pending == s.pending.source
        await pilot.press("d")
        await pilot.pause()
        pane = app.screen.query_one(KernelPane)
        assert "+++ pending refinement" in pane.diff_text()
        await pilot.press("a")
        await settle(app, pilot)
        assert s.pending is None and s.best.version == 2
        await pilot.press("s")
        await settle(app, pilot)
        assert s.pending is not None
        await pilot.press("r")
        await settle(app, pilot)
        assert s.pending is None and s.best.version == 2
        assert app.screen.query_one(KernelPane).editor.text == s.best.source
        assert "rejected v3" in log_text(app)


async def test_reverify_and_switch_stage(make_session, verifier):
    s = make_session([reply("feasible", 0.5)])
    app = app_for(s)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("v")
        await settle(app, pilot)
        assert "no kernel to verify" in log_text(app)
        await pilot.press("s")
        await settle(app, pilot)
        await pilot.press("v")
        await settle(app, pilot)
        assert len(verifier.calls) == 2
        assert "reverified: feasible" in log_text(app)
        assert s.stage == "refine"
        await pilot.press("g")
        await settle(app, pilot)
        assert s.stage == "draft" and app.view.stage == "draft"


async def test_type_in_kernel_pane_and_submit(make_session, verifier):
    s = make_session([])
    app = app_for(s)
    async with app.run_test(size=SIZE) as pilot:
        pane = app.screen.query_one(KernelPane)
        pane.editor.focus()
        pane.editor.load_text(kernel("feasible", 0.9, "typed"))
        await pilot.press("ctrl+s")
        await settle(app, pilot)
        assert s.history[-1].author == "person" and "typed" in s.history[-1].source
        assert "person's edit recorded" in log_text(app)


async def test_manual_mode_starter_can_be_submitted_as_is(make_session, verifier):
    """A manual session opens on a starter kernel; ctrl+s verifies it unchanged (nothing else to run yet)."""
    s = make_session(None)
    app = app_for(s)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        pane = app.screen.query_one(KernelPane)
        assert "class ModelNew" in pane.editor.text and not pane.edited
        pane.editor.focus()
        await pilot.press("ctrl+s")
        await settle(app, pilot)
        assert len(verifier.calls) == 1 and s.history[-1].author == "seed"  # the starter's, not the person's
        assert "Verifying the starter kernel as written" in log_text(app)
        assert pane.border_title == "Kernel · seed"
        await pilot.press("ctrl+s")
        await settle(app, pilot)
        assert len(verifier.calls) == 1, "once verified, an unchanged kernel is not submitted again"


async def test_edit_in_editor_reverifies_once(make_session, verifier, tmp_path, monkeypatch):
    script = tmp_path / "fake_editor.py"
    script.write_text(textwrap.dedent(f"""
        import sys, pathlib
        pathlib.Path(sys.argv[1]).write_text({kernel("feasible", 0.8, "from editor")!r})
    """))
    monkeypatch.setenv("EDITOR", f"{sys.executable} {script}")
    monkeypatch.delenv("VISUAL", raising=False)
    s = make_session([reply("feasible", 1.0)])
    app = EvoKernelApp(s, watch_file=True, debounce=0.1)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("s")
        await settle(app, pilot)
        await pilot.press("e")
        await settle(app, pilot)
        await asyncio.sleep(0.6)  # give the watcher time to (not) report the editor's save
        await settle(app, pilot)
        edits = [a for a in s.history if a.author == "person"]
        assert len(edits) == 1 and "from editor" in edits[0].source
        assert len(verifier.calls) == 2


async def test_save_on_disk_is_picked_up_and_credited(make_session, verifier):
    s = make_session([reply("feasible", 1.0)])
    app = EvoKernelApp(s, watch_file=True, debounce=0.1)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("s")
        await settle(app, pilot)
        await asyncio.sleep(0.5)  # the session's own write of the kernel file must not count
        await settle(app, pilot)
        assert len(verifier.calls) == 1
        tmp = s.kernel_path.with_name(".current_kernel.py.swp")
        tmp.write_text(kernel("feasible", 0.6, "saved from vim"))
        os.replace(tmp, s.kernel_path)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 5
        while not any(a.author == "person" for a in s.history):
            assert loop.time() < deadline, "the save was not picked up"
            await pilot.pause(0.05)
        await settle(app, pilot)
        await asyncio.sleep(0.5)
        await settle(app, pilot)
        assert len(verifier.calls) == 2
        assert "Picked up a save of current_kernel.py" in log_text(app)
        assert any(c for c in app.view.memories if c.delta2 is not None or c.delta1 is not None)


async def test_manual_mode_banner_and_refusal(make_session, verifier):
    s = make_session(None)
    app = app_for(s)
    async with app.run_test(size=SIZE) as pilot:
        banner = app.screen.query_one(ModeBanner)
        assert banner.display and "no model configured" in str(banner.render())
        await settle(app, pilot)
        await pilot.press("escape")  # manual mode starts in the editor; esc leaves it for the keys
        await pilot.press("s")
        await pilot.press("n")
        await pilot.pause()
        assert not isinstance(app.screen, NumberPrompt)
        assert "A step needs a model" in log_text(app) and not s.history
        app.submit_edit(kernel("feasible", 0.9), "test")
        await settle(app, pilot)
        await pilot.press("v")
        await settle(app, pilot)
        assert len(verifier.calls) == 2


async def test_export_writes_the_current_kernel(make_session, tmp_path):
    s = make_session([reply("feasible", 0.5)])
    app = app_for(s)
    target = tmp_path / "out" / "relu_best.py"
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("s")
        await settle(app, pilot)
        await pilot.press("x")
        await pilot.pause()
        assert isinstance(app.screen, PathPrompt)
        app.screen.query_one("#prompt-input").value = str(target)
        await pilot.press("enter")
        await pilot.pause()
        assert target.read_text() == s.current_source


async def test_open_task_switches_session(make_session):
    first = make_session([reply("feasible", 0.5)])
    opened: list[str | None] = []

    def opener(name):
        opened.append(name)
        return make_session([], task=name)

    app = EvoKernelApp(first, open_session=opener, watch_file=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("o")
        await pilot.pause()
        assert isinstance(app.screen, TaskPickerScreen)
        app.screen.query_one("#task-input").value = "gelu"
        await pilot.press("enter")
        await settle(app, pilot)
        await pilot.pause(0.2)
        assert opened == ["gelu"] and app.session is not first
        assert app.view.task == "gelu"


async def test_theme_switch_is_remembered(make_session):
    s = make_session([])
    app = app_for(s, theme_name="dark")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("t")
        await pilot.pause()
        assert app.theme == "evokernel-light" and app.has_class("-theme-evokernel-light")
    assert load_theme_name() == "light"
    again = app_for(s)
    async with again.run_test(size=SIZE):
        assert again.theme == "evokernel-light"


async def test_every_control_is_in_the_command_palette(make_session):
    s = make_session([])
    app = app_for(s)
    async with app.run_test(size=SIZE):
        titles = {c.title for c in app.get_system_commands(app.screen)}
    for title in ("Step", "Run N steps", "Pause", "Accept refinement", "Reject refinement", "Reverify",
                  "Edit in $EDITOR", "Switch stage", "Open task", "Save kernel", "Switch theme", "Toggle diff"):
        assert title in titles


async def test_u_marks_a_memory_used_and_only_it_is_credited_for_an_edit(make_session, verifier):
    """Person credit: `u` on the memories pane marks the highlighted memory; a person's edit then
    credits that memory alone (none is credited by default)."""
    s = make_session([reply("feasible", 0.5)])
    app = app_for(s)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("s")
        await settle(app, pilot)
        table = app.screen.query_one(MemoryTable)
        first = app.view.memories[0].item_id
        table.focus()
        table.move_cursor(row=0)
        await pilot.press("u")
        await settle(app, pilot)
        assert dict(s.state.marked) == {first: True}
        assert app.view.memories[0].used and str(table.get_cell(first, "kind")).startswith("✓")
        await pilot.press("u")
        await settle(app, pilot)
        assert dict(s.state.marked) == {first: False}
        assert not app.view.memories[0].used
        await pilot.press("u")
        await settle(app, pilot)
        events = s.submit_human_edit(kernel("feasible", 0.4, tag="mine"))
        edits = [e for e in events if e.kind == "human_edit"]
        assert edits and edits[0].data["credited"] == [first]
