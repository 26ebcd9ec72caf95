"""Test doubles for loop tests: kernels that carry their verdict, and a verifier that reads it.

A candidate containing `# verdict: feasible 0.5` verifies as feasible at 0.5 ms; `# verdict:
compile_fail`, `incorrect` and `hack_fail` fail at the matching gate. That keeps loop tests fast
and lets each test choose exactly what the verifier says.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from verifier.result import GATE_ORDER, GateResult, VerificationResult

REFERENCE_MS = 1.0
_FAILING_GATE = {"hack_fail": "anti_hacking", "compile_fail": "compile", "incorrect": "correctness"}
DETAIL = {
    "anti_hacking": {"rule": "calls the reference op", "line": 7},
    "compile": {"diagnostics": ["kernel.cpp:3: error: expected ';'"]},
    "correctness": {"mismatch": "max abs diff 0.3 at [0, 5]", "max_abs": 0.3, "max_rel": 0.2},
}


def kernel(verdict: str, ms: float | None = None, tag: str = "") -> str:
    tail = f" {ms}" if ms is not None else ""
    return f"import torch\n\n\nclass ModelNew(torch.nn.Module):\n    # verdict: {verdict}{tail}\n    # {tag}\n    pass\n"


def reply(verdict: str, ms: float | None = None, tag: str = "") -> str:
    return f"Plan: do the obvious thing.\n\n```python\n{kernel(verdict, ms, tag)}```\n"


def fake_verify(reference_source, candidate_source, backend="cpu", config=None, on_gate=None, calls=None,
                before_gate=None):
    """The verdict the kernel's `# verdict:` comment asks for; `before_gate(name)` runs as each gate starts."""
    if calls is not None:
        calls.append(candidate_source)
    m = re.search(r"# verdict: (\w+)(?: ([\d.]+))?", candidate_source)
    verdict = m.group(1) if m else "compile_fail"
    ms = float(m.group(2)) if m and m.group(2) else 1.0
    failing = _FAILING_GATE.get(verdict)
    gates, failed = [], False
    for name in GATE_ORDER:
        if failed:
            status = "skip"
        elif name == failing:
            status, failed = "fail", True
        else:
            status = "pass"
        if on_gate:
            on_gate(name, "running")
        if before_gate:
            before_gate(name)
        if on_gate:
            on_gate(name, status)
        reason = f"{name} failed on purpose" if status == "fail" else ""
        gates.append(GateResult(name, status, 0.01, reason, DETAIL.get(name, {}) if status == "fail" else {}))
    feasible = failing is None
    return VerificationResult(
        backend=backend,
        gates=gates,
        latency_ms=ms if feasible else None,
        reference_ms=REFERENCE_MS if feasible else None,
        profile=[{"name": "aten::fake", "self_ms": ms * 0.9, "calls": 1}] if feasible else [],
        device="fake-cpu",
    )


def write_replies(path: Path, replies: list) -> Path:
    path.write_text(json.dumps(replies))
    return path
