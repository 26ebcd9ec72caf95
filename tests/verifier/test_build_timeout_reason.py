"""A build that runs out of time says what the trusted side knows of why (issue 34): a cold first build in
a fresh HOME on a busy 2-core machine timed out twice with only "timed out after 300 s" — nothing said that
the machine's shared headers were being built at the same time, once, or that the load was 15."""

from __future__ import annotations

from verifier.gates.evidence import CompileGate, Evidence, build_timeout_hint
from verifier.sandbox.supervisor import SandboxOutcome


def test_the_hint_names_the_shared_builds_and_a_busy_machine():
    hint = build_timeout_hint(["pch", "bind", "pch"], load=15.2, cores=2)
    assert hint.startswith("; ") and "\n" not in hint
    assert "the precompiled header and the Python bindings for a new signature" in hint
    assert "once per machine" in hint and "scripts/setup.sh" in hint
    assert "busy (load 15.2 on 2 cores)" in hint


def test_a_quiet_machine_with_warm_shared_parts_adds_nothing():
    assert build_timeout_hint([], load=0.5, cores=2) == ""


def test_the_compile_gate_says_it_for_a_build_that_timed_out():
    outcome = SandboxOutcome(exit_code=None, signal=9, timed_out=True, seconds=300.2)
    ev = Evidence(source="", backend="cpu", config=None, candidate={"phase": "build", "shared_builds": ["pch"]},
                  outcome=outcome, marks=[(0.0, {"phase": "build"})])
    res = CompileGate().evaluate(ev)
    assert res.status == "fail"
    assert "timed out after 300.2 s" in res.reason and "building the precompiled header" in res.reason, res.reason
    crashed = Evidence(source="", backend="cpu", config=None, candidate={"phase": "build", "shared_builds": ["pch"]},
                       outcome=SandboxOutcome(exit_code=None, signal=11, timed_out=False, seconds=3.0),
                       marks=[(0.0, {"phase": "build"})])
    assert "precompiled header" not in CompileGate().evaluate(crashed).reason  # only a timeout gets the hint
