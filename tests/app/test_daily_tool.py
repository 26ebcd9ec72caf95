"""Issue 14: the app as a kernel engineer's daily tool — the bugs found in use, each driven through Pilot."""

from __future__ import annotations

import asyncio
import threading

from support import reply
from test_controls import SIZE, app_for, log_text, settle

from evokernel_tui.widgets.gate_panel import GatePanel
from verifier.result import GATE_ORDER, GateResult, VerificationResult


class CandidateSaysPass:
    """A verify_fn whose candidate reports every phase as passed before the parent's verdict says
    correctness failed: the order in which the real verifier's progress marks and verdict arrive."""

    def __init__(self) -> None:
        self.reported = threading.Event()
        self.release = threading.Event()

    def __call__(self, reference_source, candidate_source, backend="cpu", config=None, on_gate=None):
        for name in ("anti_hacking", "compile", "correctness"):
            on_gate(name, "running")
            on_gate(name, "pass")  # the candidate's own progress report, not a verdict
        self.reported.set()
        self.release.wait(10)
        gates = [GateResult("anti_hacking", "pass", 0.01), GateResult("compile", "pass", 0.5),
                 GateResult("correctness", "fail", 0.2, "max abs error 0.5 at [3]", {"mismatch": "[3]"}),
                 GateResult("latency", "skip", 0.0), GateResult("profile", "skip", 0.0)]
        for g in gates:
            on_gate(g.name, g.status)
        return VerificationResult(backend="cpu", gates=gates, source_hash="x")


async def test_gate_shows_pass_only_once_the_verdict_arrives(make_session):
    s = make_session([reply("incorrect")])
    fake = CandidateSaysPass()
    s.verify_fn = fake
    app = app_for(s)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("s")
        await asyncio.get_running_loop().run_in_executor(None, fake.reported.wait, 10)
        await pilot.pause(0.1)
        panel = app.screen.query_one(GatePanel)
        assert panel.gate("correctness").state == "checking", "a candidate-reported pass is painted as pass"
        assert all(g.state != "pass" for g in panel._gates)
        fake.release.set()
        await settle(app, pilot)
        assert panel.gate("correctness").state == "fail"
        assert panel.gate("compile").state == "pass"
        assert [g.name for g in panel._gates] == list(GATE_ORDER)


async def test_run_stops_at_a_pending_refinement_and_keeps_it(make_session):
    """A faster pending refinement is never silently replaced by a later, slower one."""
    insight = "Fewer passes over memory."  # accepting asks the model to distil an insight
    s = make_session([reply("feasible", 30.0), reply("feasible", 20.4, "faster"), insight, reply("feasible", 32.3, "slower")], draft=2, refine=4)
    app = app_for(s)
    async with app.run_test(size=SIZE) as pilot:
        app.run_steps(3)
        await settle(app, pilot)
        assert s.pending is not None and s.pending.latency_ms == 20.4
        assert s.used["refine"] == 1, "the run went on past a pending refinement"
        text = log_text(app)
        assert "Run stopped after 2 of 3 steps: the refinement v2 (20.4 ms) is pending" in text
        assert "refining from the best kernel v1 (30 ms)" in text
        await pilot.press("s")
        await settle(app, pilot)
        assert s.used["refine"] == 1 and s.pending.version == 2
        assert "A step refused: the refinement v2 (20.4 ms) is pending" in log_text(app)
        await pilot.press("a")
        await settle(app, pilot)
        assert s.best.version == 2 and s.pending is None
        await pilot.press("s")
        await settle(app, pilot)
        assert s.used["refine"] == 2 and s.history[-1].latency_ms == 32.3
        assert s.best.version == 2 and s.pending is None  # 32.3 ms is no improvement on 20.4 ms
