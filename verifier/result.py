"""JSON-able records that the verifier hands to the loop, the app and the command line."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

GATE_ORDER = ("anti_hacking", "compile", "correctness", "latency", "profile")
GATE_TITLES = {
    "anti_hacking": "Anti-hacking",
    "compile": "Compile",
    "correctness": "Correctness",
    "latency": "Latency",
    "profile": "Profile",
}

PASS, FAIL, SKIP = "pass", "fail", "skip"


#: What a `Progress` can be about, in the order a verification meets them: the trusted side building a shared
#: artefact the candidate's build asked for (`bindings`, `pch`), a correctness trial or numerics probe (`trial`),
#: the timing window's calibration and warm-up rounds (`calibrate`, `warmup`) and its measured rounds (`round`).
PROGRESS_STEPS = ("build", "bindings", "pch", "trial", "calibrate", "warmup", "round")


def device_label_id(visible: str | None, index: int, uuid: str = "") -> str:
    """A card as the process using it sees it: "GPU <id> (GPU-<uuid>)", where <id> is the process's
    CUDA_VISIBLE_DEVICES entry at `index` (the physical id a pool pinned it to; its own index without
    one) and the UUID (torch's, with or without its `GPU-` prefix) names the card on any machine. An
    entry that is itself a UUID or MIG id is given once."""
    entries = [v.strip() for v in (visible or "").split(",") if v.strip()]
    physical = entries[index] if 0 <= index < len(entries) else str(index)
    uuid = uuid.strip()
    if uuid and not uuid.upper().startswith(("GPU-", "MIG-")):
        uuid = f"GPU-{uuid}"
    if physical.upper().startswith(("GPU-", "MIG-")):
        return physical
    return f"GPU {physical}" + (f" ({uuid})" if uuid else "")


@dataclass(frozen=True)
class Progress:
    """Where a running gate is within its work, told as it happens (`verify(on_gate=...)` passes one as the
    third argument of a `(gate, "running", progress)` call). A gate can run for a minute on a big task
    (bindings for a new signature, eight trials, thirty timing rounds); a bare "running" for that long reads
    as a hang, so the callers show `text` (one line for a person) and may draw `done`/`total` as a bar.

    `gate` is the gate whose work this is, `step` one of `PROGRESS_STEPS`; `done` counts what has started
    (trial 3 of 8: done=3, total=8) or, for rounds, what has been measured; `kept` the rounds the estimate
    keeps so far; `speedup`/`lo`/`hi` the estimate so far, once there is one."""

    gate: str
    step: str
    text: str
    done: int | None = None
    total: int | None = None
    kept: int | None = None
    speedup: float | None = None
    lo: float | None = None
    hi: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Progress:
        known = {f: d[f] for f in cls.__dataclass_fields__ if f in d}
        return cls(**{"gate": "", "step": "", "text": "", **known})


def library_line(detail: dict) -> str:
    """`library: aten::mm 98%, aten::add 1% of forward (kernelbench policy)`: what a passing anti-hacking
    gate let library ops do, so a person sees how much of a speed-up is the library's."""
    ops = [o for o in detail.get("library_ops", []) if isinstance(o, dict)]
    if not ops:
        return ""
    shown = ", ".join(f"{o.get('op', '?')} {float(o.get('share', 0)):.0%}" for o in ops[:3])
    preset = (detail.get("policy") or {}).get("preset", "kernelbench")
    return f"library: {shown} of forward ({preset} policy)"


@dataclass
class GateResult:
    """The outcome of one gate: status, time taken, a one-line reason and structured detail."""

    name: str
    status: str
    seconds: float = 0.0
    reason: str = ""
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.status == PASS

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GateResult:
        return cls(
            name=d["name"],
            status=d["status"],
            seconds=float(d.get("seconds", 0.0)),
            reason=d.get("reason", ""),
            detail=dict(d.get("detail", {})),
        )


@dataclass
class VerificationResult:
    """All gates of one verification, in order; `feasible` = anti-hacking, compile and correctness passed."""

    backend: str
    gates: list[GateResult]
    source_hash: str = ""
    latency_ms: float | None = None
    reference_ms: float | None = None
    compiled_ms: float | None = None
    profile: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    device: str = ""
    #: which card, as the trusted reference worker saw it: "GPU <its CUDA_VISIBLE_DEVICES entry, else its
    #: index> (GPU-<uuid>)", "cpu" on the CPU; "" when not known (a verdict from before it was recorded)
    device_id: str = ""
    notes: list[str] = field(default_factory=list)
    isolated: bool = True
    timing: dict[str, Any] = field(default_factory=dict)
    cached: bool = False
    measured_at: float | None = None
    #: the correctness rule in force (e.g. "kernelbench: fp32 atol=rtol=1e-4, fp16/bf16 1e-2"); "" when unknown
    tolerance: str = ""
    #: trivial answers that pass the task at that tolerance ("zeros", "a constant", ...): [] for a sound task
    degenerate: list[str] = field(default_factory=list)
    #: seconds spent in each phase of a fresh verification (start, build, reference wait, construct, ...):
    #: where a verdict's time goes, for the speed benchmarks (a cached verdict keeps its measuring run's)
    phases: dict[str, float] = field(default_factory=dict)
    #: device memory each side held at its peak, GiB ({"reference": the trusted worker's allocator,
    #: "candidate": its process's allocator and shared buffer, as that process reported it}); GPU only
    device_peak_gb: dict[str, float] = field(default_factory=dict)
    #: where each side's device memory peaked, GiB of live tensors by phase ({"reference": {"prepare": ..,
    #: "examine": .., "rounds": ..}, "candidate": {"trials": .., "profile": .., "rounds": ..}}): what the
    #: memory plan (issue 33) is measured against; GPU only, the candidate's is its own claim
    device_peak_phases_gb: dict[str, dict[str, float]] = field(default_factory=dict)
    #: the anti-hacking policy it was judged under ({"preset": "kernelbench", "allowed": [...]})
    policy: dict[str, Any] = field(default_factory=dict)
    #: the correctness gate's numerics probes (verifier/correctness/probes.py): {"probe", "name", "status" (pass, fail,
    #: skip, refused, off), "reason"[, "shapes"]} each, in the order they ran
    probes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def noisy(self) -> bool:
        """The paired speedup's 95% interval stayed wider than the noise limit: no speed claim."""
        return bool(self.timing.get("noisy"))

    @property
    def speedup_interval(self) -> tuple[float, float] | None:
        lo, hi = self.timing.get("lo"), self.timing.get("hi")
        return (lo, hi) if lo is not None and hi is not None else None

    def timing_label(self, now: float | None = None) -> str:
        """"measured now" or "cached, measured N min ago", and "noisy" / "unisolated" where they apply."""
        import time

        parts = []
        if self.cached and self.measured_at:
            parts.append(f"cached, measured {max(0, round(((now or time.time()) - self.measured_at) / 60))} min ago")
        if self.noisy:
            parts.append("noisy")
        if not self.isolated:
            parts.append("unisolated")
        return ", ".join(parts)

    @property
    def feasible(self) -> bool:
        passed = {g.name for g in self.gates if g.passed}
        return {"anti_hacking", "compile", "correctness"} <= passed

    @property
    def speedup(self) -> float | None:
        if self.latency_ms and self.reference_ms:
            return self.reference_ms / self.latency_ms
        return None

    @property
    def speedup_vs_compile(self) -> float | None:
        if self.latency_ms and self.compiled_ms:
            return self.compiled_ms / self.latency_ms
        return None

    @property
    def failed_gate(self) -> GateResult | None:
        return next((g for g in self.gates if g.status == FAIL), None)

    @property
    def outcome(self) -> str:
        """One of hack_fail, compile_fail, incorrect, feasible: the furthest gate reached, for rewards."""
        failed = self.failed_gate
        if self.feasible:
            return "feasible"
        if failed is None or failed.name == "anti_hacking":
            return "hack_fail"
        if failed.name == "compile":
            return "compile_fail"
        return "incorrect"

    def gate(self, name: str) -> GateResult | None:
        return next((g for g in self.gates if g.name == name), None)

    def bandwidth_text(self, even_noisy: bool = False) -> str:
        """`61% of memory bandwidth, memory-bound` from the verdict's timing (issue 35), with a flag when the
        kernel reads above the machine's peak; "" without a fraction (no peak, no figure, or a noisy verdict
        unless `even_noisy`: the gate table shows a noisy round's figures as such)."""
        t = self.timing or {}
        if self.noisy and not even_noisy:
            return ""
        ff = t.get("flops_fraction")
        if t.get("bound") == "compute-bound" and ff is not None:  # past the ridge point: the compute roof is the one
            dtype = {"float16": "FP16", "bfloat16": "BF16", "tf32": "TF32"}.get(str(t.get("flops_peak_dtype")), "FP32")
            text = f"{100 * ff:.0f}% of {dtype} peak, compute-bound"
            if "flops_fraction" in (t.get("bandwidth_over_peak") or ()):
                text += " (above the measured peak: the figure or the model of its work is wrong)"
            return text
        f = t.get("bandwidth_fraction")
        if f is None:
            return ""
        text = f"{100 * f:.0f}% of memory bandwidth"
        if t.get("bound"):
            text += f", {t['bound']}"
        if "bandwidth_fraction" in (t.get("bandwidth_over_peak") or ()):
            text += " (above the measured peak: the figure or the model of its work is wrong)"
        return text

    def feedback(self) -> str:
        """Plain text for the next prompt: what failed and why, or the timing and profile."""
        failed = self.failed_gate
        if failed is not None:
            lines = [f"The {GATE_TITLES.get(failed.name, failed.name)} gate failed: {failed.reason}"]
            for diag in failed.detail.get("diagnostics", [])[:20]:
                lines.append(f"  {diag}")
            for key in ("rule", "line", "mismatch"):
                if key in failed.detail:
                    lines.append(f"  {key}: {failed.detail[key]}")
            return "\n".join(lines)
        lines = ["The kernel is correct."]
        if self.latency_ms is not None:
            lines.append(f"Latency: {self.latency_ms:.4f} ms (eager reference {self.reference_ms or 0:.4f} ms).")
        sol = self.bandwidth_text()
        if sol and self.timing.get("bound") == "compute-bound" and self.timing.get("flops_fraction") is not None:
            t = self.timing
            ref = t.get("reference_flops_fraction")
            lines.append(f"Speed of light: the kernel reaches {sol} ({t.get('gflops') or 0:.1f} of "
                         f"{t.get('flops_peak_gflops') or 0:.1f} GFLOP/s measured on this machine"
                         + (f"; the eager reference {100 * ref:.0f}%" if ref is not None else "") + ").")
            if t.get("tf32_peak_gflops") and str(t.get("flops_peak_dtype")) == "float32":
                lines.append(f"TF32 tensor cores reach {t['tf32_peak_gflops']:.1f} GFLOP/s on this card, where the "
                             "task's tolerance allows products rounded to TF32.")
        elif sol:
            t = self.timing
            ref = t.get("reference_bandwidth_fraction")
            lines.append(f"Speed of light: the kernel reaches {sol} ({t.get('gbps') or 0:.1f} of "
                         f"{t.get('bandwidth_peak_gbps') or 0:.1f} GB/s measured on this machine"
                         + (f"; the eager reference {100 * ref:.0f}%" if ref is not None else "") + ").")
        if self.profile:
            lines.append("Top ops by self time:")
            for row in self.profile[:8]:
                lines.append(f"  {row.get('name')}: {row.get('self_ms', 0):.4f} ms x{row.get('calls', 1)}")
        prof = self.gate("profile")
        if prof is not None and prof.detail.get("ncu"):
            from verifier.profile.ncu_summary import summary_lines

            lines.append("Nsight Compute, one forward (slowest kernels first):")
            lines.extend(summary_lines(prof.detail["ncu"]))
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["feasible"] = self.feasible
        d["speedup"] = self.speedup
        d["outcome"] = self.outcome
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> VerificationResult:
        return cls(
            backend=d["backend"],
            gates=[GateResult.from_dict(g) for g in d.get("gates", [])],
            source_hash=d.get("source_hash", ""),
            latency_ms=d.get("latency_ms"),
            reference_ms=d.get("reference_ms"),
            compiled_ms=d.get("compiled_ms"),
            profile=list(d.get("profile", [])),
            seconds=float(d.get("seconds", 0.0)),
            device=d.get("device", ""),
            device_id=str(d.get("device_id") or ""),
            notes=list(d.get("notes", [])),
            isolated=bool(d.get("isolated", True)),
            timing=dict(d.get("timing") or {}),
            cached=bool(d.get("cached", False)),
            measured_at=d.get("measured_at"),
            tolerance=d.get("tolerance", ""),
            degenerate=list(d.get("degenerate", [])),
            phases=dict(d.get("phases") or {}),
            device_peak_gb=dict(d.get("device_peak_gb") or {}),
            device_peak_phases_gb=dict(d.get("device_peak_phases_gb") or {}),
            policy=dict(d.get("policy") or {}),
            probes=list(d.get("probes") or []),
        )
