"""`verify()`: the one entry point the loop, the app and the command line call."""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import fcntl
import functools
import hashlib
import json
import os
import shutil
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from verifier.backends import Backend, get_backend
from verifier.config import VerifyConfig
from verifier.gates import (
    AntiHackingGate,
    CompileGate,
    CorrectnessGate,
    Evidence,
    LatencyGate,
    ProfileGate,
    file_identity,
)
from verifier.result import FAIL, GATE_ORDER, PASS, SKIP, GateResult, VerificationResult
from verifier.sandbox import Limits, run_sandboxed

GateCallback = Callable[[str, str], None]
_PHASE_TO_GATE = {"build": "compile", "correctness": "correctness", "latency": "latency", "profile": "profile"}


class VerifierError(Exception):
    """The verification could not run at all (bad task, unusable backend); one line saying what to do."""


def _digest(*parts: object) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(json.dumps(p, sort_keys=True, default=str).encode())
    return h.hexdigest()[:24]


def _job(mode: str, ref_path: Path, cand_path: Path | None, backend: Backend, config: VerifyConfig, root: Path) -> dict:
    return {
        "mode": mode,
        "reference_path": str(ref_path),
        "candidate_path": str(cand_path) if cand_path else None,
        "backend": backend.name,
        "device": backend.device,
        "installer": backend.installer,
        "seeds": config.seeds(),
        "warmup": config.warmup,
        "min_reps": config.min_reps,
        "max_reps": config.max_reps,
        "min_time_s": config.min_time_s,
        "time": config.time_kernels,
        "compare_compile": config.compare_compile and mode == "reference",
        "build_root": str(root),
        "build_timeout_s": config.build_timeout_s,
        "threads": config.threads,
        **backend.job_fields(),
    }


def _limits(config: VerifyConfig, wall_s: float, backend: Backend | None = None) -> Limits:
    """CUDA reserves far more address space than it uses, so GPU runs get no RLIMIT_AS (-1: unlimited)."""
    memory = -1 if backend is not None and backend.device == "cuda" else int(config.memory_gb * 1024**3)
    return Limits(wall_s=wall_s, memory_bytes=memory, max_processes=config.max_processes)


def _harness_argv(job_dir: Path) -> list[str]:
    return [sys.executable, "-m", "verifier.harness", str(job_dir)]


def reference_run(reference_source: str, backend: Backend, config: VerifyConfig) -> tuple[dict, Path]:
    """Reference outputs, inputs and timings for these seeds, computed once per machine and cached on disk."""
    root = config.root()
    key = _digest("ref-v2", reference_source, config.seeds(), backend.name, backend.device, config.warmup,
                  config.min_reps, config.max_reps, config.min_time_s, config.compare_compile, config.time_kernels,
                  config.threads, sys.version_info[:2])
    final = root / "reference" / key
    report_path = final / "out" / "report.json"
    if report_path.exists():
        report = json.loads(report_path.read_text())
        return _with_fresh_times(report, final, reference_source, backend, config), final / "out"
    (root / "reference").mkdir(parents=True, exist_ok=True)
    with open(root / "reference" / f"{key}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if report_path.exists():
            return json.loads(report_path.read_text()), final / "out"
        work = root / "reference" / f"{key}.tmp{uuid.uuid4().hex[:8]}"
        work.mkdir(parents=True)
        ref_path = work / "reference.py"
        ref_path.write_text(reference_source)
        (work / "job.json").write_text(json.dumps(_job("reference", ref_path, None, backend, config, root)))
        outcome = run_sandboxed(_harness_argv(work), work, _limits(config, config.run_timeout_s * 3, backend),
                                env={**_base_env(), **backend.child_env()})
        try:
            report = json.loads((work / "out" / "report.json").read_text())
        except (OSError, ValueError):
            shutil.rmtree(work, ignore_errors=True)
            raise VerifierError(f"the reference task {outcome.describe()}; check the task file with `evokernel tasks`") from None
        if report.get("phase") != "done":
            shutil.rmtree(work, ignore_errors=True)
            raise VerifierError(f"the reference task failed: {report.get('error_type')}: {report.get('error', '')[:200]}")
        if final.exists():
            shutil.rmtree(final, ignore_errors=True)
        work.rename(final)
        out = final / "out"
        report["identities"] = {p.name: file_identity(p.lstat()) for p in out.glob("*.npy")}
        _write_json_atomic(out / "report.json", report)
    return report, final / "out"


def _with_fresh_times(report: dict, ref_dir: Path, reference_source: str, backend: Backend,
                      config: VerifyConfig) -> dict:
    """Cached reference outputs stay valid; cached reference *timings* go stale as the machine's load
    changes. Re-time the eager reference (one forward per call, nothing saved) when the last timing is
    older than `config.reference_ttl_s`, so speedups compare measurements taken close together."""
    if not config.time_kernels or config.reference_ttl_s is None:
        return report
    timing_path = ref_dir / "timing.json"
    try:
        timing = json.loads(timing_path.read_text())
    except (OSError, ValueError):
        timing = {"times_ms": report.get("times_ms"), "measured_at": (ref_dir / "out" / "report.json").stat().st_mtime}
    if time.time() - float(timing.get("measured_at", 0)) > config.reference_ttl_s:
        work = _scratch_root(config.root()) / f"retime-{uuid.uuid4().hex}"
        work.mkdir(parents=True)
        try:
            ref_path = work / "reference.py"
            ref_path.write_text(reference_source)
            job = _job("reference", ref_path, None, backend, config, config.root())
            job.update(seeds=config.seeds()[:1], save_outputs=False, compare_compile=False)
            (work / "job.json").write_text(json.dumps(job))
            run_sandboxed(_harness_argv(work), work, _limits(config, config.run_timeout_s, backend),
                          env={**_base_env(), **backend.child_env()}, zygote=_warm_worker(backend, config))
            fresh = json.loads((work / "out" / "report.json").read_text())
            if fresh.get("phase") == "done" and fresh.get("times_ms"):
                timing = {"times_ms": fresh["times_ms"], "measured_at": time.time()}
                _write_json_atomic(timing_path, timing)
        except (OSError, ValueError):
            pass
        finally:
            shutil.rmtree(work, ignore_errors=True)
    if timing.get("times_ms"):
        report = {**report, "times_ms": timing["times_ms"]}
    return report


def _base_env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    env.pop("EVK_PROGRESS_FD", None)
    return env


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:16]


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
    result = VerificationResult(backend=be.name, gates=[], source_hash=source_hash(candidate_source))

    hack = AntiHackingGate()
    notify("anti_hacking", "running")
    static = hack.static(candidate_source, be.name)
    if static.status == FAIL:
        notify("anti_hacking", FAIL)
        return _finish(result, [static], notify, started)
    notify("anti_hacking", PASS)

    ref_report, ref_dir = reference_run(reference_source, be, config)
    result.reference_ms = _median(ref_report.get("times_ms"))
    result.compiled_ms = _median(ref_report.get("compiled_times_ms"))
    result.device = ref_report.get("device_name", "")

    root = config.root()
    verdict_path = root / "verdicts" / f"{_verdict_key(reference_source, candidate_source, be, config)}.json"
    if config.use_cache and verdict_path.exists():
        with contextlib.suppress(OSError, ValueError, KeyError):
            cached = VerificationResult.from_dict(json.loads(verdict_path.read_text()))
            cached.notes = [*cached.notes, "cached verdict: unchanged source, same task and settings"]
            cached.seconds = time.monotonic() - started
            return _finish(cached, cached.gates, notify, started)
    work = _scratch_root(root) / uuid.uuid4().hex
    work.mkdir(parents=True)
    try:
        cand_path = work / "candidate.py"
        cand_path.write_text(candidate_source)
        ref_path = work / "reference.py"
        ref_path.write_text(reference_source)
        (work / "job.json").write_text(json.dumps(_job("candidate", ref_path, cand_path, be, config, root)))
        current: list[str] = []

        def on_mark(mark: dict) -> None:
            gate = _PHASE_TO_GATE.get(mark.get("phase", ""))
            if gate and gate not in current:
                if current:
                    notify(current[-1], PASS)
                current.append(gate)
                notify(gate, "running")

        outcome = run_sandboxed(_harness_argv(work), work,
                                _limits(config, config.build_timeout_s + config.run_timeout_s, be),
                                env={**_base_env(), **be.child_env()}, on_mark=on_mark,
                                zygote=_warm_worker(be, config))
        try:
            cand_report = json.loads((work / "out" / "report.json").read_text())
            if not isinstance(cand_report, dict):
                cand_report = {}
        except (OSError, ValueError):
            cand_report = {}
        ev = Evidence(candidate_source, be.name, config, ref_report, ref_dir, cand_report, work / "out", outcome,
                      outcome.marks, be.counts_kernel_calls)
        from verifier.harness import IGNORED_OPS

        gates = [static]
        compile_gate = CompileGate().evaluate(ev)
        gates.append(compile_gate)
        if compile_gate.passed:
            correct = _safe(CorrectnessGate(), ev)
            dyn = hack.dynamic(ev, IGNORED_OPS) if correct.passed or "trials" in cand_report else None
            if dyn is not None and dyn.status == FAIL:
                dyn.seconds += static.seconds
                gates[0] = dyn
                gates.append(correct if correct.status == FAIL else GateResult("correctness", SKIP, 0.0, "anti-hacking failed"))
            else:
                if dyn is not None:
                    static.detail.update(dyn.detail)
                gates.append(correct)
                if correct.passed:
                    gates.append(LatencyGate().evaluate(ev))
                    gates.append(ProfileGate().evaluate(ev))
                    if config.ncu:
                        _attach_ncu(gates[-1], result, be, config, work)
        _phase_seconds(gates, outcome.marks, outcome.seconds)
        lat = next((g for g in gates if g.name == "latency" and g.passed), None)
        if lat is not None:
            result.latency_ms = lat.detail.get("median_ms")
        prof = next((g for g in gates if g.name == "profile" and g.passed), None)
        if prof is not None:
            result.profile = prof.detail.get("top_ops", [])
        if be.interpreted:
            result.notes.append("interpreted: no latency")
        result = _finish(result, gates, notify, started)
        if outcome.exit_code == 0 and not outcome.timed_out:
            _write_json_atomic(verdict_path, result.to_dict())
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _attach_ncu(profile: GateResult, result: VerificationResult, be: Backend, config: VerifyConfig, work: Path) -> None:
    """Per-kernel ncu rows into the profile gate's detail (`ncu`), or a note saying why there are none."""
    from verifier.ncu import ncu_argv, ncu_path, parse_ncu_csv

    ncu = ncu_path()
    if be.device != "cuda":
        result.notes.append("ncu summary skipped: it needs a GPU backend on a GPU")
        return
    if ncu is None:
        result.notes.append("ncu summary skipped: ncu (Nsight Compute) is not on PATH")
        return
    job_dir = work / "ncu"
    job_dir.mkdir()
    job = json.loads((work / "job.json").read_text())
    (job_dir / "job.json").write_text(json.dumps({**job, "profile_once": True}))
    log = job_dir / "ncu.csv"
    outcome = run_sandboxed(ncu_argv(ncu, log, _harness_argv(job_dir)), job_dir,
                            _limits(config, config.run_timeout_s, be), env={**_base_env(), **be.child_env()})
    text = "\n".join(f.read_text(errors="replace") for f in (log, job_dir / "stderr.txt") if f.exists())
    rows = [k.to_dict() for k in parse_ncu_csv(text)]
    profile.detail["ncu_seconds"] = outcome.seconds
    if rows:
        profile.detail["ncu"] = rows
        return
    error = next((ln.strip() for ln in text.splitlines() if "==ERROR==" in ln), "")
    result.notes.append(f"ncu summary skipped: the profiling run {outcome.describe()} and reported no kernels"
                        + (f" ({error[:200]})" if error else ""))


def _phase_seconds(gates: list[GateResult], marks: list, total: float) -> None:
    """Each gate's time is the wall time of its phase in the child, as the parent saw the marks arrive."""
    if not marks:
        return
    end = marks[0][0] + total
    spans: dict[str, float] = {}
    gate = None
    for i, (t, mark) in enumerate(marks):
        gate = _PHASE_TO_GATE.get(mark.get("phase") or "", gate)
        nxt = marks[i + 1][0] if i + 1 < len(marks) else end
        if gate:
            spans[gate] = spans.get(gate, 0.0) + max(0.0, nxt - t)
    for g in gates:
        if g.name in spans and g.status != SKIP:
            g.seconds = spans[g.name]


def _verdict_key(reference_source: str, candidate_source: str, be: Backend, config: VerifyConfig) -> str:
    settings = {k: v for k, v in config.to_dict().items()
                if k not in {"use_cache", "build_root", "warm_worker", "reference_ttl_s"}}
    return _digest("verdict-v1", reference_source, candidate_source, be.name, be.device, settings, sys.version_info[:2])


def _scratch_root(root: Path) -> Path:
    """Run directories hold every trial's tensors: put them on tmpfs when there is one."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        return shm / "evokernel-runs"
    return root / "runs"


def _write_json_atomic(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def prewarm(backend: str = "cpu", config: VerifyConfig | None = None) -> None:
    """Start the warm worker and build the common precompiled headers before the first verdict (blocking)."""
    import subprocess

    config = config or VerifyConfig()
    be = get_backend(backend)
    if be.availability():
        return
    zygote = _warm_worker(be, config)
    if zygote is not None:
        zygote.ensure_started()
    if be.name == "cpu":
        proc = subprocess.Popen([sys.executable, "-m", "verifier.build", str(config.root())], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                                env={**_base_env(), "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})
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


def _warm_worker(be: Backend, config: VerifyConfig):
    """The process-wide warm worker for backends that need no per-job environment (the CPU one)."""
    if not config.warm_worker or be.device != "cpu" or be.child_env() or os.environ.get("EVOKERNEL_WARM_WORKER") == "0":
        return None
    return _shared_zygote()


@functools.cache
def _shared_zygote():
    from verifier.zygote import Zygote

    zygote = Zygote(env=_base_env())
    atexit.register(zygote.close)
    return zygote


def _safe(gate, ev: Evidence) -> GateResult:
    """A malformed report (a hostile child can write anything) fails the gate instead of raising."""
    try:
        return gate.evaluate(ev)
    except (KeyError, TypeError, ValueError, OSError, IndexError) as exc:
        return GateResult(gate.name, FAIL, 0.0, f"the candidate's results were malformed ({type(exc).__name__}: {exc})")


def _median(times: list[float] | None) -> float | None:
    if not times:
        return None
    from verifier.compare import median_and_spread

    return median_and_spread(times)[0]


def _finish(result: VerificationResult, gates: list[GateResult], notify: GateCallback, started: float) -> VerificationResult:
    """Fill in skipped gates after the first failure, in gate order."""
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
