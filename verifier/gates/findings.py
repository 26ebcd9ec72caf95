"""The anti-hacking gate's two halves joined: the dynamic gate with the trusted audits' findings
added, and a passing static and dynamic gate merged into one. Both rebuild `Violation`s from a gate's
detail dicts (`violations_from`).
"""

from __future__ import annotations

import time

from verifier.gates.evidence import AntiHackingGate, reported_reason
from verifier.policy.static_scan import Violation
from verifier.result import FAIL, GateResult


def violations_from(details: list[dict]) -> list[Violation]:
    """The `Violation`s a gate's detail lists (`reported`, `violations`: each `Violation.to_dict()`)."""
    return [Violation(str(v["rule"]), int(v.get("line", 0)), str(v.get("message", ""))) for v in details]


def _with_findings(hack: AntiHackingGate, dyn: GateResult, findings: list[tuple[str, str]]) -> GateResult:
    """The dynamic gate with the trusted audits' findings added, judged under the same policy."""
    violations = [Violation(rule, 0, msg) for rule, msg in findings]
    if dyn.status == FAIL:
        dyn.detail.setdefault("violations", []).extend(v.to_dict() for v in violations if hack.policy.refuses(v.rule))
        dyn.detail.setdefault("reported", []).extend(v.to_dict() for v in violations if not hack.policy.refuses(v.rule))
        return dyn
    earlier = violations_from(dyn.detail.get("reported", []))
    rest = {k: v for k, v in dyn.detail.items() if k not in ("reported", "policy")}
    return hack._judge(time.monotonic() - dyn.seconds, [*earlier, *violations], **rest)


def _merge_passes(static: GateResult, dyn: GateResult, policy) -> None:
    """One passing anti-hacking gate from its static and dynamic halves: every reported rule of both."""
    reported = [*static.detail.get("reported", []), *dyn.detail.get("reported", [])]
    static.detail.update(dyn.detail)
    if reported:
        static.detail["reported"] = reported
        static.reason = reported_reason(violations_from(reported), policy)
