"""The state of one verification (`_Run`) and its phases in order (`execute`): start the candidate's
sandbox, build it while the trusted reference prepares, audit what it mapped, correctness, profile,
latency, and the anti-hacking verdict over all of it; then close every process and directory it
owned. It is composed of collaborators, each given what it reads and none holding the run: `files`
(`handover.JobFiles`, the job's held hand-over directories), `ref_side` (`reference_replies.ReferenceSide`,
the trusted reference worker and what it reported), `trials` (`trials.Trials`, the correctness gate's
trials, made when correctness starts) and `timing` (`timed_calls.TimedCalls`, the candidate's side of the
paired window, made when timing starts). Here are the run's own state and the phases in order.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import random
import secrets
import shutil
import sys
import threading
import time
import uuid
from pathlib import Path

from verifier.backends import Backend
from verifier.cache.verdict_key import GateCallback, Notify
from verifier.clock.paired_calls import gpu_round_fields
from verifier.config import VerifyConfig
from verifier.gates.evidence import AntiHackingGate, CompileGate, CorrectnessGate, Evidence, ProfileGate
from verifier.gates.findings import _merge_passes, _with_findings
from verifier.result import FAIL, PASS, SKIP, GateResult, Progress
from verifier.run.handover import JobFiles
from verifier.run.reference_replies import ReferenceSide
from verifier.run.timed_calls import TimedCalls, latency_gate
from verifier.run.trials import Trials
from verifier.sandbox.job_dir import discard
from verifier.sandbox.supervisor import LiveJob
from verifier.workers.pools import (
    _REFERENCE,
    _SPARES,
    _spare_key,
    _start_candidate,
    _threads,
    _trusted_env,
    job_paths,
)

MAX_TRUSTED_BUILDS = 6  # distinct shared artefacts (headers, bindings) one verification may ask the trusted side for


class _Run:
    """The state of one verification: the run directory, both workers and what they reported."""

    def __init__(self, reference_source: str, candidate_source: str, be: Backend, config: VerifyConfig,
                 isolated: bool, notify: GateCallback):
        self.reference_source, self.candidate_source = reference_source, candidate_source
        self.be, self.config, self.isolated, self.notify = be, config, isolated, notify
        self.rng = random.Random(secrets.randbits(64))
        #: the trusted reference worker's side: its worker, its preparation and what it reported
        self.ref_side = ReferenceSide(reference_source, be, config)
        self.trials: Trials | None = None  # the correctness gate's trials, once they have started
        self.candidate: dict = {"trials": [], "kernel_calls": []}
        self.clean_exit = False
        self.job: LiveJob | None = None
        self.job_dir: Path | None = None
        self.files: JobFiles | None = None  # the job's hand-over directories, once it has started
        self.trusted_dir: Path | None = None
        self.audit_findings: list = []
        self.shares_inputs = False  # another run reads the same trusted inputs after this one (compare)
        self.timing: TimedCalls | None = None  # the timed calls' side, once timing has started
        self.anon_exec: dict = {}  # executable memory with no file, seen at each audit and timed round's pause
        self.phases: dict[str, float] = {}  # seconds per phase, in order (VerificationResult.phases)
        self._lap_at = time.monotonic()

    def lap(self, phase: str) -> None:
        """Close `phase`: the seconds since the previous lap are added to it."""
        now = time.monotonic()
        self.phases[phase] = self.phases.get(phase, 0.0) + now - self._lap_at
        self._lap_at = now

    def seed(self) -> int:
        return self.rng.randrange(1, 2**31 - 1)

    def progress(self, gate: str, step: str, text: str, **figures) -> None:
        """Tell the watcher where `gate`'s work is (`verifier.result.Progress`); a plain two-argument
        `on_gate` never hears it (`verifier.cache.verdict_key.Notify`)."""
        notify = getattr(self, "notify", None)  # a bare run (tests build one piecemeal) tells no one
        if isinstance(notify, Notify):
            notify(gate, "running", Progress(gate, step, text, **figures))

    def prepare_reference(self) -> None:
        """The reference's whole preparation, waited for (`compare`: before either kernel builds)."""
        assert self.trusted_dir is not None
        self.ref_side.prepare(self.trusted_dir, self.rng, self.seed)

    def reference_trial(self, i: int) -> dict | None:
        """The reference's trial `i` (`ReferenceSide.reference_trial`), told as "trial i+1/N" when the candidate
        is about to run it: the trial loop (`trials.Trials.correctness`) asks for trial i just before it sends
        it, while trial i-1 is compared."""
        rt = self.ref_side.reference_trial(i)
        if rt is not None and not (rt.get("probe") and "skip" in rt):
            total = max(self.ref_side.planned_trials, i + 1)
            what = f"probe {rt.get('name') or rt.get('label') or rt.get('probe')}: " if rt.get("probe") else ""
            self.progress("correctness", "trial", f"{what}trial {i + 1}/{total}", done=i + 1, total=total)
        return rt

    def correctness(self) -> GateResult:
        """The correctness gate (`trials.Trials`): the trials, the numerics probes and the decoy probe."""
        assert self.job is not None and self.files is not None and self.trusted_dir is not None
        self.trials = Trials(self.job, self.files, self.trusted_dir, self.ref_side, self.config, self.rng,
                             self.candidate, self.shares_inputs, reference_trial=self.reference_trial,
                             take_report=self._take_report, evidence=self.evidence)
        return self.trials.correctness()

    def timing_side(self) -> TimedCalls:
        """This candidate's side of the paired window (`timed_calls.TimedCalls`), made at its first use."""
        if self.timing is None:
            assert self.job is not None and self.files is not None
            self.timing = TimedCalls(self.job, self.files, getattr(self, "harness_pid", None), self.trusted_dir,
                                     self.ref_side, self.be, self.config, self.rng, self.candidate, self.anon_exec,
                                     self.shares_inputs, take_report=self._take_report,
                                     check_exec_watch=self.check_exec_watch)
        return self.timing

    def latency(self) -> GateResult | None:
        """The latency gate (`timed_calls.latency_gate`): paired rounds against the trusted reference."""
        return latency_gate(self, self.timing_side())

    @property
    def timed_mismatch(self) -> dict | None:
        """A timed call whose output was wrong (its verdict), if one was."""
        return self.timing.timed_mismatch if self.timing is not None else None

    @property
    def timing_violation(self) -> str | None:
        """What a timed round reported that cannot be (more timings than calls, more ms than wall time)."""
        return self.timing.timing_violation if self.timing is not None else None

    def release_shared(self) -> None:
        """The reference worker lets go of the candidate's shared buffer (`Trials.release_shared`)."""
        if self.trials is not None:
            self.trials.release_shared()

    # phases -----------------------------------------------------------------------------------------
    def execute(self, static: GateResult, hack: AntiHackingGate) -> list[GateResult]:
        self.start_candidate()
        self.lap("start")
        assert self.trusted_dir is not None
        self.ref_side.send_prepare(self.trusted_dir, self.rng, self.seed)  # it prepares while the candidate builds
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
        self.parent_peak("base")
        correct = self.correctness()
        self.parent_peak("correctness")
        self.lap("correctness")
        self.ref_side.finish_reference()  # the rest of what the reference reports (its trials are all in by now)
        self.release_shared()
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
        # a run that already failed correctness with its process gone (killed for memory, say) is reported by
        # that gate, not as a kernel that was never mapped; only a failed correctness gate drops the finding,
        # as only it makes the verdict infeasible (a failed latency gate does not: dying in the timing window
        # must not shed the finding)
        self.audit(run_failed=not correct.passed)
        self.finish_candidate()
        self.read_reference_peak()
        self.lap("finish")
        ev = self.evidence()
        if compile_gate.passed:  # again, with every build of the run: Triton compiles at a kernel's first launch
            gates[1] = compile_gate = CompileGate().evaluate(ev)
        dyn = hack.dynamic(ev, _ignored_ops()) if correct.passed or self.candidate["trials"] else None
        from verifier.policy.mapped_audit import anonymous_exec_finding

        anon = anonymous_exec_finding(self.anon_exec)  # every audit and timed round's pause
        findings = [*self.audit_findings, *([anon] if anon else []),
                    *([("timed-output", self.timing_violation)] if self.timing_violation else [])]
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
                gates.append(GateResult("latency", FAIL, 0.0, _no_result(self, "while timing"), _no_result_detail(self)))
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
        # the job directory as the sandbox sees it (the harness, job.json, /proc/P/maps) and its run
        # directory on the host; `job_dir` becomes how the trusted side reaches it (the held job tmpfs)
        self.run_dir = self.job_dir.parent
        self.job_dir, self.job_inner = job_paths(self.job, self.job_dir)
        mount = getattr(self.job, "mount", None)  # the job's own tmpfs, held by descriptor
        self.files = JobFiles(self.job_dir, mount.fd if mount is not None else None)
        self.job.on_mark = self._on_mark
        if warm:
            # now, not when this verification ends: started at `close`, the next verdict (3 s later, on two
            # cores of a lent H100 host) still waited 0.6-1.7 s for the spare's CUDA torch import; started
            # here, its import runs beside this candidate's compile and is done by the next verdict
            _SPARES.refill(key, lambda: _start_candidate(self.config, self.be, self.isolated, wait=True))
        self.trusted_dir = self.run_dir / "trusted"
        self.trusted_dir.mkdir(mode=0o700)

    def write_job(self) -> None:
        """The candidate's source and job.json, written through the trusted side's path to the job directory
        (before the harness runs any candidate code), naming paths as the sandbox sees them."""
        assert self.job_dir is not None
        inner = self.inner_dir()
        (self.job_dir / "candidate.py").write_text(self.candidate_source)
        (self.job_dir / "build").mkdir()
        fields = self.be.job_fields()
        job = {"candidate_path": str(inner / "candidate.py"), "backend": self.be.name, "device": self.be.device,
               "installer": self.be.installer, "build_root": str(inner / "build"),
               "shared_build_root": str(self.config.root() / "shared"), "build_timeout_s": self.config.build_timeout_s,
               "threads": _threads(self.config), "init_seed": self.ref_side.init_seed,
               "gpu_memory_fraction": self.config.gpu_memory_fraction, **fields,
               # the flush the reference worker was told (`reference_replies`): the backend's default only where
               # none was chosen. Before, the backend's fields came last and the harness always flushed 1 GiB
               # while the worker flushed what was asked (a 128 MB flush read ReLU v0 at 0.055 of KernelBench)
               **gpu_round_fields(self.config, fields.get("l2_flush_bytes"))}
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
        self.ref_side.await_reference()
        self.lap("reference wait")
        assert self.trusted_dir is not None and self.files is not None
        dirs = {}
        for sub in ("init", "weights"):
            dirs[sub] = self.files.subdir(sub)
            self.files.hand_over(self.trusted_dir / sub, dirs[sub], "", move=not (self.shares_inputs or self.config.ncu))
        # the recipe is not secret (it is `get_inputs()` read on the meta device); the seeds are, and each
        # is revealed only in the command that uses it
        self.job.send({"cmd": "construct", "init": dirs["init"].name, "weights": dirs["weights"].name,
                       "recipe": self.ref_side.reference.get("recipe"), "device_compare": self.ref_side.device_compare})
        mark = self.job.expect({"ready", "report"}, self.config.run_timeout_s, on_other=self._serve_request)
        if mark is None or mark.get("phase") == "report":
            self._take_report(mark)
            return None
        self.candidate.update({k: mark.get(k) for k in ("builds", "import_seconds", "patched", "weights", "threads")})
        self.candidate["phase"] = "ready"
        self.harness_pid = self.job.job_pid()
        return mark

    def inner_dir(self) -> Path:
        """The job directory as the sandbox sees it (`job_dir` unless it is reached through a held tmpfs)."""
        assert self.job_dir is not None
        return self.__dict__.get("job_inner") or self.job_dir

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
        if isinstance(getattr(self, "candidate", None), dict):  # a build timeout's verdict names them
            self.candidate.setdefault("shared_builds", []).append(kind)
        if kind == "bind":
            self.progress("compile", "bindings", "building the bindings for a new signature (once, ~20 s)")
        elif kind == "pch":
            self.progress("compile", "pch", "building the precompiled header (once)")

        logs = self.config.root() / "trusted" / "build-logs"
        # In the background: the candidate keeps compiling its kernel meanwhile. The build belongs to this
        # verification (`trusted_builds.TrustedBuilds`): at most a few run at once, and `close` kills what
        # is still running and removes its half-written artefacts. Its output is kept (trusted side only)
        # so a build that produced nothing can be explained.
        from verifier.build.owned_builds import TrustedBuilds, run_in_background

        owned = self.__dict__.setdefault("owned_builds", TrustedBuilds(shared))
        run_in_background(owned, [sys.executable, "-m", "verifier.build.shared_artefacts", "--shared", str(shared), kind, json.dumps(spec)],
                          {**_trusted_env(), "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
                          logs / f"{kind}-{uuid.uuid4().hex[:8]}.log", timeout,
                          lambda: job.send({"cmd": "built", "kind": kind}), f"evokernel-trusted-build-{kind}")

    def _on_mark(self, mark: dict) -> None:
        if mark.get("phase") == "source":
            self.candidate.setdefault("sources", []).append(mark)

    def _take_report(self, mark: dict | None) -> None:
        if mark is not None and isinstance(mark.get("report"), dict):
            from verifier.gates.evidence import bounded_report
            from verifier.sandbox.isolation import private_scratch

            # candidate text in a verdict is bounded, and host paths and accounts are taken out of it
            report = bounded_report(mark["report"], (self.config.root(), private_scratch(), self.config.root().parent))
            keep = {k: report[k] for k in ("phase", "failed_phase", "error_type", "error", "traceback", "build_error",
                                           "builds", "threads_after_forward", "patched_after_forward")
                    if k in report}
            self.candidate.update(keep)
            peak = report.get("device_peak_bytes")
            if isinstance(peak, int) and not isinstance(peak, bool) and 0 < peak < 1 << 50:
                self.candidate["device_peak_bytes"] = peak  # the process's own claim: shown, never relied on
            if isinstance(report.get("device_peak_phases"), dict):
                self.candidate["device_peak_phases"] = report["device_peak_phases"]  # its claim too

    def profile(self) -> bool:
        assert self.job is not None and self.trusted_dir is not None and self.files is not None
        self.notify("profile", "running")
        if self.ref_side.reference.get("recipe") is None:
            d = self.files.subdir("p")
            self.files.hand_over(self.trusted_dir / "profile", d, "in", move=False)
            self.job.send({"cmd": "profile", "dir": d.name})
        else:
            self.job.send({"cmd": "profile", "seed": self.ref_side.reference["profile_seed"]})
        mark = self.job.expect({"profile_done", "report"}, self.config.run_timeout_s)
        if mark is None or mark.get("phase") == "report":
            self._take_report(mark)
            return False
        for k in ("profile", "ops_run", "work_split", "profile_device_ms", "profile_kernel_calls"):
            if k in mark:
                self.candidate[k] = mark[k]
        return True

    def ncu_job(self) -> Path:
        """A copy of this job for one profiled forward under Nsight Compute (`profile_once`)."""
        assert self.job_dir is not None and self.trusted_dir is not None and self.files is not None
        work = self.__dict__.get("run_dir", self.job_dir.parent) / "ncu-work"
        work.mkdir()
        shutil.copyfile(self.job_dir / "candidate.py", work / "candidate.py")
        for sub in ("init", "weights"):
            shutil.copytree(self.trusted_dir / sub, work / sub)
        (work / "profile").mkdir()
        job = json.loads((self.job_dir / "job.json").read_text())
        if self.ref_side.reference.get("recipe") is None:
            self.files.hand_over(self.trusted_dir / "profile", work / "profile", "in", move=False)
        else:
            job.update(recipe=self.ref_side.reference["recipe"], profile_seed=self.ref_side.reference["profile_seed"])
        job.update(candidate_path=str(work / "candidate.py"), build_root=str(work / "build"))
        (work / "build").mkdir()
        (work / "job.json").write_text(json.dumps(job))
        return work

    def audit(self, run_failed: bool = False) -> None:
        """Every executable object mapped by any process of the candidate's PID namespace from a place it
        could write (or from outside the read-only trees), audited through the mapped object itself
        (`verifier.policy.mapped_audit`) for what it imports (BLAS, ATen operators, dlopen, process creation,
        file and socket I/O); each split build's kernel object too. At the last audit, a run that claims
        its kernel ran must have a kernel object of its own build mapped."""
        pid = getattr(self, "harness_pid", None)
        if pid is None:
            return
        from verifier.policy.binary_audit import KERNEL, audit
        from verifier.policy.mapped_audit import audit_namespace, audit_objects
        from verifier.sandbox.isolation import visible_trees

        read_only = [*visible_trees(), self.config.root() / "shared", Path("/dev")]
        inner = self.inner_dir() if self.job_dir is not None else None  # what /proc/P/maps names
        launcher_cache = str(inner / "build" / "triton-cache") if inner is not None else None

        def expected(path: str, f) -> bool:  # Triton's own generated launcher loads the driver
            return (self.be.name == "triton" and launcher_cache is not None and path.startswith(launcher_cache)
                    and f.family in ("dynamic-loading", "python"))

        seen = audit_namespace(pid, inner, read_only, audit, expected)
        self.__dict__.setdefault("anon_exec", {}).update(seen.anon_exec)  # (a bare run in a test has none yet)
        found = list(seen.findings)
        if self.job_dir is not None:
            build = self.job_dir / "build"
            objs = [obj for pattern in ("ext/*/kernel.o", "cuda/*/cuda.o") for obj in build.glob(pattern)]
            found += audit_objects(objs, lambda p: audit(p, profile=KERNEL))
        self.audits_done = getattr(self, "audits_done", 0) + 1
        self.mapped_job_objects = sorted({*getattr(self, "mapped_job_objects", []), *seen.job_objects})
        calls = [c for c in self.candidate.get("kernel_calls", []) if isinstance(c, int)]
        if (self.audits_done > 1 and self.be.counts_kernel_calls and self.candidate.get("builds") and any(calls)
                and not self.mapped_job_objects and not (run_failed and seen.processes == 0)):
            gone = " (no process was left in it to audit: it ended before the run did)" if seen.processes == 0 else ""
            found.append(("kernel-not-mapped", "the candidate claims its kernel ran, but no process in its sandbox "
                                               f"has an object of its own build mapped{gone}"))
        for entry in found:
            if entry not in self.audit_findings:
                self.audit_findings.append(entry)
        self.check_exec_watch()

    def check_exec_watch(self) -> None:
        """Every range the sandbox made executable since it started is still there (`exec_watch.check`):
        at each audit and each timed round's pause, so code made and dropped within a forward is seen."""
        job = getattr(self, "job", None)
        watch = getattr(job, "exec_watch", None) if job is not None else None
        if watch is None:
            return
        self.candidate["exec_watch"] = watch.summary()
        entry = watch.check()
        if entry is not None and not any(f[0] == entry[0] for f in self.audit_findings):
            self.audit_findings.append(entry)

    def parent_peak(self, phase: str) -> None:
        """This process's resident peak while the candidate's trials were compared (`correctness`), above
        where it stood before them (`base`): the parent's share of the memory plan on the CPU (issue 33).
        The high-water mark is reset at `base` (harmless: nothing else reads it)."""
        if self.be.device != "cpu":
            return
        from verifier.clock.cpu_accounting import reset_rss_peak, rss_bytes

        found = self.__dict__.setdefault("parent_peaks", {})
        if phase == "base":
            found["base"] = rss_bytes()
            reset_rss_peak()
        else:
            found[phase] = rss_bytes(peak=True)

    def read_reference_peak(self) -> None:
        """The trusted worker's device-memory peak over this verification, per phase (on the CPU its
        resident peaks: the host is the device there); diagnostics: the device-memory plan is an estimate,
        this is what one run took."""
        if self.be.device not in ("cuda", "cpu") or self.ref_side.held is None or self.ref_side.pending:
            return
        ref = self.ref_side.held[0]
        if ref.send({"cmd": "peak"}):
            mark = ref.expect({"peak", "error"}, 10.0)
            if mark is not None and mark.get("phase") == "peak":
                self.ref_side.reference["device_peak_bytes"] = int(mark.get("device_peak_bytes") or 0)
                self.ref_side.reference["device_peak_phases"] = mark.get("phases") if isinstance(mark.get("phases"), dict) else {}

    def finish_candidate(self) -> None:
        if self.job is None:
            return
        self.job.send({"cmd": "finish"})
        # A correctness failure can leave the next forward queued (the harness runs it while the parent
        # compares): the report comes after it. Waited for, so that a slow forward (a Triton kernel under
        # the interpreter, on a loaded machine) does not lose the report and its builds, which read as
        # `no-custom-kernel`; a forward that already overran its deadline is not waited for again.
        trials = getattr(self, "trials", None)
        wait = 10.0 + (self.config.run_timeout_s if trials is not None and trials.forwards_queued > 0 else 0.0)
        mark = self.job.expect({"report"}, wait)
        self._take_report(mark)
        outcome = self.job.finish(timeout=5)
        self.outcome = outcome
        self.clean_exit = mark is not None and outcome.exit_code == 0 and not outcome.timed_out

    def evidence(self) -> Evidence:
        outcome = getattr(self, "outcome", None)
        marks = self.job.marks if self.job is not None else []
        if outcome is None and self.job is not None and (self.job.timed_out or self.job.proc.poll() is not None):
            self.outcome = outcome = self.job.finish(timeout=1)
        return Evidence(self.candidate_source, self.be.name, self.config, self.ref_side.reference, self.trusted_dir,
                        self.candidate, self.job_dir, outcome, marks, self.be.counts_kernel_calls)

    def close(self) -> None:
        if (owned := self.__dict__.get("owned_builds")) is not None:
            owned.close()  # the trusted builds this run asked for end with it (killed, half-written files removed)
        if self.job is not None and self.job.proc.poll() is None:
            self.job.kill()
        if self.job is not None and getattr(self, "outcome", None) is None:
            with contextlib.suppress(Exception):
                self.outcome = self.job.finish(timeout=1)
        if (files := getattr(self, "files", None)) is not None:
            files.close()
        from verifier.sandbox import lifetime

        if self.ref_side.held is not None and self.ref_side.pending and lifetime.shutting_down():
            # SIGTERM/SIGINT: every child is killed already, and a background drain would die with the
            # process before it removed the run directory (it was left in /dev/shm: issue 37)
            self.ref_side.held[0].kill()
            self.ref_side.held = None
        if self.ref_side.held is not None and self.ref_side.pending:
            # The candidate failed before its reference was needed: the worker goes back once its answer
            # is in (in the background, so a compile error is not held up by the reference).
            held, config, run_dir = self.ref_side.held, self.config, self.__dict__.get("run_dir")
            self._release_mount()
            self.ref_side.held = None

            def drain() -> None:
                mark = held[0].expect({"prepared", "error"}, config.run_timeout_s * 3)
                if mark is None:
                    held[0].kill()
                _REFERENCE.give_back(self.reference_source, self.be, config, held)
                if run_dir is not None:
                    discard(run_dir, run_dir.parent.parent / "trash")

            threading.Thread(target=drain, name="evokernel-reference-drain", daemon=True).start()
            return
        if self.ref_side.held is not None:
            _REFERENCE.give_back(self.reference_source, self.be, self.config, self.ref_side.held)
        self._release_mount()
        if (run_dir := self.__dict__.get("run_dir")) is not None:  # never recursive, never stopped by what the
            discard(run_dir, run_dir.parent.parent / "trash")  # candidate left (see jobfiles)

    def _release_mount(self) -> None:
        """Let go of the job tmpfs: its pages are freed once the sandbox is gone too."""
        mount = getattr(self.job, "mount", None) if self.job is not None else None
        if mount is not None:
            mount.close()


def _no_result(run: _Run, when: str) -> str:
    from verifier.gates.evidence import _no_report_reason

    return _no_report_reason(run.evidence(), when)


def _no_result_detail(run: _Run) -> dict:
    from verifier.gates.evidence import no_report_detail

    return no_report_detail(run.evidence())


@functools.cache
def _ignored_ops() -> frozenset[str]:
    from verifier.workers.harness import IGNORED_OPS

    return frozenset(IGNORED_OPS)
