"""The loop's and the command line's way into the verifier: one call, errors as one-line `VerifyError`s."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

from core.tasks import Task
from verifier import VerificationResult, VerifyConfig
from verifier.policy.rules import Policy, PolicyError, make_policy

__all__ = ["Policy", "PolicyError", "VerifyError", "backend_problem", "build_root_problem", "make_config", "resolve_policy", "verify_sources", "verify_task", "with_degeneracy", "with_job_dir",
           "with_policy"]


class VerifyError(Exception):
    """The verification could not run (no compiler, no GPU, a task whose reference fails)."""


def verify_sources(
    reference_source: str,
    candidate_source: str,
    backend: str = "cpu",
    config: VerifyConfig | None = None,
    on_gate: Callable[..., None] | None = None,
) -> VerificationResult:
    """The one door from core into the verifier: the command line (`verify_task`), a session
    (`core.session.models.default_verify`) and a bench's jobs (`core.executors.verify_job`) all verify
    through here, so every verdict says the same things: the tolerance in force in words, the policy it
    was judged under and the task's degeneracy. The verifier's own errors (`VerifierError`,
    `BackendUnavailable`) pass through; `verify_task` turns them into one-line `VerifyError`s."""
    from verifier import verify

    result = verify(reference_source, candidate_source, backend=backend, config=config, on_gate=on_gate)
    return completed_verdict(result, config)


def completed_verdict(result: VerificationResult, config: VerifyConfig | None) -> VerificationResult:
    """`result` with what the verifier leaves to its caller filled in where it is missing: the tolerance
    text, the policy as a dict, the degeneracy the task's checks found (`config.degenerate`, pass-through)."""
    settings = config or VerifyConfig()
    result.tolerance = result.tolerance or tolerance_text(config, degenerate=False)
    result.policy = result.policy or make_policy(settings.policy, settings.allow).to_dict()
    if config is not None and not result.degenerate:
        result.degenerate = [*(config.degenerate or []), *config.pass_through]
    return result


def verify_task(
    task: Task,
    source: str,
    backend: str = "cpu",
    config: VerifyConfig | None = None,
    on_gate: Callable[..., None] | None = None,
) -> VerificationResult:
    """Verify `source` against `task` (`verify_sources`, with the job directory sized from the task);
    bad candidates come back as failing gates, never as exceptions."""
    from verifier.api import VerifierError
    from verifier.backends import BackendUnavailable

    config = with_job_dir(config, task)
    try:
        return verify_sources(task.source, source, backend=backend, config=config, on_gate=on_gate)
    except (VerifierError, BackendUnavailable) as exc:
        raise VerifyError(str(exc)) from None


def with_job_dir(config: VerifyConfig | None, task: Task | str) -> VerifyConfig | None:
    """`config` with the job directory sized from `task`'s memory estimate (`core.tasks.job_dir_mb`) when
    the person set no size and an estimate is known; else `config` as it is (the verifier then takes a
    quarter of the memory limit). A copy: one config serves many tasks in a bench."""
    from dataclasses import replace

    from core.tasks import job_dir_mb, known_estimate

    if config is not None and config.job_dir_mb is not None:
        return config
    task = task if isinstance(task, Task) else Task(name="task", level=0, category="", description="", source=task)
    estimate = known_estimate(task)
    if estimate is None:
        return config
    return replace(config or VerifyConfig(), job_dir_mb=float(job_dir_mb(estimate, (config or VerifyConfig()).timing_memory_mb)))


def backend_problem(backend: str) -> str | None:
    """Why `backend` cannot build and run kernels here (one line: no GPU, no toolchain, an unknown name),
    or None. The same check `verify` makes first, for commands to make before any model call, session
    folder or verification (`draft`, `bench`, `tui`)."""
    from verifier.backends import BackendUnavailable, get_backend

    try:
        return get_backend(backend).availability()
    except BackendUnavailable as exc:
        return str(exc)


#: free disk a kernel build needs in the build folder: headers, objects and the linked extension of a
#: candidate (~100 MB for a CUDA one) beside the shared headers and bindings (~300 MB once), with room
BUILD_ROOM_MB = 512


def build_root_problem(root: Path | None = None, need_mb: float | None = None) -> str | None:
    """Why the build folder cannot take a kernel build (one line: too little free disk, not writable), or
    None; checked with the backend, before any model call, session folder or verification, so a full disk
    is not found out by a compiler half-way through a step."""
    import os
    import shutil

    from verifier.config import default_build_root

    if need_mb is None:  # $EVOKERNEL_BUILD_ROOM_MB for a machine whose builds are known to need less (or more)
        try:
            need_mb = float(os.environ.get("EVOKERNEL_BUILD_ROOM_MB") or BUILD_ROOM_MB)
        except ValueError:
            need_mb = BUILD_ROOM_MB
    root = Path(root) if root is not None else default_build_root()
    existing = root
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        free = shutil.disk_usage(existing).free
    except OSError:
        return None  # cannot tell; the build says what went wrong
    if free < need_mb * 2**20:
        return (f"only {free / 2**20:.0f} MB free on the disk holding the build folder {root} (a kernel build "
                f"needs about {need_mb:.0f} MB): free some, or set EVOKERNEL_BUILD_DIR to a folder on a disk "
                "with room")
    if not os.access(existing, os.W_OK):
        return f"cannot write to the build folder {root}: set EVOKERNEL_BUILD_DIR to a folder you can write to"
    return None


def make_config(tolerance: str = "kernelbench", atol: float | None = None, rtol: float | None = None,
                **fields: object) -> VerifyConfig:
    """Verifier settings from the command line's words: a tolerance preset (`--tolerance`, overridden by
    `--atol/--rtol`), recorded as `tolerance` so verdicts and prompts can name it, and any other fields
    (None values keep the defaults)."""
    from verifier.correctness.compare import resolve_tolerance

    atol, rtol = resolve_tolerance(tolerance, atol, rtol)
    given = {k: v for k, v in fields.items() if v is not None}
    return VerifyConfig(atol=atol, rtol=rtol, tolerance=tolerance, **given)  # type: ignore[arg-type]


def resolve_policy(preset: str | None = None, allow: tuple[str, ...] | list[str] = ()) -> Policy:
    """The anti-hacking policy in force: the flag, else `$EVOKERNEL_POLICY` or config.toml's `policy`, else
    kernelbench; rule names checked (PolicyError, one line, for an unknown one)."""
    from core.config import load_settings

    return make_policy(preset or load_settings().policy, list(allow))


def with_policy(config: VerifyConfig, policy: Policy) -> VerifyConfig:
    """`config` judging under `policy` (its preset and allowed rules are part of the verdict cache key)."""
    config.policy, config.allow = policy.preset, list(policy.allowed)
    return config


def tolerance_text(config: VerifyConfig | None, degenerate: bool = True) -> str:
    """The correctness rule in force, in words (`kernelbench: fp32 atol=rtol=1e-4, fp16/bf16 1e-2`); for a
    degenerate task, also that answers are judged relative to the output's spread."""
    from verifier.correctness.compare import describe_degenerate, describe_tolerance

    config = config or VerifyConfig()
    text = describe_tolerance(config.atol, config.rtol, config.tolerance)
    found = config.degenerate if degenerate else None
    if found:
        text += (f"; this task is {describe_degenerate(found)}, so the absolute tolerance is scaled by "
                 "the spread (standard deviation) of the reference output")
    return text


def mark_degenerate(task: Task, config: VerifyConfig | None, backend: str = "cpu") -> VerifyConfig:
    """`config` (default settings when None) with `degenerate` set when a trivial answer (zeros, a
    constant, the broadcast mean, an output that ignores the inputs or weights) passes `task` at its
    tolerance: the correctness gate then judges on the output's spread. Built-in tasks are not
    degenerate (a test checks all of them) and cost nothing; others run the reference in the probe
    (seconds; cached per task source and preset). A reference that cannot run leaves it unmarked."""
    from core.tasks import is_builtin, probe_device, task_degeneracy

    config = config if config is not None else VerifyConfig()
    if is_builtin(task) or config.degenerate is not None:
        return config
    probed = task_degeneracy(task, str(config.tolerance or "kernelbench"), memory_gb=config.memory_gb,
                             device=probe_device(backend))
    if probed is not None:
        return with_degeneracy(config, probed.found, probed.separating)
    return config


def with_degeneracy(config: VerifyConfig, found: list[str], separating: list[str]) -> VerifyConfig:
    """`config` told what the probe found. An input passed through (ReLU on inputs in [0, 1) is the
    identity) is not a tolerance matter: the trials add the distributions that separate it (normal inputs
    for that ReLU), unless the person chose the distributions; the other trivial answers make the
    correctness gate judge on the output's spread (`degenerate`)."""
    from verifier.correctness.compare import is_pass_through

    config.degenerate = [f for f in found if not is_pass_through(f)]
    through = [f for f in found if is_pass_through(f)]
    if through:
        config.pass_through = through
        if list(config.input_distributions) == ["task"] and separating:
            config.input_distributions = ["task", *separating]
            config.separated_by = list(separating)
    return config


def prewarm_in_background(backend: str = "cpu", config: VerifyConfig | None = None):
    """Warm the verifier (worker process, precompiled headers) on a daemon thread; failures are ignored
    because the first verification simply pays the cost instead."""
    import threading

    def run() -> None:
        from verifier.api import prewarm

        with contextlib.suppress(Exception):
            prewarm(backend, config)

    thread = threading.Thread(target=run, name="evokernel-prewarm", daemon=True)
    thread.start()
    return thread


def compare_sources(task: Task, source_a: str, source_b: str, backend: str = "cpu",
                    config: VerifyConfig | None = None, on_gate: Callable[..., None] | None = None) -> dict:
    """B's paired speedup over A (both re-timed back to back on the same inputs), or {"error": ...};
    `on_gate` hears the work as `verify_task`'s does."""
    from verifier.api import VerifierError, compare
    from verifier.backends import BackendUnavailable

    config = with_job_dir(config, task)
    try:
        return compare(task.source, source_a, source_b, backend=backend, config=config, on_gate=on_gate)
    except (VerifierError, BackendUnavailable) as exc:
        raise VerifyError(str(exc)) from None


def describe_comparison(result: dict, label_a: str = "A", label_b: str = "B") -> str:
    """One line: `v5 vs v3: 1.230x [1.180, 1.290], v5 faster (0.41 ms vs 0.33 ms; paired, 12 rounds, 2 threads)`."""
    if result.get("error"):
        return f"no comparison: {result['error']}"
    speed, lo, hi = result.get("speedup"), result.get("lo"), result.get("hi")
    if not speed or lo is None or hi is None:
        return "no comparison: nothing was timed"
    verdict = f"{label_b} faster" if lo > 1 else f"{label_b} slower" if hi < 1 else "no clear difference"
    noisy = ", noisy" if result.get("noisy") else ""
    return (f"{label_b} vs {label_a}: {speed:.3f}x [{lo:.3f}, {hi:.3f}], {verdict} "
            f"({result.get('a_ms', 0):.4f} ms vs {result.get('b_ms', 0):.4f} ms; paired, {result.get('rounds')} rounds, "
            f"{result.get('threads')} threads{noisy})")
