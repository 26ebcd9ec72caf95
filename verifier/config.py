"""Verifier settings: one dataclass, JSON-able, with defaults as in KernelBench where it has them."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


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
    #: free-form experiment data only: the verifier reads no setting from it (a test scans the sources);
    #: settings an older version kept here are fields now (`lift_legacy_extra` reads old sessions)
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
    #: the most calls a timed round makes; None: $EVOKERNEL_MAX_CALLS, else `clock.rounds.MAX_CALLS_PER_ROUND`
    max_calls_per_round: int | None = None
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

    # --- what the task probe found (core.verifying.mark_degenerate / with_degeneracy) ---
    #: the tolerance preset the atol/rtol came from (`--tolerance`), named in verdicts and prompts; None: none
    #: was named (KernelBench's rule, or atol/rtol given directly)
    tolerance: str | None = None
    #: the trivial answers (zeros, a constant, the mean...) that pass this task at its tolerance: the
    #: correctness gate then scales the absolute tolerance by the output's spread. None: not probed yet
    #: (the probe runs once per session); []: probed, nothing trivial passes
    degenerate: list[str] | None = None
    #: inputs the task passes straight through (ReLU on [0, 1)): not a tolerance matter; the trials add
    #: the input distributions in `separated_by`, which tell such an answer apart
    pass_through: list[str] = field(default_factory=list)
    separated_by: list[str] = field(default_factory=list)

    # --- the attested clock: switches for measuring and testing it, each at the product's default ---
    #: how a timed round's input sets reach both sides: "files" (written by the trusted reference),
    #: "seeds" (drawn inside the clock), "auto" (files for small CPU sets; `clock.rounds.sets_by_file`)
    timing_sets: str = "auto"
    #: full-size rounds after the calibration round that are checked but not counted; None:
    #: `clock.rounds.WARMUP_ROUNDS` (tests that are not about timing ask for 0)
    warmup_rounds: int | None = None
    #: the GPU round loop, "sync" or "async"; None: $EVOKERNEL_GPU_LOOP, else "sync" (issue 33)
    gpu_loop: str | None = None
    #: a GPU spin (µs at a nominal 2 GHz) before each timed call in the async loop, so the card, not the host,
    #: bounds a round of µs kernels; None: $EVOKERNEL_GPU_PAD_US, else 0 (`clock.paired_calls.set_gpu_pad`)
    gpu_pad_us: float | None = None
    #: the L2 flush buffer between timed GPU calls in MB; None: $EVOKERNEL_L2_FLUSH_MB, else the default size
    l2_flush_mb: float | None = None
    #: a wake handshake before each clocked window, "on" or "off"; None: $EVOKERNEL_WAKE, else "off"
    wake: str | None = None
    #: the candidate harness's own stub round: "auto" (on the CPU only), "on", "off" (an experiment);
    #: $EVOKERNEL_OWN_STUB=on can only add it (`run.timed_calls.own_stub_enabled`)
    own_stub: str = "auto"

    # --- speed of light (issue 35): the verdict against the machine's peaks ---
    #: False: no bandwidth/FLOP roof in the verdict, and the reference worker measures no peak
    speed_of_light: bool = True
    #: a bandwidth peak in GB/s given by hand instead of the one measured (and cached) on this machine
    bandwidth_peak_gbps: float | None = None
    #: a float32 FLOP peak in GFLOP/s given by hand instead of the measured one
    flops_peak_gflops: float | None = None

    # --- the trusted data path: off only to measure or test the slower path ---
    #: inputs drawn from a seed recipe on both sides (issue 22); False: the reference hands over files
    seeded_inputs: bool = True
    #: outputs compared on the device (the GPU data path); False: through files
    device_compare: bool = True

    def __post_init__(self) -> None:
        moved = sorted(k for k in (self.extra or {}) if k in LEGACY_EXTRA_KEYS)
        if moved:  # a caller written for the old form would otherwise be silently ignored
            raise ValueError(f"VerifyConfig.extra no longer carries settings: pass {', '.join(f'{k}=' for k in moved)} "
                             "as fields (old saved settings: verifier.config.lift_legacy_extra)")

    def seeds(self) -> list[int]:
        """Distinct seeds, one per trial: fresh inputs each time."""
        return [self.seed + 1009 * i for i in range(max(1, self.trials))]

    def root(self) -> Path:
        return Path(self.build_root) if self.build_root else default_build_root()

    def to_dict(self) -> dict:
        return asdict(self)


#: the settings an older version carried as `VerifyConfig.extra` string keys, each now the field of the
#: same name, with how an old value reads: the booleans were "anything but False is on"
LEGACY_EXTRA_KEYS: dict[str, Callable[[Any], Any] | None] = {
    "tolerance": None, "degenerate": None, "pass_through": None, "separated_by": None, "timing_sets": None,
    "warmup_rounds": None, "gpu_loop": None, "l2_flush_mb": None, "wake": None, "own_stub": None,
    "bandwidth_peak_gbps": None, "flops_peak_gflops": None,
    "seeded_inputs": lambda v: v is not False, "device_compare": lambda v: v is not False,
    "speed_of_light": lambda v: v is not False,
}


def lift_legacy_extra(saved: dict[str, Any]) -> dict[str, Any]:
    """`saved` (a VerifyConfig's settings as a session.json recorded them) with the settings an older
    version kept in `saved["extra"]` moved to their fields, read as that version read them; what else
    `extra` held stays there. A field recorded in its own right wins over an old `extra` key. The one
    place old settings are read back: `core.session.models.config_from_meta` calls it first."""
    extra = saved.get("extra")
    if not isinstance(extra, dict) or not any(k in LEGACY_EXTRA_KEYS for k in extra):
        return saved
    out = {k: v for k, v in saved.items() if k != "extra"}
    for key, value in extra.items():
        if key in LEGACY_EXTRA_KEYS:
            read = LEGACY_EXTRA_KEYS[key]
            out.setdefault(key, read(value) if read is not None else value)
    out["extra"] = {k: v for k, v in extra.items() if k not in LEGACY_EXTRA_KEYS}
    return out
