"""Issue 32's "one door": the command line, a session and a bench's jobs reach the verifier through
`core.verifying.verify_sources`, so their verdicts carry the same words (before, only the command line added
the tolerance text and the policy: session and bench verdicts lacked them)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import verifier.api
from core.executors import verify_job
from core.session.models import default_verify
from core.tasks import Task
from core.verifying import verify_task
from verifier import VerificationResult, VerifyConfig

ROOT = Path(__file__).resolve().parents[2]
DOOR = ROOT / "core" / "verifying.py"


def test_only_the_door_imports_the_verifiers_verify():
    """No other module of core or the app imports `verify` from the verifier (a new caller would open a
    second door whose verdicts lack what the door adds)."""
    found = []
    for package in ("core", "evokernel_tui"):
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if (isinstance(node, ast.ImportFrom) and node.module in ("verifier", "verifier.api")
                        and any(alias.name == "verify" for alias in node.names)):
                    found.append(str(path.relative_to(ROOT)))
    assert found == [str(DOOR.relative_to(ROOT))], found


@pytest.fixture
def bare_verdicts(monkeypatch):
    """The verifier stood in by one that returns a verdict with nothing filled in, recording its calls."""
    calls = []

    def bare(reference_source, candidate_source, backend="cpu", config=None, on_gate=None):
        calls.append(config)
        return VerificationResult(backend=backend, gates=[])

    monkeypatch.setattr(verifier.api, "verify", bare)
    return calls


@pytest.mark.parametrize("door", ["command line", "session", "bench job"])
def test_every_caller_gets_the_same_completed_verdict(bare_verdicts, door):
    config = VerifyConfig(policy="kernelbench", degenerate=["zeros"])
    task = Task(name="t", level=1, category="", description="", source="class Model: pass\n")
    if door == "command line":
        result = verify_task(task, "src", "cpu", config)
    elif door == "session":
        result = default_verify(task.source, "src", "cpu", config)
    else:
        result = verify_job(task.source, "src", "cpu", config)
    assert bare_verdicts, "the stand-in verifier was not called"
    assert "atol" in result.tolerance, result.tolerance
    assert result.policy and result.policy.get("preset") == "kernelbench", result.policy
    assert result.degenerate == ["zeros"]
