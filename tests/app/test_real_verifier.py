"""The app over a real Session and the real CPU verifier: one C++ build, the UI live throughout."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from evokernel_tui.app import EvoKernelApp
from evokernel_tui.widgets.activity_log import ActivityLog
from evokernel_tui.widgets.kernel_pane import KernelPane

CANDIDATE = Path(__file__).resolve().parents[1] / "candidates" / "cpu" / "relu.py"


@pytest.mark.slow
@pytest.mark.skipif(not CANDIDATE.exists(), reason="no CPU relu candidate in tests/candidates")
async def test_edit_verified_by_real_verifier_while_ui_stays_live(tmp_path, store):
    from core.session import Session
    from core.tasks import load_task
    from verifier import VerifyConfig

    # the verdict cache off: the edit is really verified, so the keys below are pressed while it runs
    session = Session.create(load_task("relu"), model=None, memory=store, root=tmp_path / "sessions",
                             verify_config=VerifyConfig(use_cache=False))
    app = EvoKernelApp(session, watch_file=False)
    async with app.run_test(size=(120, 40)) as pilot:
        pane = app.screen.query_one(KernelPane)
        pane.editor.load_text(CANDIDATE.read_text())
        pane.editor.focus()
        await pilot.press("ctrl+s")
        app.screen.query_one("#gates").focus()
        toggled = presses = 0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 240
        while app.running is not None:  # keys keep working during the build
            assert loop.time() < deadline, "verification did not finish"
            before = pane.show_diff
            await pilot.press("d")
            await pilot.pause(0.2)
            presses += 1
            toggled += pane.show_diff != before
        await pilot.pause()
        assert presses > 0, "the verification finished before any key could be pressed"
        assert toggled == presses  # every key was handled while the verifier ran
        states = {g.name: g.state for g in app.view.gate_list()}
        assert states["anti_hacking"] == "pass" and states["compile"] == "pass", states
        assert states["correctness"] == "pass", app.view.gates["correctness"].reason
        assert app.view.points and app.view.points[-1].feasible
        assert session.history[-1].author == "person" and session.best is not None
        notes = session.history[-1].result.notes
        assert not any("cached verdict" in n for n in notes), notes
        assert "person's edit recorded" in "\n".join(app.screen.query_one(ActivityLog).lines)
