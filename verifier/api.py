"""`verify()`: the one entry point the loop, the app and the command line call.

A verification reads as its phases: static anti-hacking; a fresh draw of seeds; the trusted reference
worker prepares inputs and outputs; the candidate builds and runs in its sandbox and answers commands
(correctness trials, a profiled call, timed rounds interleaved with the reference's); the parent
compares every file, audits every binary the candidate mapped, and signs the verdict it caches.

This module holds the two entry points (`verify`, and `compare`: two kernels re-timed back to back) and
re-exports what other code imports from here; the phases live in their own modules: `workers` (the
processes and their pools), `run` (one verification's state and phase order in `verification`,
with its collaborators `handover.JobFiles`, `reference_replies.ReferenceSide`, `trials.Trials` and
`timed_calls.TimedCalls`), `rounds` (the paired timing window),
`findings` (the anti-hacking gate's halves joined), `verdicts` (cache key, cached verdicts, gate order),
`errors`, and the ncu summary's profiling run in `ncu_run`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import time

from verifier.backends import get_backend
from verifier.cache.verdict_key import (
    GateCallback,
    Notify,
    _cached_verdict,
    _finish,
    _verdict_key,
    source_hash,
)
from verifier.clock.rounds import BLOCK_ELEMENTS, _clock_detail, _median, _timed_rounds, choose_blocks
from verifier.config import VerifyConfig
from verifier.errors import JobTampered, VerifierError
from verifier.gates.evidence import AntiHackingGate, CompileGate
from verifier.policy.mapped_audit import writable_mappings_in
from verifier.policy.rules import PolicyError, make_policy
from verifier.result import FAIL, PASS, SKIP, GateResult, Progress, VerificationResult
from verifier.run.ncu_profile import _attach_ncu
from verifier.run.timed_calls import FRESH_OUTPUTS
from verifier.run.verification import MAX_TRUSTED_BUILDS, _Run
from verifier.workers.pools import _clean_env, _scratch, _start_candidate, _threads, isolation_mode, prewarm

# What other code imports from here (the app, the command line, the tests); each lives in its own module.
__all__ = [
    "BLOCK_ELEMENTS",
    "FRESH_OUTPUTS",
    "MAX_TRUSTED_BUILDS",
    "GateCallback",
    "JobTampered",
    "VerifierError",
    "_Run",
    "_attach_ncu",
    "_clean_env",
    "_scratch",
    "_start_candidate",
    "_verdict_key",
    "choose_blocks",
    "compare",
    "isolation_mode",
    "prewarm",
    "source_hash",
    "verify",
    "writable_mappings_in",
]


# ---------------------------------------------------------------------------------------------------
# one verification
TIMING_KEYS = ("speedup", "lo", "hi", "noisy", "rounds", "calls_per_round", "threads", "halfwidth", "gbps",
               "reference_gbps", "bandwidth_peak_gbps", "bandwidth_fraction", "reference_bandwidth_fraction",
               "bound", "bandwidth_over_peak", "gflops", "reference_gflops", "flops_peak_gflops", "flops_fraction",
               "reference_flops_fraction", "flops_peak_dtype", "tf32_peak_gflops")
NO_FIGURE_KEEPS = ("rounds", "calls_per_round", "threads")


def verdict_timing(detail: dict) -> dict:
    """The verdict's `timing` from the latency gate's detail. A verdict with no figure (`no_figure`: every
    round unresolved or disturbed) carries no ratio at all, not even an interval: only that there is no
    figure, and the rounds and calls it tried."""
    if detail.get("no_figure"):
        return {"no_figure": True, "noisy": True, **{k: detail.get(k) for k in NO_FIGURE_KEEPS}}
    return {k: detail.get(k) for k in TIMING_KEYS}


def verify(
    reference_source: str,
    candidate_source: str,
    backend: str = "cpu",
    config: VerifyConfig | None = None,
    on_gate: GateCallback | None = None,
) -> VerificationResult:
    """Run the gates in order and stop at the first failure. Never raises for a bad candidate.

    `on_gate(gate, state)` hears each gate's state as it changes; given a callback that takes a third
    argument, it also hears `(gate, "running", Progress)` as the work inside a gate moves on (bindings
    built for a new signature, trial 3/8, timing round 4): see `verifier.cache.verdict_key.Notify`."""
    config = config or VerifyConfig()
    notify = Notify(on_gate)
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
        from verifier.policy.static_scan import Violation

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
    result.device = run.ref_side.reference.get("device_name", "")
    result.device_id = str(run.ref_side.reference.get("device_id") or "")
    peaks = {"reference": run.ref_side.reference.get("device_peak_bytes"), "candidate": run.candidate.get("device_peak_bytes")}
    result.device_peak_gb = {k: round(int(v) / 1024**3, 2) for k, v in peaks.items() if isinstance(v, int) and v > 0}
    phases = {"reference": run.ref_side.reference.get("device_peak_phases"), "candidate": run.candidate.get("device_peak_phases"),
              "parent": run.__dict__.get("parent_peaks")}
    result.device_peak_phases_gb = {side: {str(k)[:20]: round(int(v) / 1024**3, 2) for k, v in list(found.items())[:12]
                                           if isinstance(v, int) and not isinstance(v, bool) and 0 < v < 1 << 50}
                                    for side, found in phases.items() if isinstance(found, dict) and found}
    result.compiled_ms = _median(run.ref_side.reference.get("compiled_times_ms"))
    lat = next((g for g in gates if g.name == "latency" and g.passed), None)
    if lat is not None:
        result.latency_ms = lat.detail.get("median_ms")
        result.reference_ms = lat.detail.get("reference_ms")
        result.timing = verdict_timing(lat.detail)
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
        from verifier.correctness.probes import notes as probe_notes

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
        from verifier.cache.signed_verdicts import store_verdict

        with contextlib.suppress(OSError):
            store_verdict(root, key, result.to_dict())
    return result


def _labelled(on_gate: GateCallback | None, label: str) -> Notify:
    """A watcher of `compare` that hears which kernel's work it is: each progress text starts `kernel A: `."""
    if on_gate is None:
        return Notify(None)
    watcher = Notify(on_gate)

    def tell(gate: str, state: str, progress: Progress | None = None) -> None:
        if progress is not None:
            progress = dataclasses.replace(progress, text=f"{label}: {progress.text}")
        watcher(gate, state, progress)

    return Notify(tell)


def compare(reference_source: str, source_a: str, source_b: str, backend: str = "cpu",
            config: VerifyConfig | None = None, on_gate: GateCallback | None = None) -> dict:
    """Re-time two kernels back to back: both build in their own sandboxes, both must be correct, then
    paired rounds on the same fresh inputs. Returns B's speedup over A with its 95% interval
    (`speedup`, `lo`, `hi`, `noisy`, `a_ms`, `b_ms`, ...) or {"error": one line}. `on_gate` hears the work
    as `verify`'s does (`(gate, "running", Progress)`, each text naming kernel A, B or both): a comparison
    builds and checks two kernels before its rounds, a minute on a busy machine."""
    from verifier.clock.stats import robust_paired

    # both kernels' outputs through files: on the GPU the device-side comparison lives in run A's reference
    # worker (`ReferenceSide.device_compare`, `held`), which run B's shared side has not, and every trial of
    # kernel B failed "malformed (KeyError: 'file')" on an H200 (session 23's A/A)
    config = dataclasses.replace(config or VerifyConfig(), device_compare=False)
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
    run_a = _Run(reference_source, source_a, be, config, isolated, _labelled(on_gate, "kernel A"))
    run_b = _Run(reference_source, source_b, be, config, isolated, _labelled(on_gate, "kernel B"))
    try:
        run_a.start_candidate()
        run_a.prepare_reference()
        run_b.start_candidate()
        # the inputs, init seed and fresh probe's slot both runs share; run A's worker serves the window
        run_b.ref_side = run_a.ref_side.shared()
        shutil.rmtree(run_b.trusted_dir, ignore_errors=True)  # type: ignore[arg-type]  # set by start_candidate
        run_b.trusted_dir = run_a.trusted_dir
        run_a.shares_inputs = True
        for label, run in (("A", run_a), ("B", run_b)):
            run.progress("compile", "build", "building the kernel")
            if run.build_candidate() is None:
                return {"error": f"kernel {label} did not build: {CompileGate().evaluate(run.evidence()).reason}"}
            correct = run.correctness()
            if not correct.passed:
                return {"error": f"kernel {label} is not correct: {correct.reason}"}
        run_a.notify = _labelled(on_gate, "A and B")  # the paired rounds time both
        rounds = _timed_rounds(run_a, [run_a.timing_side(), run_b.timing_side()], lambda m, keep: robust_paired(
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
        run_b.ref_side.held = None
        run_b.trusted_dir = None
        for run in (run_b, run_a):
            with contextlib.suppress(Exception):
                run.finish_candidate()
            run.close()
