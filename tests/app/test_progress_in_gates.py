"""Issue 34, progress on long work in the app: while a verification runs, the Gates pane's running gate
and its title say where the work is (trial 3/8, timing round 4), as `verify` and `bench` do; the verdict
clears it. The session tells this progress but never writes it to events.jsonl."""

from __future__ import annotations

import asyncio
import json
import re
import threading

from support import reply

from evokernel_tui.app import EvoKernelApp
from evokernel_tui.widgets.gate_panel import GatePanel
from tests.fakes.verdicts import fake_verify
from verifier.result import Progress


class ProgressVerifier:
    """A verify_fn that tells `steps` of progress inside `gate` (as the real verifier does, through the third
    argument of on_gate) and then holds until released, so the test can read the pane mid-verification."""

    def __init__(self, gate: str, steps: list[Progress]):
        self.gate, self.steps = gate, steps
        self.entered, self.release = threading.Event(), threading.Event()

    def __call__(self, reference_source, candidate_source, backend="cpu", config=None, on_gate=None):
        def before_gate(name: str) -> None:
            if name == self.gate and on_gate is not None:
                for step in self.steps:
                    on_gate(name, "running", step)
                self.entered.set()
                self.release.wait(timeout=30)

        return fake_verify(reference_source, candidate_source, backend, config, on_gate, before_gate=before_gate)


def gate_text(app) -> str:
    panel = app.screen.query_one(GatePanel)
    lines = [str(panel.get_option_at_index(i).prompt) for i in range(panel.option_count)]
    return "\n".join([str(panel.border_title), *lines])


async def _mid_verification(tmp_path, store, size, gate: str, steps: list[Progress]):
    from core.llm import ScriptedModel
    from core.session import Budgets, Session
    from core.tasks import load_task

    verifier = ProgressVerifier(gate, steps)
    s = Session.create(load_task("relu"), model=ScriptedModel([reply("feasible", 0.5)]), memory=store,
                       root=tmp_path / "sessions", verify_fn=verifier, budgets=Budgets(draft_steps=1, refine_steps=1))
    return s, verifier


async def _wait(pilot, condition, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, "timed out"
        await pilot.pause(0.05)


async def test_a_running_trial_is_shown_in_its_gate_and_the_title_then_cleared_by_the_verdict(tmp_path, store):
    steps = [Progress("correctness", "trial", f"trial {k}/8", done=k, total=8) for k in (1, 2, 3)]
    s, verifier = await _mid_verification(tmp_path, store, (120, 40), "correctness", steps)
    app = EvoKernelApp(s, watch_file=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("s")
        await asyncio.get_running_loop().run_in_executor(None, verifier.entered.wait, 10)
        await _wait(pilot, lambda: app.view.gates["correctness"].progress == "trial 3/8")
        await pilot.pause(0.1)
        shown = gate_text(app)
        # the gate's own line, with the seconds it has run (issue 34: a phase line with elapsed time)
        assert re.search(r"Correctness  \d+s trial 3/8", shown), shown
        assert "Gates · v1 correctness: trial 3/8" in shown, shown   # and the pane's title
        await pilot.pause(1.2)  # the clock moves on its own while the gate runs
        later = re.search(r"Correctness  (\d+)s trial 3/8", gate_text(app))
        assert later and int(later.group(1)) >= 1, gate_text(app)
        verifier.release.set()
        await _wait(pilot, lambda: app.running is None and app.view.gates["profile"].state == "pass")
        await pilot.pause(0.1)
        shown = gate_text(app)
        assert "trial 3/8" not in shown and app.view.progress_note == "", shown
    kinds = [json.loads(line)["kind"] for line in (s.path / "events.jsonl").read_text().splitlines()]
    assert "gate" in kinds and "gate_progress" not in kinds            # told, never recorded
    s.close()


async def test_timing_rounds_fit_the_gates_pane_at_80_columns(tmp_path, store):
    steps = [Progress("latency", "round", "timing round 4 (3 kept), 1.07x [0.98, 1.16] so far", done=4, kept=3,
                      speedup=1.07, lo=0.98, hi=1.16)]
    s, verifier = await _mid_verification(tmp_path, store, (80, 24), "latency", steps)
    app = EvoKernelApp(s, watch_file=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("s")
        await asyncio.get_running_loop().run_in_executor(None, verifier.entered.wait, 10)
        await _wait(pilot, lambda: app.view.gates["latency"].progress.startswith("timing round 4"))
        await pilot.pause(0.1)
        shown = gate_text(app)
        assert re.search(r"Latency      \d+s timing round 4 \(3 kept\)", shown), shown
        verifier.release.set()
        await _wait(pilot, lambda: app.running is None)
    s.close()
