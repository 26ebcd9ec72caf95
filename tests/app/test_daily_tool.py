"""Issue 14: the app as a kernel engineer's daily tool — the bugs found in use, each driven through Pilot."""

from __future__ import annotations

import asyncio
import threading

from support import reply
from test_controls import SIZE, app_for, settle

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
