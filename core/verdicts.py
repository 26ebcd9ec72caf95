"""The verifier as the app sees it: its verdict records and the wording of its rules, through core.

The app (evokernel_tui) reaches the verifier only through core (docs/ARCHITECTURE.md; an import-linter
contract in pyproject.toml holds it). The records here (`VerificationResult`, the gate names, `VerifyConfig`)
are cheap to import; everything that would pull numpy, torch or the verifier's worker is imported only when
called, so the app's first paint pays nothing for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from verifier.config import VerifyConfig
from verifier.result import GATE_ORDER, GATE_TITLES, VerificationResult, library_line

if TYPE_CHECKING:
    from collections.abc import Sequence

    from verifier.workers.reference_worker import DISTRIBUTIONS

__all__ = ["DISTRIBUTIONS", "GATE_ORDER", "GATE_TITLES", "VerificationResult", "VerifyConfig", "compare",
           "describe_degenerate", "describe_tolerance", "isolation_unavailable_reason", "library_line",
           "probe_summary", "rule_listing"]


def __getattr__(name: str) -> Any:
    if name == "DISTRIBUTIONS":  # the input distributions a trial may draw (the reference worker's names)
        from verifier.workers.reference_worker import DISTRIBUTIONS

        return DISTRIBUTIONS
    raise AttributeError(name)


def describe_tolerance(atol: float | None, rtol: float | None, preset: str | None = None) -> str:
    """The correctness rule in force, in words (`kernelbench: fp32 atol=rtol=1e-4, fp16/bf16 1e-2`)."""
    from verifier.correctness.compare import describe_tolerance as describe

    return describe(atol, rtol, preset)


def describe_degenerate(found: Sequence[str]) -> str:
    """The trivial answers that pass a task, in words (`solved by a constant output`)."""
    from verifier.correctness.compare import describe_degenerate as describe

    return describe(found)


def probe_summary(records: list[dict]) -> str:
    """One line for the numerics probes of a verdict: those skipped or refused (all passing says nothing)."""
    from verifier.correctness.probes import summary

    return summary(records)


def rule_listing() -> list[tuple[str, str, str, str]]:
    """The anti-hacking rules as (name, stage, refused by, what it means) rows."""
    from verifier.policy.rules import listing

    return listing()


def isolation_unavailable_reason() -> str | None:
    """Why candidate kernels cannot run isolated on this machine (None when they can)."""
    from verifier.sandbox.isolation import unavailable_reason

    return unavailable_reason()


def compare(reference_source: str, source_a: str, source_b: str, backend: str = "cpu",
            config: VerifyConfig | None = None) -> dict:
    """B's paired speedup over A, both re-timed back to back on the same inputs (or {"error": one line})."""
    from verifier.api import compare as paired

    return paired(reference_source, source_a, source_b, backend=backend, config=config)
