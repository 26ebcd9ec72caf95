"""Verifier settings: one dataclass, JSON-able, with defaults as in KernelBench where it has them."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path


def default_build_root() -> Path:
    """EVOKERNEL_BUILD_DIR, else the user's cache dir: builds and reference results are shared by all sessions."""
    env = os.environ.get("EVOKERNEL_BUILD_DIR")
    if env:
        return Path(env)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("evokernel")) / "builds"


@dataclass
class VerifyConfig:
    trials: int = 5
    atol: float | None = None  # None: KernelBench's precision-aware rule (fp32 1e-4, fp16/bf16 1e-2)
    rtol: float | None = None
    seed: int = 42
    build_root: str | None = None
    build_timeout_s: float = 300.0
    run_timeout_s: float = 120.0
    memory_gb: float = 8.0
    max_processes: int = 512
    warmup: int = 3
    min_reps: int = 5
    max_reps: int = 1000
    min_time_s: float = 0.3
    compare_compile: bool = False
    time_kernels: bool = True
    threads: int | None = None
    use_cache: bool = True
    warm_worker: bool = True
    ncu: bool = False
    extra: dict = field(default_factory=dict)
    isolate: bool = field(default_factory=lambda: os.environ.get("EVOKERNEL_UNSAFE_NO_ISOLATION") != "1")
    static_scan: bool = True  # off only to test the run-time defences on their own
    hidden_paths: list[str] = field(default_factory=list)
    timing_budget_s: float = 5.0  # adaptive: rounds go on until the interval is tight or this runs out
    min_rounds: int = 6
    max_rounds: int = 60
    noise_halfwidth: float = 0.10
    # calls per timed round ~ this / one call's time; None: 15 ms on a GPU, 5 ms on the CPU, where each call
    # also moves its fresh input set (2 MB: ~0.7 ms on a 2-core machine) and 21 calls made a 250 ms round:
    # ~13 calls claimed as often, a second sooner (benchmarks/results/timing_rounds_cpu.md)
    round_target_ms: float | None = None
    timing_memory_mb: float = 256.0
    input_distributions: list[str] = field(default_factory=lambda: ["task"])
    # numerics probes of the correctness gate (verifier/correctness/probes.py), extra trials after the ordinary ones:
    magnitude_probe: bool = True  # the task's inputs scaled by each magnitude scale
    # None: two scales drawn per verification from its secret seed (probes.drawn_scales); a list fixes them
    magnitude_scales: list[float] | None = None
    shape_probe: bool = True  # held-out shapes that leave tails (a kernel that raises there is only noted)
    gpu_memory_fraction: float | None = 0.9
    #: the anti-hacking preset (verifier.policy.rules): kernelbench lets library ops do part of the work, strict not
    policy: str = "kernelbench"
    #: rules switched off for an experiment (`--allow RULE`), recorded in the verdict and bench.json
    allow: list[str] = field(default_factory=list)
    sandbox_tmp_mb: float = 1024.0  # the size of each private tmpfs in the sandbox (/tmp, /var/tmp, /dev/shm)
    #: the job directory's own tmpfs (isolated runs); None: a quarter of memory_gb, at least 1 GiB
    #: (`verifier.sandbox.job_mount.job_bytes`)
    job_dir_mb: float | None = None

    def seeds(self) -> list[int]:
        """Distinct seeds, one per trial: fresh inputs each time."""
        return [self.seed + 1009 * i for i in range(max(1, self.trials))]

    def root(self) -> Path:
        return Path(self.build_root) if self.build_root else default_build_root()

    def to_dict(self) -> dict:
        return asdict(self)
