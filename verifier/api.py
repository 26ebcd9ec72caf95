"""`verify()`: the one entry point the loop, the app and the command line call.

A verification reads as its phases: static anti-hacking; a fresh draw of seeds; the trusted reference
worker prepares inputs and outputs; the candidate builds and runs in its sandbox and answers commands
(correctness trials, a profiled call, timed rounds interleaved with the reference's); the parent
compares every file, audits every binary the candidate mapped, and signs the verdict it caches.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import functools
import hashlib
import json
import math
import os
import random
import secrets
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from verifier import decoy
from verifier.backends import Backend, get_backend
from verifier.compare import compare_tensor, output_spread
from verifier.config import VerifyConfig
from verifier.gates import (
    AntiHackingGate,
    CompileGate,
    CorrectnessGate,
    Evidence,
    ProfileGate,
    compare_files,
)
from verifier.jobfiles import HeldDir, create_held, discard, empty_dir
from verifier.keys import content_key
from verifier.result import FAIL, GATE_ORDER, PASS, SKIP, GateResult, VerificationResult
from verifier.rules import PolicyError, make_policy
from verifier.sandbox import Limits, LiveJob

GateCallback = Callable[[str, str], None]


class VerifierError(Exception):
    """The verification could not run at all (bad task, unusable backend); one line saying what to do."""


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def _threads(config: VerifyConfig) -> int:
    """One thread count for both sides of every paired measurement, recorded in the verdict: by default
    the cores both sides are pinned to (every core but the parent's when there are two or more)."""
    from verifier.cpu_accounting import worker_cpus

    return max(1, int(config.threads or len(worker_cpus() or ()) or os.cpu_count() or 1))


def _limits(config: VerifyConfig, wall_s: float, backend: Backend | None = None) -> Limits:
    """CUDA reserves far more address space than it uses, so GPU runs get no RLIMIT_AS (-1: unlimited)."""
    memory = -1 if backend is not None and backend.device == "cuda" else int(config.memory_gb * 1024**3)
    file_bytes = int(max(2.0, config.memory_gb) * 1024**3)
    return Limits(wall_s=wall_s, memory_bytes=memory, file_bytes=file_bytes, max_processes=config.max_processes)


def _clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """What a sandboxed worker gets: no credentials, no paths to the person's state."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "TMPDIR": "/tmp", "HOME": "/tmp",
           "PYTHONDONTWRITEBYTECODE": "1", "OPENBLAS_NUM_THREADS": "1"}
    for key in ("CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "NVIDIA_VISIBLE_DEVICES"):
        if os.environ.get(key):
            env[key] = os.environ[key]
    env.update(extra or {})
    return env


def _trusted_env() -> dict[str, str]:
    env = dict(os.environ)
    for key in ("EVK_PROGRESS_FD", "EVK_CONTROL_FD"):
        env.pop(key, None)
    env["OPENBLAS_NUM_THREADS"] = "1"
    return env


def isolation_mode(config: VerifyConfig) -> bool:
    """True when candidates will run isolated; raises VerifierError when isolation is wanted but
    unavailable (never a silent downgrade)."""
    if not config.isolate:
        return False
    from verifier.isolation import unavailable_reason

    reason = unavailable_reason()
    if reason:
        raise VerifierError(reason)
    return True


# ---------------------------------------------------------------------------------------------------
# scratch and workers


@functools.cache
def _scratch() -> Path:
    from verifier.isolation import clean_stale_runs, private_scratch

    scratch = private_scratch()
    (scratch / "runs").mkdir(exist_ok=True)
    clean_stale_runs(scratch)
    return scratch


def _new_run_dir() -> Path:
    run = _scratch() / "runs" / f"run-{uuid.uuid4().hex}"
    run.mkdir(mode=0o700)
    (run / ".owner").write_text(str(os.getpid()))
    return run


# what a wrong timed call's verdict says, whichever way its outputs reached the parent
FRESH_OUTPUTS = ("every call gets new inputs and must compute its outputs afresh (a cached or stale result, or a view "
                 "of its inputs?)")


class JobTampered(OSError):
    """The candidate changed the job directory under the trusted side (swapped a hand-over directory
    for a link, planted a file where an input goes): an anti-hacking failure, never a verifier error."""


class _ReferenceWorkers:
    """Warm trusted reference workers, one per task source and settings; restarted when one dies."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._workers: dict[str, tuple[LiveJob, Path]] = {}
        atexit.register(self.close)

    def get(self, reference_source: str, be: Backend, config: VerifyConfig) -> tuple[LiveJob, Path]:
        key = content_key("refworker-v1", reference_source, be.name, be.device, _threads(config), config.memory_gb)
        with self._lock:
            held = self._workers.pop(key, None)
            if held is not None and held[0].proc.poll() is None:
                return held
            if held is not None:
                held[0].kill()
            while len(self._workers) >= 2:
                _, (job, _path) = self._workers.popitem()
                job.finish(timeout=2)
        home = _scratch() / "reference" / key
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        task = home / "task.py"
        task.write_text(reference_source)
        job = LiveJob([sys.executable, "-m", "verifier.reference_worker"], home,
                      _limits(config, 24 * 3600, be), {**_trusted_env(), **be.child_env()})
        return job, task

    def give_back(self, reference_source: str, be: Backend, config: VerifyConfig, held: tuple[LiveJob, Path]) -> None:
        key = content_key("refworker-v1", reference_source, be.name, be.device, _threads(config), config.memory_gb)
        with self._lock:
            if held[0].proc.poll() is None and config.warm_worker:
                self._workers[key] = held
                return
        held[0].finish(timeout=2)

    def close(self) -> None:
        with self._lock:
            workers, self._workers = list(self._workers.values()), {}
        for job, _ in workers:
            job.finish(timeout=2)


_REFERENCE = _ReferenceWorkers()
MAX_TRUSTED_BUILDS = 6  # distinct shared artefacts (headers, bindings) one verification may ask the trusted side for


class _Spares:
    """One pre-started candidate sandbox that has imported torch and waits for a job: each is used
    once, so every candidate still runs in a fresh process and a fresh set of namespaces."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spare: tuple[str, LiveJob, Path] | None = None
        atexit.register(self.close)

    def take(self, key: str) -> tuple[LiveJob, Path] | None:
        with self._lock:
            spare, self._spare = self._spare, None
        if spare is None:
            return None
        if spare[0] == key and spare[1].proc.poll() is None:
            return spare[1], spare[2]
        spare[1].kill()
        return None

    def refill(self, key: str, start: Callable[[], tuple[LiveJob, Path]]) -> None:
        def run() -> None:
            with contextlib.suppress(Exception):
                job, job_dir = start()
                with self._lock:
                    old, self._spare = self._spare, (key, job, job_dir)
                if old is not None:
                    old[1].kill()

        threading.Thread(target=run, name="evokernel-spare-sandbox", daemon=True).start()

    def close(self) -> None:
        with self._lock:
            spare, self._spare = self._spare, None
        if spare is not None:
            spare[1].kill()
            discard(spare[2].parent, spare[2].parent.parent.parent / "trash")


_SPARES = _Spares()


def _sandbox_spec(job_dir: Path, config: VerifyConfig, be: Backend):
    from verifier.isolation import SandboxSpec, default_hidden, gpu_device_nodes

    root = config.root()
    hidden = [*default_hidden(), root, _scratch(), *map(Path, config.hidden_paths)]
    return SandboxSpec(writable=[job_dir], readonly=[root / "shared"], hidden=hidden,
                       devices=gpu_device_nodes() if be.device == "cuda" else [],
                       tmp_bytes=int(config.sandbox_tmp_mb * 1024**2))


def _start_candidate(config: VerifyConfig, be: Backend, isolated: bool, wait: bool) -> tuple[LiveJob, Path]:
    run = _new_run_dir()
    job_dir = run / "job"
    job_dir.mkdir(mode=0o700)
    (config.root() / "shared").mkdir(parents=True, exist_ok=True)
    spec = _sandbox_spec(job_dir, config, be) if isolated else None
    argv = [sys.executable, "-m", "verifier.harness", str(job_dir), *(["--wait"] if wait else []),
            *(["--warm-cuda"] if wait and be.device == "cuda" else [])]
    env = _clean_env(be.child_env()) if isolated else {**_trusted_env(), **be.child_env()}
    wall = config.build_timeout_s + config.run_timeout_s + (3600 if wait else 0)
    return LiveJob(argv, job_dir, _limits(config, wall, be), env, spec=spec), job_dir


def _spare_key(config: VerifyConfig, be: Backend, isolated: bool) -> str:
    return content_key("spare-v1", be.name, be.device, isolated, str(config.root()), config.memory_gb,
                   config.max_processes, config.hidden_paths, config.build_timeout_s, config.run_timeout_s,
                   config.sandbox_tmp_mb)


# ---------------------------------------------------------------------------------------------------
# one verification


def verify(
    reference_source: str,
    candidate_source: str,
    backend: str = "cpu",
    config: VerifyConfig | None = None,
    on_gate: GateCallback | None = None,
) -> VerificationResult:
    """Run the gates in order and stop at the first failure. Never raises for a bad candidate."""
    config = config or VerifyConfig()
    notify = on_gate or (lambda name, state: None)
    started = time.monotonic()
    be = get_backend(backend)
    be.check_available()
    if be.interpreted:
        config = dataclasses.replace(config, time_kernels=False)
    isolated = isolation_mode(config)
    result = VerificationResult(backend=be.name, gates=[], source_hash=source_hash(candidate_source),
                                isolated=isolated)
    if not isolated:
        result.notes.append("unisolated: candidates ran without OS isolation (--unsafe-no-isolation)")

    try:
        hack = AntiHackingGate(make_policy(config.policy, config.allow))
    except PolicyError as exc:
        raise VerifierError(str(exc)) from None
    result.policy = hack.policy.to_dict()
    notify("anti_hacking", "running")
    static = hack.static(candidate_source, be.name) if config.static_scan else GateResult(
        "anti_hacking", PASS, 0.0, "", {"checks": "static scan off"})
    if static.status == FAIL:
        return _finish(result, [static], notify, started)

    root = config.root()
    key = _verdict_key(reference_source, candidate_source, be, config)
    if config.use_cache:
        cached = _cached_verdict(root, key, isolated)
        if cached is not None:
            cached.seconds = time.monotonic() - started
            return _finish(cached, cached.gates, notify, started)

    run = _Run(reference_source, candidate_source, be, config, isolated, notify)
    try:
        gates = run.execute(static, hack)
        if getattr(run, "ncu_profile", None) is not None:
            _attach_ncu(run.ncu_profile, result, be, config, run.ncu_job())
    except JobTampered as exc:
        from verifier.antihack import Violation

        run.clean_exit = False
        gates = [hack._fail(time.monotonic(), [Violation("job-tamper", 0, str(exc))]),
                 GateResult("correctness", SKIP, 0.0, "anti-hacking failed")]
    except OSError as exc:
        raise VerifierError(f"the verifier could not use its working files ({exc.strerror or exc}); "
                            "check free space in /dev/shm and the build root (EVOKERNEL_BUILD_DIR)") from None
    finally:
        run.close()
        run.lap("checks and close")
    result.phases = {k: round(v, 3) for k, v in run.phases.items()}
    result.device = run.reference.get("device_name", "")
    result.compiled_ms = _median(run.reference.get("compiled_times_ms"))
    lat = next((g for g in gates if g.name == "latency" and g.passed), None)
    if lat is not None:
        result.latency_ms = lat.detail.get("median_ms")
        result.reference_ms = lat.detail.get("reference_ms")
        result.timing = {k: lat.detail.get(k) for k in ("speedup", "lo", "hi", "noisy", "rounds", "calls_per_round",
                                                         "threads", "halfwidth", "gbps", "reference_gbps")}
        if lat.detail.get("reported_disagrees"):
            result.notes.append("timing: the kernel's own timer reported "
                                f"{lat.detail.get('reported_vs_attested') or 0:.2f}x of what the parent's clock "
                                "measured; the parent's clock was used")
        if lat.detail.get("idle_cpu_counted"):
            result.notes.append(f"timing: the sandbox used {lat.detail.get('idle_cpu_total_ms') or 0:.0f} ms of CPU "
                                "while it should have been idle (during the reference's turn); counted against "
                                "the kernel")
        if lat.detail.get("noisy"):
            result.notes.append("noisy: " + (lat.detail.get("busy") or "the speedup's 95% interval stayed wider "
                                             f"than ±{config.noise_halfwidth:.0%}") + "; no speed claim")
    corr = next((g for g in gates if g.name == "correctness"), None)
    if corr is not None and corr.detail.get("probes"):
        from verifier.probes import notes as probe_notes

        result.probes = list(corr.detail["probes"])
        result.notes.extend(probe_notes(result.probes))
    result.measured_at = time.time()
    prof = next((g for g in gates if g.name == "profile" and g.passed), None)
    if prof is not None:
        result.profile = prof.detail.get("top_ops", [])
    if be.interpreted:
        result.notes.append("interpreted: no latency")
    result = _finish(result, gates, notify, started)
    if run.clean_exit and isolated:
        from verifier.trusted import store_verdict

        with contextlib.suppress(OSError):
            store_verdict(root, key, result.to_dict())
    return result


def compare(reference_source: str, source_a: str, source_b: str, backend: str = "cpu",
            config: VerifyConfig | None = None) -> dict:
    """Re-time two kernels back to back: both build in their own sandboxes, both must be correct, then
    paired rounds on the same fresh inputs. Returns B's speedup over A with its 95% interval
    (`speedup`, `lo`, `hi`, `noisy`, `a_ms`, `b_ms`, ...) or {"error": one line}."""
    from verifier.timing_stats import robust_paired

    config = config or VerifyConfig()
    be = get_backend(backend)
    be.check_available()
    isolated = isolation_mode(config)
    try:
        hack = AntiHackingGate(make_policy(config.policy, config.allow))
    except PolicyError as exc:
        raise VerifierError(str(exc)) from None
    for label, source in (("A", source_a), ("B", source_b)):
        static = hack.static(source, be.name) if config.static_scan else None
        if static is not None and static.status == FAIL:
            return {"error": f"kernel {label} is refused under the {hack.policy.label()} policy: {static.reason}",
                    "policy": hack.policy.to_dict()}
    quiet = lambda name, state: None  # noqa: E731
    run_a = _Run(reference_source, source_a, be, config, isolated, quiet)
    run_b = _Run(reference_source, source_b, be, config, isolated, quiet)
    try:
        run_a.start_candidate()
        run_a.prepare_reference()
        run_b.start_candidate()
        run_b.reference, run_b.init_seed = run_a.reference, run_a.init_seed
        shutil.rmtree(run_b.trusted_dir, ignore_errors=True)
        run_b.trusted_dir = run_a.trusted_dir
        run_a.shares_inputs = True
        for label, run in (("A", run_a), ("B", run_b)):
            if run.build_candidate() is None:
                return {"error": f"kernel {label} did not build: {CompileGate().evaluate(run.evidence()).reason}"}
            correct = run.correctness()
            if not correct.passed:
                return {"error": f"kernel {label} is not correct: {correct.reason}"}
        rounds = _timed_rounds(run_a, [run_a, run_b], lambda m, keep: robust_paired(
            m[1], m[2], keep, rng_seed=0, noisy_halfwidth=config.noise_halfwidth))
        if rounds is None:
            why = (run_a.timing_violation or run_b.timing_violation
                   or (run_a.timed_mismatch or run_b.timed_mismatch or {}).get("fail") or "a kernel failed while timing")
            return {"error": why}
        est, means, count, checked, clock = rounds
        out = est.to_dict()
        out.update(a_ms=est.ref_ms, b_ms=est.cand_ms, rounds=len(means[0]), calls_per_round=count,
                   threads=_threads(config), checked_calls=checked, sampled_checks=checked, isolated=isolated,
                   reference_ms=_median(means[0]),
                   clock={"a": _clock_detail(clock, means, count, 0), "b": _clock_detail(clock, means, count, 1)})
        return out
    except JobTampered as exc:
        return {"error": f"a kernel tampered with its job directory: {exc}"}
    finally:
        run_b.ref_held = None
        run_b.trusted_dir = None
        for run in (run_b, run_a):
            with contextlib.suppress(Exception):
                run.finish_candidate()
            run.close()


def _cached_verdict(root: Path, key: str, isolated: bool) -> VerificationResult | None:
    from verifier.trusted import load_verdict

    found = load_verdict(root, key)
    if found is None:
        return None
    data, stored_at = found
    try:
        cached = VerificationResult.from_dict(data)
    except (KeyError, TypeError, ValueError):
        return None
    if cached.isolated != isolated:
        return None
    cached.cached = True
    cached.measured_at = cached.measured_at or stored_at
    cached.notes = [*cached.notes, f"cached verdict: {cached.timing_label()}"]
    return cached


class _Run:
    """The state of one verification: the run directory, both workers and what they reported."""

    def __init__(self, reference_source: str, candidate_source: str, be: Backend, config: VerifyConfig,
                 isolated: bool, notify: GateCallback):
        self.reference_source, self.candidate_source = reference_source, candidate_source
        self.be, self.config, self.isolated, self.notify = be, config, isolated, notify
        self.rng = random.Random(secrets.randbits(64))
        self.reference: dict = {}
        self.candidate: dict = {"trials": [], "kernel_calls": []}
        self.clean_exit = False
        self.job: LiveJob | None = None
        self.job_dir: Path | None = None
        self.ref_held: tuple[LiveJob, Path] | None = None
        self.trusted_dir: Path | None = None
        self.audit_findings: list = []
        self.shares_inputs = False  # another run reads the same trusted inputs after this one (compare)
        self.timing_violation: str | None = None
        self.timed_mismatch: dict | None = None  # a timed call whose output was wrong
        self.prepare_pending = False  # a prepare command is out at the reference worker
        self.phases: dict[str, float] = {}  # seconds per phase, in order (VerificationResult.phases)
        self._lap_at = time.monotonic()

    def lap(self, phase: str) -> None:
        """Close `phase`: the seconds since the previous lap are added to it."""
        now = time.monotonic()
        self.phases[phase] = self.phases.get(phase, 0.0) + now - self._lap_at
        self._lap_at = now

    def seed(self) -> int:
        return self.rng.randrange(1, 2**31 - 1)

    # phases -----------------------------------------------------------------------------------------
    def execute(self, static: GateResult, hack: AntiHackingGate) -> list[GateResult]:
        self.start_candidate()
        self.lap("start")
        self.send_prepare()  # the trusted reference prepares while the candidate builds
        self.notify("compile", "running")
        ready = self.build_candidate()
        self.lap("construct")
        gates = [static]
        if ready is None:
            if self.candidate.get("phase") != "error":
                self.candidate["phase"] = "build"
            compile_gate = CompileGate().evaluate(self.evidence())
            gates.append(compile_gate)
            if compile_gate.passed:
                gates.append(CorrectnessGate().failure(self.evidence(), time.monotonic()))
            return gates
        self.notify("compile", PASS)
        self.audit()
        self.lap("audit")
        self.notify("correctness", "running")
        correct = self.correctness()
        self.lap("correctness")
        self.finish_reference()  # the rest of what the reference reports (its trials are all in by now)
        self.lap("reference wait")
        compile_gate = CompileGate().evaluate(self.evidence())
        gates.append(compile_gate)
        profiled = correct.passed and self.profile()
        self.lap("profile")
        if correct.passed and self.config.time_kernels:
            self.notify("latency", "running")
        latency = self.latency() if correct.passed and self.config.time_kernels and profiled else None
        self.lap("latency")
        if self.timed_mismatch is not None:
            detail = {k: v for k, v in self.timed_mismatch.items() if k != "fail"}
            correct = GateResult("correctness", FAIL, correct.seconds, self.timed_mismatch["fail"],
                                 {**detail, "during": "timing"})
            latency = None
        self.audit()
        self.finish_candidate()
        self.lap("finish")
        ev = self.evidence()
        if compile_gate.passed:  # again, with every build of the run: Triton compiles at a kernel's first launch
            gates[1] = compile_gate = CompileGate().evaluate(ev)
        dyn = hack.dynamic(ev, _ignored_ops()) if correct.passed or self.candidate["trials"] else None
        findings = [*self.audit_findings, *([("timed-output", self.timing_violation)] if self.timing_violation else [])]
        if dyn is not None and findings:
            dyn = _with_findings(hack, dyn, findings)
        if dyn is not None and dyn.status == FAIL:
            dyn.seconds += static.seconds
            gates[0] = dyn
            gates.append(correct if correct.status == FAIL else GateResult("correctness", SKIP, 0.0, "anti-hacking failed"))
            return gates
        if dyn is not None:
            _merge_passes(static, dyn, hack.policy)
        gates.append(correct)
        if correct.passed:
            if latency is not None:
                gates.append(latency)
            elif self.config.time_kernels:
                gates.append(GateResult("latency", FAIL, 0.0, _no_result(self, "while timing")))
            gates.append(ProfileGate().evaluate(ev))
            if self.config.ncu:
                self.ncu_profile = gates[-1]
        return gates

    def start_candidate(self) -> None:
        key = _spare_key(self.config, self.be, self.isolated)
        warm = self.config.warm_worker and os.environ.get("EVOKERNEL_WARM_WORKER") != "0"
        spare = _SPARES.take(key) if warm else None
        if spare is not None:
            self.job, self.job_dir = spare
            self.spare = True
        else:
            self.job, self.job_dir = _start_candidate(self.config, self.be, self.isolated, wait=True)
        self.job.on_mark = self._on_mark
        if warm:
            _SPARES.refill(key, lambda: _start_candidate(self.config, self.be, self.isolated, wait=True))
        self.trusted_dir = self.job_dir.parent / "trusted"
        self.trusted_dir.mkdir(mode=0o700)

    def prepare_reference(self) -> None:
        self.send_prepare()
        self.await_reference()
        self.finish_reference()

    def send_prepare(self) -> None:
        """Ask the trusted reference worker for this verification's init arguments, weights, trials and
        profile set, all written under the trusted directory (handed to the candidate only later)."""
        self.ref_held = _REFERENCE.get(self.reference_source, self.be, self.config)
        ref, task = self.ref_held
        assert self.job_dir is not None and self.trusted_dir is not None
        for sub in ("init", "weights"):
            (self.trusted_dir / sub).mkdir()
        dists = [d for d in self.config.input_distributions if d] or ["task"]
        trials = []
        for i in range(max(1, self.config.trials)):
            d = self.trusted_dir / f"trial{i}"
            d.mkdir()
            trials.append({"seed": self.seed(), "dir": str(d), "dist": dists[i % len(dists)]})
        from verifier.probes import probe_trials

        for spec in probe_trials(self.config):  # the numerics probes: more trials, after the ordinary ones
            d = self.trusted_dir / f"trial{len(trials)}"
            d.mkdir()
            trials.append({**spec, "seed": self.seed(), "dir": str(d)})
        (self.trusted_dir / "profile").mkdir()
        self.init_seed = self.seed()
        self.profile_seed = self.seed()
        cmd = {"cmd": "prepare", "task_path": str(task), "init_seed": self.init_seed, "trials": trials,
               "init_dir": str(self.trusted_dir / "init"), "weights_dir": str(self.trusted_dir / "weights"),
               "profile_dir": str(self.trusted_dir / "profile"), "profile_seed": self.profile_seed,
               "device": self.be.device, "threads": _threads(self.config),
               "compare_compile": self.config.compare_compile,
               # seeded inputs (issue 22): off only to measure or test the file path
               "recipe": (self.config.extra or {}).get("seeded_inputs", True) is not False}
        if not ref.send(cmd):
            raise VerifierError("the reference worker could not be started; check the task with `evokernel tasks`")
        self.prepare_pending = True

    def await_reference(self) -> None:
        """The reference's init arguments, weights and input recipe (`init_ready`); its trials follow one by
        one (`reference_trial`), the rest with `prepared` (`finish_reference`). Raises VerifierError when
        the task itself fails."""
        if not self.prepare_pending or self.ref_held is None or self.reference:
            return
        mark = self._reference_mark({"init_ready"})
        if mark["phase"] == "init_ready":
            self.reference = {"recipe": mark.get("recipe"), "input_distribution": mark.get("input_distribution", ""),
                              "device_name": mark.get("device_name", ""), "trials": []}
        self._checked_reference()

    def reference_trial(self, i: int) -> dict | None:
        """Trial `i` of the reference, waiting for it if the worker is still drawing it (None: no such trial)."""
        while self.prepare_pending and len(self.reference.get("trials", [])) <= i:
            mark = self._reference_mark({"trial_ready"})
            if mark["phase"] == "trial_ready" and isinstance(mark.get("trial"), dict):
                self.reference["trials"].append(mark["trial"])
                self._checked_reference()
        trials = self.reference.get("trials", [])
        return trials[i] if i < len(trials) else None

    def finish_reference(self) -> None:
        """Everything the reference reports (`prepared`): its profile, sizes, timings."""
        while self.prepare_pending:
            mark = self._reference_mark({"init_ready", "trial_ready"})
            if mark["phase"] == "trial_ready" and isinstance(mark.get("trial"), dict):
                self.reference.setdefault("trials", []).append(mark["trial"])
        self._checked_reference()

    def _reference_mark(self, phases: set[str]) -> dict:
        """The reference worker's next mark in `phases`, or its `prepared` (which ends the preparation);
        VerifierError when it failed or did not finish."""
        assert self.ref_held is not None
        mark = self.ref_held[0].expect({*phases, "prepared", "error"}, self.config.run_timeout_s * 3)
        if mark is None or mark.get("phase") == "error":
            self.prepare_pending = False
            self._drop_reference()
            if mark is None:
                raise VerifierError("the reference task did not finish (too slow or out of memory?); check it with "
                                    "`evokernel tasks`, or raise --timeout / --memory-gb")
            raise VerifierError(f"the reference task failed: {mark.get('error_type')}: {str(mark.get('error', ''))[:200]}")
        if mark.get("phase") == "prepared":
            self.prepare_pending = False
            self.reference = mark
        return mark

    def _checked_reference(self) -> None:
        self.reference["profile_seed"] = self.profile_seed
        if not _valid_recipe(self.reference.get("recipe")):
            self.reference["recipe"] = None
        for i, t in enumerate(self.reference.get("trials", [])):
            t["dir"] = f"trial{i}"

    def _drop_reference(self) -> None:
        if self.ref_held is not None:
            self.ref_held[0].kill()
            self.ref_held = None

    def write_job(self) -> None:
        assert self.job_dir is not None
        cand = self.job_dir / "candidate.py"
        cand.write_text(self.candidate_source)
        (self.job_dir / "build").mkdir()
        job = {"candidate_path": str(cand), "backend": self.be.name, "device": self.be.device,
               "installer": self.be.installer, "build_root": str(self.job_dir / "build"),
               "shared_build_root": str(self.config.root() / "shared"), "build_timeout_s": self.config.build_timeout_s,
               "threads": _threads(self.config), "init_seed": self.init_seed,
               "gpu_memory_fraction": self.config.gpu_memory_fraction, **self.be.job_fields()}
        (self.job_dir / "job.json").write_text(json.dumps(job))

    def build_candidate(self) -> dict | None:
        assert self.job is not None
        self.write_job()
        if not self.job.send({"cmd": "go"}):
            return None
        mark = self.job.expect({"imported", "report"}, self.config.build_timeout_s, on_other=self._serve_request)
        self.lap("build")
        if mark is None or mark.get("phase") == "report":
            self._take_report(mark)
            return None
        self.await_reference()
        self.lap("reference wait")
        assert self.trusted_dir is not None
        dirs = {}
        for sub in ("init", "weights"):
            dirs[sub] = self._job_subdir(sub)
            self._hand_over(self.trusted_dir / sub, dirs[sub], "", move=not (self.shares_inputs or self.config.ncu))
        # the recipe is not secret (it is `get_inputs()` read on the meta device); the seeds are, and each
        # is revealed only in the command that uses it
        self.job.send({"cmd": "construct", "init": dirs["init"].name, "weights": dirs["weights"].name,
                       "recipe": self.reference.get("recipe")})
        mark = self.job.expect({"ready", "report"}, self.config.run_timeout_s, on_other=self._serve_request)
        if mark is None or mark.get("phase") == "report":
            self._take_report(mark)
            return None
        self.candidate.update({k: mark.get(k) for k in ("builds", "import_seconds", "patched", "weights", "threads")})
        self.candidate["phase"] = "ready"
        self.harness_pid = self.job.job_pid()
        return mark

    def _serve_request(self, mark: dict) -> None:
        """A sandboxed build asks for a shared artefact: the trusted side builds it after checking it."""
        if mark.get("phase") != "need" or self.job is None:
            return
        spec = mark.get("spec") if isinstance(mark.get("spec"), dict) else {}
        kind = str(mark.get("kind"))
        shared = self.config.root() / "shared"
        job, timeout = self.job, self.config.build_timeout_s
        asked = self.__dict__.setdefault("trusted_builds", set())
        request = json.dumps([kind, spec], sort_keys=True, default=str)
        if request in asked or len(asked) >= MAX_TRUSTED_BUILDS:
            # a flood of requests must not become a flood of compilers outside the sandbox: answered at
            # once, so the sandbox builds what it needs itself
            job.send({"cmd": "built", "kind": kind})
            return
        asked.add(request)

        logs = self.config.root() / "trusted" / "build-logs"
        # In the background: the candidate keeps compiling its kernel meanwhile. The build belongs to this
        # verification (`trusted_builds.TrustedBuilds`): at most a few run at once, and `close` kills what
        # is still running and removes its half-written artefacts. Its output is kept (trusted side only)
        # so a build that produced nothing can be explained.
        from verifier.trusted_builds import TrustedBuilds, run_in_background

        owned = self.__dict__.setdefault("owned_builds", TrustedBuilds(shared))
        run_in_background(owned, [sys.executable, "-m", "verifier.build", "--shared", str(shared), kind, json.dumps(spec)],
                          {**_trusted_env(), "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
                          logs / f"{kind}-{uuid.uuid4().hex[:8]}.log", timeout,
                          lambda: job.send({"cmd": "built", "kind": kind}), f"evokernel-trusted-build-{kind}")

    def _on_mark(self, mark: dict) -> None:
        if mark.get("phase") == "source":
            self.candidate.setdefault("sources", []).append(mark)

    def _take_report(self, mark: dict | None) -> None:
        if mark is not None and isinstance(mark.get("report"), dict):
            from verifier.gates import bounded_report

            report = bounded_report(mark["report"])  # candidate text in a verdict is bounded
            keep = {k: report[k] for k in ("phase", "failed_phase", "error_type", "error", "traceback", "build_error",
                                           "builds", "threads_after_forward", "patched_after_forward")
                    if k in report}
            self.candidate.update(keep)

    def _job_subdir(self, prefix: str) -> HeldDir:
        """A fresh directory in the job, made in the run's hidden `stage` area, opened there and only
        then renamed into the job (`jobfiles.create_held`): the descriptor it returns is what every
        later write and read of it uses, whatever the candidate renames or links meanwhile. Closed by
        `close`."""
        assert self.job_dir is not None
        name = f"{prefix}-{secrets.token_hex(8)}"
        try:
            held = create_held(self.job_dir.parent / "stage", self.job_dir, name)
        except OSError as exc:
            raise JobTampered(f"{name} could not be placed in the job ({exc.strerror or exc})") from None
        self.__dict__.setdefault("held_dirs", []).append(held)
        return held

    def _hand_over(self, src: Path, dst: Path | HeldDir, prefix: str, move: bool = True) -> None:
        """Files written by the trusted side (one call's inputs: `prefix`.json and `prefix`*.npy; every
        file when `prefix` is empty) into a fresh directory of the job, just before they are needed:
        moved (a rename, no copy) when no one else needs them, copied otherwise. The candidate can
        write in the job while this runs, so the directory is opened without following links and
        every file is created relative to it: a directory swapped for a link cannot redirect the
        trusted side's writes out of the job. What stays trusted is the reference's outputs and
        digests, never these files."""
        names = ([f.name for f in src.iterdir() if f.is_file()] if not prefix
                 else [f"{prefix}.json", *(f.name for f in src.glob(f"{prefix}*.npy"))])
        if isinstance(dst, HeldDir):  # the descriptor held since creation: nothing to look up by name
            fd = os.dup(dst.fd)
        else:
            try:
                fd = os.open(dst, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            except OSError as exc:
                raise JobTampered(f"{dst.name} was replaced while the verifier handed inputs over ({exc.strerror})") from None
        try:
            for name in names:
                if move:
                    os.replace(src / name, name, dst_dir_fd=fd)
                    continue
                try:
                    out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=fd)
                except FileExistsError:
                    raise JobTampered(f"{name} appeared in {dst.name} before the verifier wrote it") from None
                with open(src / name, "rb") as fin, os.fdopen(out, "wb") as fout:
                    shutil.copyfileobj(fin, fout, 1 << 20)
        finally:
            os.close(fd)

    def _check_held(self, held: HeldDir, trusted: Path) -> None:
        """Belt and braces: the held descriptor is never a trusted directory (it cannot be, since the
        trusted side made it; a failure here means a bug or a tampered scratch)."""
        mine, theirs = os.fstat(held.fd), os.stat(trusted)
        for st in (theirs, os.stat(self.trusted_dir) if self.trusted_dir is not None else None):
            if st is not None and (mine.st_dev, mine.st_ino) == (st.st_dev, st.st_ino):
                raise JobTampered(f"{held.name} is the verifier's own trusted directory")

    def _drop_held(self, held: HeldDir) -> None:
        """Empty a finished hand-over directory through its descriptor (its files are RAM on tmpfs),
        then close it; its now empty entry goes with the run directory."""
        with contextlib.suppress(OSError):
            empty_dir(held.fd, time.monotonic() + 30)
        held.close()

    def correctness(self) -> GateResult:
        """The trials, then the numerics probes (`verifier.probes`), every one compared by the parent from
        the files of its held directory; the probes' records go into the gate's detail (`probes`)."""
        from verifier import probes

        assert self.job is not None and self.trusted_dir is not None
        deadline = time.monotonic() + self.config.run_timeout_s
        start = time.monotonic()
        atol, rtol = self.config.atol, self.config.rtol
        worst_abs = worst_rel = 0.0
        logged: list[tuple[int, dict]] = [(-1, r) for r in probes.off_records(self.config)]

        def log(at: int, rt: dict | None, status: str, reason: str = "") -> list[dict]:
            """Record a probe; the records so far, in trial order (a skip is seen before the trial ahead of it ends)."""
            if rt is not None:
                logged.append((at, probes.record(rt, status, reason)))
            return [r for _, r in sorted(logged, key=lambda x: x[0])]

        probe_plan = decoy.plan(self.rng, max(1, self.config.trials))  # the decoy probe (verifier/decoy.py)

        def send_trial(i: int, rt: dict) -> HeldDir:
            d = self._job_subdir(f"t{i}")
            if self.reference.get("recipe") is None:
                self._hand_over(self.trusted_dir / rt["dir"], d, "in", move=not self.shares_inputs and i != probe_plan["of"])
                self.job.send({"cmd": "trial", "dir": d.name, "index": i})
            else:  # the harness draws the trial's inputs from its seed, revealed now
                cmd = {"cmd": "trial", "dir": d.name, "index": i, "seed": rt["seed"], "dist": rt.get("dist", "task")}
                if rt.get("probe") == probes.SHAPE:  # drawn from the held-out recipe; raising there is allowed
                    cmd.update(recipe=rt["recipe"], may_refuse=True)
                self.job.send(cmd)
            return d

        def next_trial(i: int) -> tuple[int, dict | None]:
            """The next trial from `i` on that the candidate runs; the probes the reference skipped are recorded."""
            while (rt := self.reference_trial(i)) is not None:
                if rt.get("probe") and "skip" in rt:
                    log(i, rt, "skip", str(rt["skip"])[:300])
                elif rt.get("probe") == probes.SHAPE and (self.reference.get("recipe") is None
                                                          or not _valid_recipe(rt.get("recipe"))):
                    log(i, rt, "skip", "no input recipe for a held-out shape")
                else:
                    return i, rt
                i += 1
            return i, None

        def label_of(rt: dict) -> str:
            if rt.get("probe") == probes.SHAPE:
                return f"held-out shapes {rt.get('label', '')} (seed {rt['seed']})"
            if rt.get("probe"):
                return f"{rt.get('name') or rt.get('dist')} (seed {rt['seed']})"
            return f"trial {i} (seed {rt['seed']}, {rt.get('dist', 'task')} inputs)"

        i, rt = next_trial(0)
        if rt is None:
            raise VerifierError("the reference task reported no trials")
        d = send_trial(i, rt)
        trials = 0
        while rt is not None:
            mark = self.job.expect({"trial_done", "report"}, max(1.0, deadline - time.monotonic()))
            if mark is None or mark.get("phase") == "report":
                self._take_report(mark)
                self.candidate["failed_phase"] = self.candidate.get("failed_phase", "correctness")
                gate = CorrectnessGate().failure(self.evidence(), start)
                if rt.get("probe"):
                    gate.detail["probes"] = log(i, rt, "fail", gate.reason)
                    gate.reason = f"{label_of(rt)}: {gate.reason}"
                return gate
            self.candidate["kernel_calls"].append(int(mark.get("kernel_calls") or 0))
            probe = mark.get("gpu_probe")
            if isinstance(probe, dict):  # the GPU side-stream probe (verifier.gpu_timing.gpu_findings reads it)
                self.candidate.setdefault("gpu_probes", []).append(
                    {"pending_ms": float(probe.get("pending_ms") or 0.0), "changed": bool(probe.get("changed"))})
            self.candidate["trials"].append({"seed": rt["seed"]})
            # the harness runs the next trial while this one is compared (its files are in their own folder)
            ni, following = next_trial(i + 1)
            decoy_trial = not rt.get("probe")  # the decoy probe replays an ordinary trial, after one
            if decoy_trial and i == probe_plan["of"]:
                probe_plan["rt"] = rt  # kept: a `prepared` mark may replace self.reference meanwhile
            probe_dir = (self.send_probe(probe_plan["rt"], i)  # before the next trial
                         if decoy_trial and i == probe_plan["after"] and "rt" in probe_plan else None)
            after = send_trial(ni, following) if following is not None else None
            refused = mark.get("refused")
            if refused is not None:  # the candidate raised; allowed on a held-out shape only
                text = " ".join(str(refused).split())[:240]
                if rt.get("probe") == probes.SHAPE:
                    log(i, rt, "refused", text)
                    i, rt, d = ni, following, after
                    continue
                verdict = {"fail": f"{label_of(rt)}: forward raised {text}"}
            else:
                self._check_held(d, self.trusted_dir / rt["dir"])
                verdict = compare_files(d, self.trusted_dir / rt["dir"], mark.get("outputs"), rt["outputs"],
                                        atol, rtol, self.config, label=label_of(rt),
                                        after_digests=rt.get("after_digests"),
                                        magnitude=rt.get("probe") == probes.MAGNITUDE)
            if rt.get("probe"):
                log(i, rt, "fail" if verdict.get("fail") else "pass", verdict.get("fail", ""))
            if verdict.get("fail"):
                return GateResult("correctness", FAIL, time.monotonic() - start, verdict["fail"],
                                  {k: v for k, v in verdict.items() if k != "fail"}
                                  | {"trial": i, "probes": log(i, None, ""), **self.inputs_detail()})
            if not rt.get("probe"):
                trials += 1
                worst_abs, worst_rel = max(worst_abs, verdict["max_abs"]), max(worst_rel, verdict["max_rel"])
            if decoy_trial and i == probe_plan["of"]:
                probe_plan["digests"] = self.output_digests(d, mark.get("outputs"))
            if probe_dir is not None and not self.await_probe(probe_dir, probe_plan, deadline):
                return CorrectnessGate().failure(self.evidence(), start)
            i, rt, d = ni, following, after
        return GateResult("correctness", PASS, time.monotonic() - start, "",
                          {"trials": trials, "max_abs": worst_abs, "max_rel": worst_rel, "atol": atol,
                           "rtol": rtol, "weights": self.candidate.get("weights"), "threads": _threads(self.config),
                           "probes": log(i, None, ""), **self.inputs_detail()})

    def send_probe(self, rt: dict, index: int) -> HeldDir:
        """The decoy probe (`verifier/decoy.py`): the inputs of reference trial `rt` again, every
        custom-kernel result replaced by garbage in the harness; the harness's next command after trial `index`."""
        assert self.job is not None and self.trusted_dir is not None
        d = self._job_subdir(f"t{index + 1}")  # named as a trial's folder
        if self.reference.get("recipe") is None:
            self._hand_over(self.trusted_dir / rt["dir"], d, "in", move=not self.shares_inputs)
            self.job.send({"cmd": "probe", "dir": d.name, "index": index + 1})
        else:
            self.job.send({"cmd": "probe", "dir": d.name, "index": index + 1, "seed": rt["seed"],
                           "dist": rt.get("dist", "task")})
        return d

    def output_digests(self, d: HeldDir, outputs) -> list[str] | None:
        try:
            return _output_digests(d, outputs, self.config)
        except Exception:  # noqa: BLE001 - unreadable outputs: no decoy finding from this probe
            return None

    def await_probe(self, d: HeldDir, probe_plan: dict, deadline: float) -> bool:
        """The probe's result (the harness's next `trial_done`), recorded for the anti-hacking gate as
        `decoy_probe`; False when the harness died meanwhile."""
        assert self.job is not None
        mark = self.job.expect({"trial_done", "report"}, max(1.0, deadline - time.monotonic()))
        if mark is None or mark.get("phase") == "report":
            self._take_report(mark)
            self.candidate["failed_phase"] = self.candidate.get("failed_phase", "correctness")
            return False
        found = mark.get("probe") if isinstance(mark.get("probe"), dict) else {}
        def count(v) -> int:  # a claim of the candidate's process: anything but a plain count is none
            return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else 0

        record = {"trial": probe_plan["of"], "kernel_calls": count(found.get("kernel_calls")),
                  "replaced": count(found.get("replaced")), "results": count(found.get("results")),
                  "copies": count(found.get("copies")), "error": str(found.get("error") or "")[:300],
                  "trial_digests": probe_plan.get("digests")}
        if not record["error"]:
            record["probe_digests"] = self.output_digests(d, mark.get("outputs"))
        self.candidate["decoy_probe"] = record
        self._drop_held(d)
        return True

    def inputs_detail(self) -> dict:
        """What the verdict says of the inputs: their distribution and how they reached the candidate."""
        seeded = self.reference.get("recipe") is not None
        return {"input_distribution": self.reference.get("input_distribution", ""),
                "inputs": "seeded (drawn on the device from seeds revealed per call)" if seeded
                else "files (drawn on the CPU by the trusted side)"}

    def profile(self) -> bool:
        assert self.job is not None and self.trusted_dir is not None
        self.notify("profile", "running")
        if self.reference.get("recipe") is None:
            d = self._job_subdir("p")
            self._hand_over(self.trusted_dir / "profile", d, "in", move=False)
            self.job.send({"cmd": "profile", "dir": d.name})
        else:
            self.job.send({"cmd": "profile", "seed": self.reference["profile_seed"]})
        mark = self.job.expect({"profile_done", "report"}, self.config.run_timeout_s)
        if mark is None or mark.get("phase") == "report":
            self._take_report(mark)
            return False
        for k in ("profile", "ops_run", "work_split", "profile_device_ms", "profile_kernel_calls"):
            if k in mark:
                self.candidate[k] = mark[k]
        return True

    def latency(self) -> GateResult | None:
        """Paired rounds against the trusted reference (see `_timed_rounds`), as the latency gate."""
        from verifier.timing_stats import robust_paired

        start = time.monotonic()
        rounds = _timed_rounds(self, [self], lambda means, keep: robust_paired(
            means[0], means[1], keep, rng_seed=0, noisy_halfwidth=self.config.noise_halfwidth))
        if rounds is None:
            if self.candidate.get("ref_timing_failed"):
                return GateResult("latency", FAIL, time.monotonic() - start, "the reference failed while timing")
            return None
        est, means, count, checked, clock = rounds
        if est.rounds == 0 and clock.get("resolved"):
            # every round was disturbed (a busy machine, or the app's own event loop beside the verifier):
            # an estimate from the rounds the overhead did not swallow, said noisy (no speed claim)
            fallback = robust_paired(means[0], means[1], clock["resolved"], rng_seed=0,
                                     noisy_halfwidth=self.config.noise_halfwidth)
            est = dataclasses.replace(fallback, noisy=True)
        detail = est.to_dict()
        # the candidate's time as the paired ratio implies it, so latency and reference give the verdict's speedup
        implied_ms = est.ref_ms / est.speedup if est.speedup > 0 else est.cand_ms
        detail.update(median_ms=implied_ms, reference_ms=est.ref_ms, runs=len(means[1]) * count,
                      calls_per_round=count, rounds=len(means[1]), threads=_threads(self.config),
                      checked_calls=checked, sampled_checks=checked, times_ms=means[1][:200],
                      reference_times_ms=means[0][:200], **_clock_detail(clock, means, count))
        moved = int(self.reference.get("input_bytes", 0)) + int(self.reference.get("output_bytes", 0))
        if moved and est.cand_ms > 0:
            detail["gbps"] = moved / (est.cand_ms / 1000.0) / 1e9
            detail["reference_gbps"] = moved / (est.ref_ms / 1000.0) / 1e9
        comp = self.reference.get("compiled_times_ms")
        if comp:
            comp_med = _median(comp)
            detail.update(compiled_ms=comp_med, speedup_vs_compile=comp_med / est.cand_ms if est.cand_ms > 0 else None)
        reason = ("noisy: " + (detail["busy"] or "the interval stayed wide")) if est.noisy else ""
        if est.rounds == 0:
            # every round was disturbed or left the calls no measurable share of its time: no figure at
            # all rather than one from rounds that were thrown out (clamped rounds read as 90000x)
            detail.update(median_ms=None, reference_ms=None, no_figure=True, gbps=None, reference_gbps=None)
            reason = "noisy: no round could be measured (" + (detail["busy"] or "the overhead swallowed the calls") + ")"
        return GateResult("latency", PASS, time.monotonic() - start, reason, detail)

    def timed_round(self, rdir: Path, ref_mark: dict, count: int, r: int, sample: list[int],
                    seeds: list[int] | None = None) -> list[float] | None:
        """This candidate's timed round on the round's input sets (drawn by the harness from `seeds`, sent
        with the command, for a task with a recipe; else the files in `rdir`), then a check of every
        call's outputs (`sample` lists them all) against the reference's, read through the round
        directory's held descriptor; None (with `timing_violation` or the report set) when it fails."""
        assert self.job is not None
        d = self._job_subdir(f"r{r}")
        seeded = self.reference.get("recipe") is not None and seeds is not None
        for k in range(0 if seeded else count):
            self._hand_over(rdir, d, f"s{k}_in", move=not self.shares_inputs)
        # outputs are copied after their inputs were overwritten (a view of the input shows), unless the
        # reference's own outputs alias its inputs (an in-place task), where that is the right answer
        aliasing = any(o.get("aliases_input") for t in self.reference.get("trials", []) for o in t.get("outputs", []))
        pre = self.sandbox_cpu()  # the sandbox's CPU so far, and its run-queue wait: read before the clock starts
        wall0 = time.monotonic()
        self.job.send({"cmd": "round", "dir": d.name, "count": count, "detach_inputs": not aliasing,
                       **({"seeds": seeds} if seeded else {})})
        cmark = self.job.expect({"timing_end", "report"}, max(1.0, self.config.run_timeout_s))
        wall_ms = (time.monotonic() - wall0) * 1000.0
        post = self.sandbox_cpu()
        if cmark is None or cmark.get("phase") == "report":
            self._take_report(cmark)
            return None
        times = [float(t) for t in cmark.get("times_ms") or [] if isinstance(t, (int, float))]
        calls = cmark.get("kernel_calls")  # per timed call (verifier/decoy.py: custom-kernel-skipped)
        timed = self.candidate.setdefault("timed_forwards", [0, 0])  # [timed calls, calls without the kernel]
        timed[0] += count
        timed[1] += count - sum(1 for c in (calls if isinstance(calls, list) else [])[:count] if isinstance(c, int) and c > 0)
        if len(times) != count or any(t < 0 for t in times):
            self.timing_violation = f"round {r + 1} reported {len(times)} timings for {count} calls"
            return None
        if wall_ms > 50 and sum(times) > wall_ms * 1.05:
            self.timing_violation = f"round {r + 1} reported {sum(times):.1f} ms in {wall_ms:.1f} ms of wall time"
            return None
        if self.be.device == "cpu":
            checked = self.check_frozen(cmark, rdir, ref_mark, count, r)
            self.record_round(wall_ms, pre, post)
            self._drop_held(d)
            return times if checked else None
        # device memory cannot be read from /proc: blocks drawn after the round, saved by both sides
        ok = self.check_blocks(d, rdir, ref_mark, count, r)
        self.record_round(wall_ms, pre, post)
        self._drop_held(d)
        return times if ok else None

    def check_blocks(self, d: HeldDir, rdir: Path, ref_mark: dict, count: int, r: int) -> bool:
        """The GPU's check of a timed round: for every call and output, blocks chosen here after the round
        ended (random offsets, and the tail), saved by the harness and by the trusted reference worker
        (which kept its outputs on the device) and compared. Device memory cannot be read from /proc,
        so the save still runs after the clock; the device-resident comparison of issue 22 is to close that."""
        ref = getattr(self, "round_reference", None)  # the reference worker of the round (compare: one for both)
        blocks = choose_blocks(self.rng, [[int(math.prod(m.get("shape") or [1])) for m in outs]
                                          for outs in ref_mark["outputs"][:count]])
        tag = "b" + secrets.token_hex(4)
        self.job.send({"cmd": "save", "dir": d.name, "blocks": blocks, "tag": tag})
        smark = self.job.expect({"saved", "report"}, self.config.run_timeout_s)
        if smark is None or smark.get("phase") == "report":
            self._take_report(smark)
            return False
        if ref is None or not ref.send({"cmd": "save_blocks", "dir": str(rdir), "blocks": blocks, "tag": tag}):
            self.candidate["ref_timing_failed"] = True
            return False
        rmark = ref.expect({"blocks_saved", "error"}, self.config.run_timeout_s)
        if rmark is None or rmark.get("phase") != "blocks_saved":
            self.candidate["ref_timing_failed"] = True
            return False
        self._check_held(d, rdir)
        saved = smark.get("outputs") if isinstance(smark.get("outputs"), dict) else {}
        for k in range(count):
            want = rmark["outputs"].get(str(k)) or []
            verdict = compare_files(d, rdir, saved.get(str(k)), want, self.config.atol, self.config.rtol, self.config,
                                    label=f"timed call {k + 1} of round {r + 1} (blocks)")
            if verdict.get("fail"):
                self.timed_mismatch = verdict
                self.timed_mismatch["fail"] = f"{verdict['fail']} — {FRESH_OUTPUTS}"
                return False
            self.checked_calls = getattr(self, "checked_calls", 0) + 1
        return True

    def check_frozen(self, cmark: dict, rdir: Path, ref_mark: dict, count: int, r: int) -> bool:
        """Every output of the round just clocked, read from the candidate's paused process at the addresses
        its `timing_end` gave (`verifier/frozen_read.py`) and compared with the reference's for the same
        inputs; False (with `timed_mismatch` set) on the first that is wrong or cannot be read."""
        from verifier.frozen_read import FrozenReadError, paused, process_memory, read_output
        from verifier.gates import _load
        from verifier.mapped_audit import namespace_pids

        label = f"round {r + 1}"
        at = cmark.get("outputs_at")
        pid = getattr(self, "harness_pid", None)
        try:
            if not isinstance(at, list) or len(at) != count or pid is None:
                raise ValueError("the round's outputs were not reported where the verifier reads them")
            wants = [[_load(rdir, f"s{k}_out{j}.npy", self.config) for j in range(len(ref_mark["outputs"][k]))]
                     for k in range(count)]
            got: list[list] = []
            with paused(namespace_pids(pid)), process_memory(pid) as mem:
                for k in range(count):
                    claims = at[k] if isinstance(at[k], list) else []
                    if len(claims) != len(wants[k]):
                        raise ValueError(f"timed call {k + 1} of {label}: forward returned {len(claims)} outputs, "
                                         f"expected {len(wants[k])}")
                    got.append([read_output(mem, c if isinstance(c, dict) else {}, 8 * w.nbytes + 65536)
                                for c, w in zip(claims, wants[k], strict=True)])
        except (FrozenReadError, ValueError, OSError, KeyError, TypeError) as exc:
            self.timed_mismatch = {"fail": f"{label}: {exc}"}
            return False
        for k in range(count):
            for j, (g, w) in enumerate(zip(got[k], wants[k], strict=True)):
                ro = ref_mark["outputs"][k][j]
                spread = output_spread(w) if (self.config.extra or {}).get("degenerate") else None
                cmp = compare_tensor(g, w, str(at[k][j].get("dtype")), ro["dtype"], self.config.atol, self.config.rtol,
                                     f"output {j}", spread=spread)
                if not cmp.ok:
                    self.timed_mismatch = {
                        "fail": f"timed call {k + 1} of {label}: {cmp.reason} — {FRESH_OUTPUTS}",
                        "mismatch": cmp.mismatch, "max_abs": cmp.max_abs, "max_rel": cmp.max_rel}
                    return False
            self.checked_calls = getattr(self, "checked_calls", 0) + 1
        return True

    def sandbox_cpu(self):
        """CPU time of every process in the candidate's sandbox and the harness's run-queue wait."""
        from verifier.cpu_accounting import sample

        if self.job is None:
            return None
        reader = getattr(self.job, "_reader", None)
        return sample(self.job.proc.pid, getattr(self, "harness_pid", None),
                      (threading.get_native_id(), getattr(reader, "native_id", None)))

    def record_round(self, wall_ms: float, pre, post) -> None:
        """One timed round on the parent's clock: its wall time, the sandbox's CPU and the harness's wait
        over it, and the CPU the sandbox used since its previous round ended (it should have been idle)."""
        idle_from = getattr(self, "idle_from", None)
        facts = {"wall_ms": wall_ms, "cpu_ms": None, "wait_ms": None, "idle_cpu_ms": 0.0}
        if pre is not None and post is not None:
            facts.update(cpu_ms=(post.cpu_ns - pre.cpu_ns) / 1e6,
                         wait_ms=(post.wait_ns - pre.wait_ns + post.parent_wait_ns - pre.parent_wait_ns) / 1e6)
        if pre is not None and idle_from is not None:
            facts["idle_cpu_ms"] = max(0.0, (pre.cpu_ns - idle_from.cpu_ns) / 1e6)
        self.__dict__.setdefault("round_facts", []).append(facts)

    def ncu_job(self) -> Path:
        """A copy of this job for one profiled forward under Nsight Compute (`profile_once`)."""
        assert self.job_dir is not None and self.trusted_dir is not None
        work = self.job_dir.parent / "ncu-work"
        work.mkdir()
        shutil.copyfile(self.job_dir / "candidate.py", work / "candidate.py")
        for sub in ("init", "weights"):
            shutil.copytree(self.trusted_dir / sub, work / sub)
        (work / "profile").mkdir()
        job = json.loads((self.job_dir / "job.json").read_text())
        if self.reference.get("recipe") is None:
            self._hand_over(self.trusted_dir / "profile", work / "profile", "in", move=False)
        else:
            job.update(recipe=self.reference["recipe"], profile_seed=self.reference["profile_seed"])
        job.update(candidate_path=str(work / "candidate.py"), build_root=str(work / "build"))
        (work / "build").mkdir()
        (work / "job.json").write_text(json.dumps(job))
        return work

    def audit(self) -> None:
        """Every executable object mapped by any process of the candidate's PID namespace from a place it
        could write (or from outside the read-only trees), audited through the mapped object itself
        (`verifier.mapped_audit`) for what it imports (BLAS, ATen operators, dlopen, process creation,
        file and socket I/O); each split build's kernel object too. At the last audit, a run that claims
        its kernel ran must have a kernel object of its own build mapped."""
        pid = getattr(self, "harness_pid", None)
        if pid is None:
            return
        from verifier.binary_audit import KERNEL, audit
        from verifier.isolation import visible_trees
        from verifier.mapped_audit import audit_namespace, audit_objects

        read_only = [*visible_trees(), self.config.root() / "shared", Path("/dev")]
        launcher_cache = str(self.job_dir / "build" / "triton-cache") if self.job_dir is not None else None

        def expected(path: str, f) -> bool:  # Triton's own generated launcher loads the driver
            return (self.be.name == "triton" and launcher_cache is not None and path.startswith(launcher_cache)
                    and f.family in ("dynamic-loading", "python"))

        seen = audit_namespace(pid, self.job_dir, read_only, audit, expected)
        found = list(seen.findings)
        if self.job_dir is not None:
            build = self.job_dir / "build"
            objs = [obj for pattern in ("ext/*/kernel.o", "cuda/*/cuda.o") for obj in build.glob(pattern)]
            found += audit_objects(objs, lambda p: audit(p, profile=KERNEL))
        self.audits_done = getattr(self, "audits_done", 0) + 1
        self.mapped_job_objects = sorted({*getattr(self, "mapped_job_objects", []), *seen.job_objects})
        calls = [c for c in self.candidate.get("kernel_calls", []) if isinstance(c, int)]
        if (self.audits_done > 1 and self.be.counts_kernel_calls and self.candidate.get("builds") and any(calls)
                and not self.mapped_job_objects):
            found.append(("kernel-not-mapped", "the candidate claims its kernel ran, but no process in its sandbox "
                                               "has an object of its own build mapped"))
        for entry in found:
            if entry not in self.audit_findings:
                self.audit_findings.append(entry)

    def finish_candidate(self) -> None:
        if self.job is None:
            return
        self.job.send({"cmd": "finish"})
        mark = self.job.expect({"report"}, 10.0)
        self._take_report(mark)
        outcome = self.job.finish(timeout=5)
        self.outcome = outcome
        self.clean_exit = mark is not None and outcome.exit_code == 0 and not outcome.timed_out

    def evidence(self) -> Evidence:
        outcome = getattr(self, "outcome", None)
        marks = self.job.marks if self.job is not None else []
        if outcome is None and self.job is not None and (self.job.timed_out or self.job.proc.poll() is not None):
            self.outcome = outcome = self.job.finish(timeout=1)
        return Evidence(self.candidate_source, self.be.name, self.config, self.reference, self.trusted_dir,
                        self.candidate, self.job_dir, outcome, marks, self.be.counts_kernel_calls)

    def close(self) -> None:
        if (owned := self.__dict__.get("owned_builds")) is not None:
            owned.close()  # the trusted builds this run asked for end with it (killed, half-written files removed)
        if self.job is not None and self.job.proc.poll() is None:
            self.job.kill()
        if self.job is not None and getattr(self, "outcome", None) is None:
            with contextlib.suppress(Exception):
                self.outcome = self.job.finish(timeout=1)
        for held in self.__dict__.pop("held_dirs", []):
            held.close()
        if self.ref_held is not None and self.prepare_pending:
            # The candidate failed before its reference was needed: the worker goes back once its answer
            # is in (in the background, so a compile error is not held up by the reference).
            held, config, run_dir = self.ref_held, self.config, self.job_dir.parent if self.job_dir else None
            self.ref_held = None

            def drain() -> None:
                mark = held[0].expect({"prepared", "error"}, config.run_timeout_s * 3)
                if mark is None:
                    held[0].kill()
                _REFERENCE.give_back(self.reference_source, self.be, config, held)
                if run_dir is not None:
                    discard(run_dir, run_dir.parent.parent / "trash")

            threading.Thread(target=drain, name="evokernel-reference-drain", daemon=True).start()
            return
        if self.ref_held is not None:
            _REFERENCE.give_back(self.reference_source, self.be, self.config, self.ref_held)
        if self.job_dir is not None:  # never recursive, never stopped by what the candidate left (see jobfiles)
            discard(self.job_dir.parent, self.job_dir.parent.parent.parent / "trash")


def _attach_ncu(profile: GateResult, result: VerificationResult, be: Backend, config: VerifyConfig, work: Path) -> None:
    """Per-kernel ncu rows into the profile gate's detail (`ncu`), or a note saying why there are none.

    One forward on the profile inputs (`profile_once`), under the same isolation as the candidate's run,
    with Nsight Compute's toolkit and installation visible read-only (`ncu_install_dirs`)."""
    from verifier.ncu import ncu_argv, ncu_install_dirs, ncu_path, parse_ncu_csv

    ncu = ncu_path()
    if be.device != "cuda":
        result.notes.append("ncu summary skipped: it needs a GPU backend on a GPU")
        return
    if ncu is None:
        result.notes.append("ncu summary skipped: ncu (Nsight Compute) is not on PATH")
        return
    job_dir = work / "ncu"  # the run's control files; the harness reads the job from `work`
    job_dir.mkdir()
    job = json.loads((work / "job.json").read_text())
    (work / "job.json").write_text(json.dumps({**job, "profile_once": True}))
    log = job_dir / "ncu.csv"
    argv = ncu_argv(ncu, log, [sys.executable, "-m", "verifier.harness", str(work)])
    spec = None
    if config.isolate:
        spec = _sandbox_spec(work, config, be)
        spec.readonly.extend(ncu_install_dirs(ncu))
    env = _clean_env(be.child_env()) if spec is not None else {**_trusted_env(), **be.child_env()}
    job = LiveJob(argv, job_dir, _limits(config, config.run_timeout_s, be), env, spec=spec)
    job.send({"cmd": "go"})
    mark = job.expect({"report"}, config.run_timeout_s) or {}
    outcome = job.finish(timeout=5)
    text = "\n".join(_read_job_text(d, name) for d, name in ((job_dir, log.name), (work, f"{job_dir.name}.stderr")))
    rows = [k.to_dict() for k in parse_ncu_csv(text)]
    profile.detail["ncu_seconds"] = outcome.seconds
    if rows:
        profile.detail["ncu"] = rows
        return
    report = mark.get("report") if isinstance(mark.get("report"), dict) else {}
    error = next((ln.strip() for ln in text.splitlines() if "==ERROR==" in ln), "")
    if not error and report.get("error"):
        error = f"{report.get('failed_phase', '?')}: {report.get('error_type')}: {report.get('error')}"
    if not error:
        error = " | ".join(ln.strip() for ln in text.splitlines()[-3:] if ln.strip())
    result.notes.append(f"ncu summary skipped: the profiling run {outcome.describe()} and reported no kernels"
                        + (f" ({error[:300]})" if error else ""))


def _read_job_text(directory: Path, name: str, max_bytes: int = 16 * 1024 * 1024) -> str:
    """A text file the sandbox could have replaced (Nsight's CSV, the stderr tail), read as
    `jobfiles.open_regular` allows: a link, FIFO or socket in its place reads as nothing, never blocks."""
    from verifier.jobfiles import read_bytes

    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        return read_bytes(fd, name, max_bytes).decode(errors="replace")
    except (OSError, ValueError):
        return ""
    finally:
        os.close(fd)


WARMUP_ROUNDS = 2  # full-size rounds after the calibration round that are run and checked but not counted
FILE_SET_BYTES = 16 << 20  # a CPU round's input sets up to this size per call travel as files


def sets_by_file(device: str, set_bytes: int, config: VerifyConfig) -> bool:
    """Whether a timed round's input sets reach both sides as files the trusted reference wrote (read and
    copied inside the clock) rather than drawn from seeds inside it. On the CPU drawing dominated the
    clocked window of a cheap op (randn of 512x1024: 2.3 ms, the relu it feeds: 0.09 ms), so the
    figure was mostly the trusted overhead subtracted out again, and noisy; a file costs a copy. Big
    sets (issue 22's gigabyte inputs) and the GPU keep the seeded draw: nothing full-size goes to a
    file there. The candidate still cannot work ahead: the files are handed over just before the
    command, and CPU its sandbox uses while idle counts against its figure."""
    mode = str((config.extra or {}).get("timing_sets", "auto"))
    if mode in ("files", "seeds"):
        return mode == "files"
    return device == "cpu" and 0 < set_bytes <= FILE_SET_BYTES


def _timed_rounds(owner: _Run, sides: list[_Run], estimate):
    """Interleaved rounds in one window: the trusted reference draws `count` fresh input sets and times
    one call on each, then runs the candidate side's loop with a stub model (the trusted overhead, on
    the parent's clock), then every side times the same sets (fresh content in the same buffers, one
    call each) and has every call's outputs checked against the reference's for the same inputs (a
    sample would let a kernel be wrong on the calls it guesses go unchecked; `timing_memory_mb` bounds
    `count`). A side's figure for a round is the parent's clock over its round less that overhead,
    plus the CPU its sandbox used while it should have been idle, per call
    (`timing_stats.attested_round_ms`); its self-reported times are kept as diagnostics. Round 0
    calibrates `count` and warms up. Rounds where a side waited for a CPU for a large share of its
    window are disturbed and left out of `estimate(figures, keep)`. Stops once the estimate is not
    noisy after `min_rounds` kept rounds, or at the budget or `max_rounds`. Returns (estimate, per-side
    figures with the reference first, count, checks, clock diagnostics) or None on failure."""
    from verifier import cpu_accounting as acct
    from verifier.timing_stats import attested_round_ms, lost_share, select_rounds, unresolved

    assert owner.ref_held is not None and owner.trusted_dir is not None
    ref = owner.ref_held[0]
    for side in sides:
        side.round_reference = ref
    config = owner.config
    budget_end = time.monotonic() + config.timing_budget_s
    per_set = max(1, int(owner.reference.get("input_bytes", 0)) + int(owner.reference.get("output_bytes", 0)))
    memory_cap = max(1, int(config.timing_memory_mb * 1024**2 // (3 * per_set)))
    if owner.be.device == "cuda" and owner.reference.get("device_free_bytes"):
        # on the GPU a round's sets and kept outputs live on the card and only blocks reach files: a
        # fifth of its free memory, shared by both sides, so calls of a few µs still fill a round
        memory_cap = max(1, int(0.2 * int(owner.reference["device_free_bytes"]) // (4 * per_set)))
    cpus = acct.worker_cpus()
    aliasing = any(o.get("aliases_input") for t in owner.reference.get("trials", []) for o in t.get("outputs", []))
    by_file = sets_by_file(owner.be.device, per_set, owner.config)
    warmup_rounds = int((config.extra or {}).get("warmup_rounds", WARMUP_ROUNDS))
    means: list[list[float]] = [[] for _ in range(len(sides) + 1)]
    lost: list[list[float]] = [[] for _ in range(len(sides) + 2)]  # reference, stub, then each side
    clock: dict = {"overhead_ms": [], "walls_ms": [], "idle_cpu_ms": [[] for _ in sides],
                   "reported_ms": [[] for _ in sides], "psi_share": [], "repinned": 0,
                   "input_sets": "files" if by_file else "seeds", "warmup_rounds": warmup_rounds}
    count, r, est = 1, 0, None
    while True:
        rdir = owner.trusted_dir / f"round{r}"
        rdir.mkdir()
        sample = list(range(count))  # every timed call's outputs are saved and compared, not a sample
        pinned = acct.pin_tree(ref.proc.pid, cpus) + sum(acct.pin_tree(s.job.proc.pid, cpus) for s in sides
                                                          if s.job is not None)
        if r >= 2:
            clock["repinned"] += pinned
        psi0, round0 = acct.cpu_pressure_us(), time.monotonic()
        seeds = [owner.seed() for _ in range(count)]
        if not ref.send({"cmd": "round", "dir": str(rdir), "seeds": seeds, "files": by_file,
                         "save": [] if owner.be.device == "cuda" else sample}):
            owner.candidate["ref_timing_failed"] = True
            return None
        mark = ref.expect({"round_done", "error"}, config.run_timeout_s)
        if mark is None or mark.get("phase") != "round_done":
            owner.candidate["ref_timing_failed"] = True
            return None
        ref_times = [float(t) for t in mark["times_ms"]]
        ref_lost = lost_share(float(mark.get("timing_wall_ms") or 0.0), mark.get("timing_wait_ms"),
                              mark.get("timing_cpu_ms"))
        # the reference's own figure and the trusted overhead, each clocked as a candidate's round is
        worker = next(iter(acct.tree(ref.proc.pid)[1:]), None)
        parent = (threading.get_native_id(), getattr(getattr(ref, "_reader", None), "native_id", None))

        clocked_seeds = None if by_file else seeds  # what the candidate's harness gets, so the stub is like for like
        replay, stub = (_clocked_reference(ref, kind, rdir, count, not aliasing, worker, parent, config.run_timeout_s,
                                           clocked_seeds) for kind in ("replay", "stub_round"))
        if replay is None or stub is None:
            owner.candidate["ref_timing_failed"] = True
            return None
        (replay_ms, replay_lost), (stub_ms, stub_lost) = replay, stub
        ref_figure = attested_round_ms(replay_ms, stub_ms, count)
        resolved = not unresolved(replay_ms, stub_ms)
        ref_lost = max(ref_lost, replay_lost if resolved else 1.0)
        figures, side_lost = [], []
        for i, side in enumerate(sides):
            times = side.timed_round(rdir, mark, count, r, sample, clocked_seeds)
            if times is None:
                return None
            facts = side.round_facts[-1]
            idle_ms = facts["idle_cpu_ms"]
            figures.append(attested_round_ms(facts["wall_ms"], stub_ms, count, idle_ms))
            resolved = resolved and not unresolved(facts["wall_ms"], stub_ms)
            side_lost.append(1.0 if unresolved(facts["wall_ms"], stub_ms) else lost_share(facts["wall_ms"], facts["wait_ms"]))
            if r:
                clock["idle_cpu_ms"][i].append(idle_ms)
                clock["reported_ms"][i].append(sum(times) / len(times))
            side.idle_from = side.sandbox_cpu()
        shutil.rmtree(rdir, ignore_errors=True)
        psi1 = acct.cpu_pressure_us()
        r += 1
        if r == 1:
            per_call = max(1e-4, min([ref_times[0], *figures]))
            count = int(max(1, min(64, memory_cap, config.round_target_ms / per_call)))
            continue
        if r <= 1 + warmup_rounds:
            # a fresh sandbox's first full-size rounds ran up to 2x slow (its heap and buffers growing to
            # the round's size) while the pooled reference was warm: measured, they only widened the interval
            continue
        means[0].append(ref_figure)
        clock.setdefault("reference_reported_ms", []).append(sum(ref_times) / len(ref_times))
        for i, fig in enumerate(figures):
            means[i + 1].append(fig)
        if resolved:
            clock.setdefault("resolved", []).append(len(means[0]) - 1)
        for i, x in enumerate([ref_lost, stub_lost, *side_lost]):
            lost[i].append(x)
        round_ms = (time.monotonic() - round0) * 1000.0
        clock["overhead_ms"].append(stub_ms)
        clock["walls_ms"].append(round_ms)
        if psi0 is not None and psi1 is not None:
            clock["psi_share"].append(min(1.0, (psi1 - psi0) / 1000.0 / max(1e-6, round_ms)))
        keep = select_rounds(lost)
        measured, spent = len(means[0]), time.monotonic() >= budget_end
        # at least `min_rounds` measured rounds whatever the budget says (as before the attested clock)
        if measured >= config.min_rounds and (len(keep) >= config.min_rounds or spent or measured >= config.max_rounds):
            est = estimate(means, keep)
            if not est.noisy or spent or measured >= config.max_rounds:
                break
    clock["lost"] = lost
    clock["keep"] = keep
    return est, means, count, sum(getattr(s, "checked_calls", 0) for s in sides), clock


BLOCK_ELEMENTS = 16384  # one checked block of a GPU timed output
BLOCKS_PER_OUTPUT = 4  # three at random offsets and the tail


def choose_blocks(rng: random.Random, numels: list[list[int]]) -> dict[str, list[list[int]]]:
    """For each call (`numels[k]`: its outputs' element counts), [output, start, length] blocks: three at
    offsets drawn now (after the round ended, so the candidate cannot know them while it runs) and the
    tail (a kernel that drops the last partial tile shows there). Small outputs are checked whole."""
    out: dict[str, list[list[int]]] = {}
    for k, sizes in enumerate(numels):
        entries = []
        for j, n in enumerate(sizes):
            length = min(max(1, n), BLOCK_ELEMENTS)
            if n <= length:
                entries.append([j, 0, n])
                continue
            starts = {rng.randrange(0, n - length + 1) for _ in range(BLOCKS_PER_OUTPUT - 1)} | {n - length}
            entries += [[j, s, length] for s in sorted(starts)]
        out[str(k)] = entries
    return out


def _clocked_reference(ref, kind: str, rdir: Path, count: int, detach_inputs: bool, worker: int | None,
                       parent: tuple, timeout_s: float, seeds: list[int]) -> tuple[float, float] | None:
    """One command of the reference worker (`replay`: its real model, `stub_round`: the overhead) on the
    round's input sets (drawn from `seeds` for a task with a recipe, as the harness does, else read from
    the round's files), clocked by the parent from sending it to `timing_end`, as a candidate's round is;
    (wall ms, the share of it lost waiting for a CPU), or None when the worker failed."""
    from verifier import cpu_accounting as acct
    from verifier.timing_stats import lost_share

    wait0 = (acct.thread_wait_ns(worker) if worker else 0.0) + acct.parent_wait_ns(parent)
    t0 = time.monotonic()
    ok = ref.send({"cmd": kind, "dir": str(rdir), "count": count, "detach_inputs": detach_inputs, "seeds": seeds})
    done = ref.expect({"timing_end", "error"}, timeout_s) if ok else None
    wall = (time.monotonic() - t0) * 1000.0
    if done is None or done.get("phase") != "timing_end":
        return None
    wait1 = (acct.thread_wait_ns(worker) if worker else 0.0) + acct.parent_wait_ns(parent)
    return wall, lost_share(wall, (wait1 - wait0) / 1e6)


def _clock_detail(clock: dict, means: list[list[float]], count: int, side: int = 0) -> dict:
    """What the latency detail records of the attested clock for side `side` (0: the first candidate)."""
    from verifier.timing_stats import DISTURBED_SHARE, REPORTED_DISAGREES, busy_reason

    n = len(means[0])
    cand = means[side + 1]
    overhead = clock["overhead_ms"]
    round_ms = [c * count for c in cand]
    share = [o / (o + w) for o, w in zip(overhead, round_ms, strict=False) if o + w > 0]
    reported = clock["reported_ms"][side]
    idle = clock["idle_cpu_ms"][side]
    lost = clock["lost"]
    worst = [max(x[i] for x in lost) for i in range(n)] if n else []
    ratio = _median([rep / att for rep, att in zip(reported, cand, strict=False) if att > 0])
    out = {
        "figure": "attested",  # the parent's clock less the trusted overhead, not the candidate's timer
        "input_sets": clock.get("input_sets"),  # how a round's inputs reached both sides (`sets_by_file`)
        "warmup_rounds": clock.get("warmup_rounds"),
        "overhead_share": _median(share),
        "overhead_ms": _median(overhead),
        "reported_times_ms": reported[:200],
        "reported_vs_attested": ratio,
        "idle_cpu_ms": idle[:200],
        "idle_cpu_total_ms": sum(idle),
        "lost_share": worst[:200],
        "lost_by_side": {"reference": _median(lost[0]), "overhead": _median(lost[1]),
                         "candidate": _median(lost[side + 2])},
        "disturbed_rounds": sum(1 for w in worst if w > DISTURBED_SHARE),
        "kept_rounds": len(clock["keep"]),
        "psi_share": _median(clock["psi_share"]),
        "affinity_repinned": clock["repinned"],
    }
    out["reported_disagrees"] = bool(ratio is not None and ratio < REPORTED_DISAGREES
                                     and (_median(cand) or 0.0) > 0.05)
    from verifier.timing_stats import IDLE_ALLOWANCE_MS

    out["idle_cpu_counted"] = sum(1 for x in idle if x > IDLE_ALLOWANCE_MS) * 2 > max(1, len(idle)) or (
        sum(idle) > 0.05 * sum(round_ms) and sum(idle) > IDLE_ALLOWANCE_MS * max(1, len(idle)))
    out["busy"] = busy_reason(lost, clock["walls_ms"])
    return out


def _valid_recipe(recipe) -> bool:
    """A recipe as `input_recipe.capture` makes it (the reference worker's claim, checked for shape
    before it is sent to the harness)."""
    if not isinstance(recipe, list):
        return False
    for entry in recipe:
        if not isinstance(entry, dict) or not isinstance(entry.get("kind"), str):
            return False
        if entry["kind"] != "value" and not (isinstance(entry.get("shape"), list) and isinstance(entry.get("dtype"), str)):
            return False
    return True


def _writable_mappings(pid: int, job_dir: Path | None, read_only: list[Path] | None = None) -> list[str]:
    """Paths of files mapped executable by `pid` from places a candidate can write (inside its view):
    the job directory and the private tmpfs mounts, minus the read-only trees bound over them (the
    project or a virtual environment may well live under /tmp)."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return []
    return writable_mappings_in(maps, job_dir, read_only)


def writable_mappings_in(maps: str, job_dir: Path | None, read_only: list[Path] | None = None) -> list[str]:
    """`_writable_mappings` over the text of a `/proc/PID/maps` file."""
    writable = ("/tmp/", "/var/tmp/", "/dev/shm/", "/run/", *([str(job_dir) + "/"] if job_dir else []))
    protected = tuple(str(p).rstrip("/") + "/" for p in (read_only or []))
    in_job = str(job_dir) + "/" if job_dir else None
    out = []
    for line in maps.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6 or "x" not in parts[1]:
            continue
        path = parts[5].replace(" (deleted)", "")
        if not path.startswith(writable) or path in out:
            continue
        if protected and path.startswith(protected) and not (in_job and path.startswith(in_job)):
            continue
        out.append(path)
    return out


def _with_findings(hack: AntiHackingGate, dyn: GateResult, findings: list[tuple[str, str]]) -> GateResult:
    """The dynamic gate with the trusted audits' findings added, judged under the same policy."""
    from verifier.antihack import Violation

    violations = [Violation(rule, 0, msg) for rule, msg in findings]
    if dyn.status == FAIL:
        dyn.detail.setdefault("violations", []).extend(v.to_dict() for v in violations if hack.policy.refuses(v.rule))
        dyn.detail.setdefault("reported", []).extend(v.to_dict() for v in violations if not hack.policy.refuses(v.rule))
        return dyn
    earlier = [Violation(str(v["rule"]), int(v.get("line", 0)), str(v["message"])) for v in dyn.detail.get("reported", [])]
    rest = {k: v for k, v in dyn.detail.items() if k not in ("reported", "policy")}
    return hack._judge(time.monotonic() - dyn.seconds, [*earlier, *violations], **rest)


def _merge_passes(static: GateResult, dyn: GateResult, policy) -> None:
    """One passing anti-hacking gate from its static and dynamic halves: every reported rule of both."""
    from verifier.antihack import Violation
    from verifier.gates import reported_reason

    reported = [*static.detail.get("reported", []), *dyn.detail.get("reported", [])]
    static.detail.update(dyn.detail)
    if reported:
        static.detail["reported"] = reported
        static.reason = reported_reason([Violation(str(v["rule"]), 0, "") for v in reported], policy)


def _no_result(run: _Run, when: str) -> str:
    from verifier.gates import _no_report_reason

    return _no_report_reason(run.evidence(), when)


@functools.cache
def _ignored_ops() -> frozenset[str]:
    from verifier.harness import IGNORED_OPS

    return frozenset(IGNORED_OPS)


def _verdict_key(reference_source: str, candidate_source: str, be: Backend, config: VerifyConfig) -> str:
    settings = {k: v for k, v in config.to_dict().items()
                if k not in {"use_cache", "build_root", "warm_worker", "reference_ttl_s", "hidden_paths"}}
    return content_key("verdict-v3", reference_source, candidate_source, be.name, be.device, settings, sys.version_info[:2])


def prewarm(backend: str = "cpu", config: VerifyConfig | None = None) -> None:
    """Start a spare sandbox and build (trusted) the common precompiled headers and bindings (blocking)."""
    config = config or VerifyConfig()
    be = get_backend(backend)
    if be.availability():
        return
    try:
        isolated = isolation_mode(config)
    except VerifierError:
        return
    if config.warm_worker and os.environ.get("EVOKERNEL_WARM_WORKER") != "0":
        key = _spare_key(config, be, isolated)
        _SPARES.refill(key, lambda: _start_candidate(config, be, isolated, wait=True))
    if be.name in ("cpu", "cuda"):
        proc = subprocess.Popen([sys.executable, "-m", "verifier.build", str(config.root() / "shared")],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True,
                                env={**_trusted_env(), "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})
        atexit.register(_stop, proc)
        try:
            proc.wait(timeout=900)
        except subprocess.TimeoutExpired:
            _stop(proc)


def _stop(proc) -> None:
    """Leave nothing running when the app exits mid-prewarm (a half-built header is never renamed in)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        proc.wait()


def _median(times: list[float] | None) -> float | None:
    if not times:
        return None
    from verifier.compare import median_and_spread

    return median_and_spread(times)[0]


def _finish(result: VerificationResult, gates: list[GateResult], notify: GateCallback, started: float) -> VerificationResult:
    """Fill in skipped gates after the first failure, in gate order; gates light up only now, once the
    trusted side has decided."""
    by_name = {g.name: g for g in gates}
    failed = False
    ordered = []
    for name in GATE_ORDER:
        g = by_name.get(name)
        if (g is None or failed) and (g is None or g.status != FAIL):
            g = GateResult(name, SKIP, 0.0, "an earlier gate failed" if failed or any(
                    x.status == FAIL for x in gates) else "not run")
        ordered.append(g)
        if g.status == FAIL:
            failed = True
    result.gates = ordered
    for g in ordered:
        with contextlib.suppress(Exception):
            notify(g.name, g.status)
    result.seconds = time.monotonic() - started
    return result


def _output_digests(held, outputs, config) -> list[str]:
    """A digest of each output's dtype, shape and bytes, read from the call's held directory (the decoy
    probe compares a trial's with its replay's: `verifier.decoy`)."""
    import numpy as np

    from verifier.gates import _dir_fd, _load_fd

    found = []
    with _dir_fd(held) as dfd:
        for meta in outputs or []:
            arr, _ = _load_fd(dfd, str(meta["file"]), config)
            h = hashlib.sha256(f"{arr.dtype.str}{arr.shape}".encode())
            h.update(memoryview(np.ascontiguousarray(arr).reshape(-1).view(np.uint8)))
            found.append(h.hexdigest())
    return found
