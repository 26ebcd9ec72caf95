"""Multi-gate verifier: anti-hacking, compile, correctness, latency, profile. Imports neither memory nor the app.

Heavy modules (torch, numpy) are imported only when `verify` runs, so importing this package is cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from verifier.config import VerifyConfig
from verifier.result import GATE_ORDER, GATE_TITLES, GateResult, Progress, VerificationResult

if TYPE_CHECKING:
    from verifier.api import VerifierError, verify


def __getattr__(name: str):
    if name in {"verify", "VerifierError", "reference_run"}:
        from verifier import api

        return getattr(api, name)
    raise AttributeError(name)


__all__ = ["GATE_ORDER", "GATE_TITLES", "GateResult", "Progress", "VerificationResult", "VerifierError", "VerifyConfig", "verify"]
