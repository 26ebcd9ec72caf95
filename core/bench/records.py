"""The records of a bench run: one `TaskOutcome` per task (built from its kernels' verdicts) and one
`LevelSummary` per report row, and the `BenchError` every bench module raises.

Kept apart so the metrics, the bench file and the runner share one definition of what a task achieved;
a record round-trips through `bench.json` with `to_dict` / `from_dict`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, cast

from verifier.result import VerificationResult

GPU_BACKENDS = ("cuda", "triton")


def verdict_device(result: VerificationResult | None) -> str:
    """Where a verdict was measured, for bench.json: "cpu" for the CPU backend, else the GPU's name and the
    card as the verifying worker saw it ("NVIDIA H100 80GB HBM3 · GPU 1 (GPU-…)"); "" without a verdict."""
    if result is None:
        return ""
    if result.backend not in GPU_BACKENDS:
        return "cpu"
    parts = [p for p in (result.device.strip(), result.device_id.strip()) if p]
    return " · ".join(parts)


def short_device(label: str) -> str:
    """The card part of a `verdict_device` label ("GPU 1", a UUID or MIG id, "cpu"), for narrow tables."""
    if not label:
        return ""
    card = label.rsplit(" · ", 1)[-1]
    return card.split(" (", 1)[0] if card.startswith("GPU ") else card


class BenchError(Exception):
    """A bench that cannot start or continue; the message is one line saying what to do."""


@dataclass
class TaskOutcome:
    """What one task's session achieved: the record every metric is computed from."""

    task: str
    level: int
    compiled: bool = False
    feasible: bool = False
    speedup: float | None = None
    speedup_vs_compile: float | None = None
    first_feasible_ms: float | None = None
    best_ms: float | None = None
    tokens: int = 0
    cost: float | None = 0.0
    category: str = ""
    kernels: int = 0
    session: str = ""
    seconds: float = 0.0
    device: str = ""
    #: where each kernel was verified, in the order written (`verdict_device`: "cpu", or the GPU's name and
    #: the card as the verifying worker saw it); "" for a kernel with no verdict
    devices: list[str] = field(default_factory=list)
    #: where the best kernel (the one `speedup` is of) was verified
    best_device: str = ""
    error: str = ""
    skipped: str = ""
    rejected: int = 0
    compile_failed: int = 0
    #: retrieval slots filled in this task's session, and those chosen by value that similarity's top-k
    #: would not have chosen (from the `retrieved` events)
    slots: int = 0
    value_slots: int = 0
    #: feasible refinements after the first feasible draft (the paper's refine median counts tasks with one)
    feasible_refinements: int = 0
    #: 1-based kernel index of the first kernel that compiled / was correct (None: never)
    first_compiled_at: int | None = None
    first_feasible_at: int | None = None
    #: the verifier marked the best kernel's timing noisy: its speedup is shown as such and is not counted as
    #: faster in fast_p (a noisy figure is not a claim of faster)
    noisy: bool = False
    #: speed of light (issue 35): the best kernel's share of the machine's measured memory bandwidth, and the
    #: eager reference's on the same calls; None without a figure, a peak, or where the timing was noisy
    bandwidth_fraction: float | None = None
    reference_bandwidth_fraction: float | None = None
    #: the 95% interval of the best kernel's paired speedup over eager (None: not timed, or an old bench.json):
    #: shown beside the speedup and used by `bench compare` to say when a difference is within noise
    speedup_lo: float | None = None
    speedup_hi: float | None = None

    @property
    def speedup_interval(self) -> tuple[float, float] | None:
        if self.speedup_lo is None or self.speedup_hi is None:
            return None
        return self.speedup_lo, self.speedup_hi

    @property
    def status(self) -> str:
        """correct, incorrect, did not compile, rejected by anti-hacking, no kernel, skipped (reason), or error: ..."""
        if self.error:
            return f"error: {self.error}"
        if self.skipped:
            return f"skipped ({self.skipped})"
        if self.feasible:
            return "correct"
        if self.compiled:
            return "incorrect"
        if self.kernels and self.rejected == self.kernels:
            return "rejected by anti-hacking"
        return "did not compile" if self.kernels else "no kernel"

    @property
    def counted(self) -> bool:
        """Whether the task enters the metrics: it ran (not skipped because its reference cannot run here)."""
        return not self.error and not self.skipped

    @property
    def refine_speedup(self) -> float | None:
        """Best refined latency over the first feasible draft's latency (1.0 when refining found nothing faster)."""
        if self.feasible and self.first_feasible_ms and self.best_ms:
            return self.first_feasible_ms / self.best_ms
        return None

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TaskOutcome:
        out = cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})
        out.devices = [str(x or "") for x in (out.devices or [])]
        return out


@dataclass
class LevelSummary:
    """The report row of one level (or of all tasks, `level=None`)."""

    level: int | None
    tasks: int
    compile_rate: float
    correct_rate: float
    rejected_rate: float
    fast: dict[str, float]
    fast_vs_compile: dict[str, float] | None
    geomean_speedup: float | None
    median_refine_speedup: float | None
    tokens: int
    cost: float | None
    #: correct tasks whose speedup the verifier marked noisy (not counted in fast_p for p > 0)
    noisy: int = 0

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def best_attempt(results: Sequence[VerificationResult | None]) -> int | None:
    """Index of the kernel the headless loop ends with: the fastest feasible one, else the first feasible.

    The loop accepts the first feasible draft and then only strictly faster refinements, so this is
    the same kernel the loop accepted; replay uses it to pick the best kernel on new hardware.
    """
    feasible = [i for i, r in enumerate(results) if r is not None and r.feasible]
    if not feasible:
        return None
    timed = [i for i in feasible if cast(VerificationResult, results[i]).latency_ms is not None]
    if not timed:
        return feasible[0]
    return min(timed, key=lambda i: (cast(VerificationResult, results[i]).latency_ms, i))


def outcome_from_results(task: str, level: int, results: Sequence[VerificationResult | None], *,
                         tokens: int = 0, cost: float | None = 0.0, category: str = "", session: str = "",
                         seconds: float = 0.0, best_index: int | None = None) -> TaskOutcome:
    """A task's outcome from its kernels' results, in the order they were written. `best_index`: the
    session's accepted best kernel (the one definition of "best" the app, `sessions` and replay use);
    without one (re-verified results), the fastest feasible kernel."""
    best_i = best_index if best_index is not None else best_attempt(results)
    first = next((r for r in results if r is not None and r.feasible), None)
    best = results[best_i] if best_i is not None else None
    compiled = any(r is not None and (g := r.gate("compile")) is not None and g.passed for r in results)
    device = next((r.device for r in results if r is not None and r.device), "")
    interval = best.speedup_interval if best is not None and best.speedup is not None else None
    return TaskOutcome(
        task=task, level=level, compiled=compiled, feasible=best is not None,
        speedup=best.speedup if best else None,
        speedup_vs_compile=best.speedup_vs_compile if best else None,
        first_feasible_ms=first.latency_ms if first else None,
        best_ms=best.latency_ms if best else None,
        tokens=tokens, cost=cost, category=category, kernels=len(results), session=session,
        seconds=seconds, device=device, devices=[verdict_device(r) for r in results],
        best_device=verdict_device(best),
        first_compiled_at=next((i + 1 for i, r in enumerate(results)
                                if r is not None and (g := r.gate("compile")) is not None and g.passed), None),
        first_feasible_at=next((i + 1 for i, r in enumerate(results) if r is not None and r.feasible), None),
        rejected=sum(r is not None and r.outcome == "hack_fail" for r in results),
        compile_failed=sum(r is not None and r.outcome == "compile_fail" for r in results),
        noisy=bool(best is not None and best.noisy and best.speedup is not None),
        bandwidth_fraction=_fraction(best, "bandwidth_fraction"),
        reference_bandwidth_fraction=_fraction(best, "reference_bandwidth_fraction"),
        speedup_lo=interval[0] if interval else None,
        speedup_hi=interval[1] if interval else None,
    )


def _fraction(result: VerificationResult | None, key: str) -> float | None:
    """A speed-of-light fraction of a verdict's timing, only where its figure is a claim (not noisy)."""
    if result is None or result.noisy:
        return None
    value = (result.timing or {}).get(key)
    return float(value) if isinstance(value, (int, float)) else None
