"""The correctness gate of one verification: the trials and numerics probes (`verifier.correctness.probes`) the
candidate runs, each compared by the parent against the reference's outputs, and the decoy probe
(`verifier.correctness.decoy`) sent between them.

`Trials` is a collaborator of one verification (`verifier.run.verification._Run` makes one when correctness
starts, as `trials`): it is given the candidate's job and its hand-over directories, the trusted directory,
the reference side, the settings and the run's secret generator, the run's record of the candidate (which
it adds to), and three callbacks into the run: the reference's next trial, taking the harness's report, and
the evidence so far.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import random
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from verifier.config import VerifyConfig
from verifier.correctness import decoy
from verifier.errors import VerifierError
from verifier.gates.evidence import CorrectnessGate, Evidence, ReadBuffer, compare_files
from verifier.result import FAIL, PASS, GateResult
from verifier.run.handover import JobFiles, check_held, drop_held
from verifier.run.reference_replies import ReferenceSide, _valid_recipe
from verifier.sandbox.job_dir import HeldDir
from verifier.sandbox.supervisor import LiveJob
from verifier.workers.pools import _threads


class Trials:
    """The correctness side of one verification: trials, probes and the decoy probe (see the module
    docstring). `shares_inputs`: another run reads the same trusted inputs after this one (`compare`), so
    they are copied, never moved, and kept. `forwards_queued`: forwards sent to the harness and not yet
    answered (the run's last wait for the harness's report allows for them)."""

    def __init__(self, job: LiveJob, files: JobFiles, trusted_dir: Path, ref_side: ReferenceSide,
                 config: VerifyConfig, rng: random.Random, candidate: dict[str, Any], shares_inputs: bool, *,
                 reference_trial: Callable[[int], dict | None], take_report: Callable[[dict | None], None],
                 evidence: Callable[[], Evidence]) -> None:
        self.job, self.files, self.trusted_dir, self.ref_side = job, files, trusted_dir, ref_side
        self.config, self.rng, self.candidate, self.shares_inputs = config, rng, candidate, shares_inputs
        self.reference_trial, self._take_report, self.evidence = reference_trial, take_report, evidence
        self.forwards_queued = 0
        self.staging_tag: str | None = None  # the candidate's shared buffer the reference worker has mapped
        self.read_buffer: ReadBuffer | None = None  # the candidate's output files are read into it while trials run

    def correctness(self) -> GateResult:
        """The trials, then the numerics probes (`verifier.correctness.probes`), every one compared by the parent from
        the files of its held directory; the probes' records go into the gate's detail (`probes`)."""
        self.read_buffer = ReadBuffer()  # the candidate's output files are read into it, trial after trial
        try:
            return self._correctness()
        finally:
            self.read_buffer.close()
            self.read_buffer = None

    def _correctness(self) -> GateResult:
        from verifier.correctness import probes

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

        # the two checked forwards (verifier/correctness/decoy.py): the replay of a trial, and the fresh probe
        # in the place of ordinary trial `fresh` (the reference prepares one more than `config.trials`)
        # (`ReferenceSide.send_prepare` drew it with the trials; a run without one draws it now)
        drawn = self.ref_side.decoy_plan
        probe_plan = dict(drawn) if isinstance(drawn, dict) else decoy.plan(self.rng, max(1, self.config.trials))
        # the ordinary trial whose kernel results are followed to the output (`decoy.Flow`), drawn from the
        # system's generator: the run's seeded draws stay as they were
        others = [k for k in range(decoy.ordinary_slots(max(1, self.config.trials))) if k != probe_plan.get("fresh")]
        probe_plan["flow"] = random.SystemRandom().choice(others) if others else -1

        def send_trial(i: int, rt: dict) -> HeldDir:
            d = self.files.subdir(f"t{i}")
            # the fresh probe's command differs only inside the harness (a local there): same folder, inputs
            kind = "probe" if self._fresh_probe(i, rt, probe_plan) else "trial"
            if self.ref_side.reference.get("recipe") is None:
                self.files.hand_over(self.trusted_dir / rt["dir"], d, "in", move=not self.shares_inputs and i != probe_plan["of"])
                self.job.send({"cmd": kind, "dir": d.name, "index": i,
                               **({"flow": True} if kind == "trial" and i == probe_plan["flow"] and not rt.get("probe") else {})})
            else:  # the harness draws the trial's inputs from its seed, revealed now
                cmd = {"cmd": kind, "dir": d.name, "index": i, "seed": rt["seed"], "dist": rt.get("dist", "task"),
                       **({"flow": True} if kind == "trial" and i == probe_plan["flow"] and not rt.get("probe") else {})}
                if rt.get("probe") == probes.SHAPE:  # drawn from the held-out recipe; raising there is allowed
                    cmd.update(recipe=rt["recipe"], may_refuse=True)
                self.job.send(cmd)
            self.forwards_queued = self.forwards_queued + 1
            return d

        def next_trial(i: int) -> tuple[int, dict | None]:
            """The next trial from `i` on that the candidate runs; the probes the reference skipped are recorded."""
            while (rt := self.reference_trial(i)) is not None:
                if rt.get("probe") and "skip" in rt:
                    log(i, rt, "skip", str(rt["skip"])[:300])
                elif rt.get("probe") == probes.SHAPE and (self.ref_side.reference.get("recipe") is None
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
            self.forwards_queued = 0 if mark is None or mark.get("phase") == "report" else self.forwards_queued - 1
            if mark is None or mark.get("phase") == "report":
                self._take_report(mark)
                self.candidate["failed_phase"] = self.candidate.get("failed_phase", "correctness")
                gate = CorrectnessGate().failure(self.evidence(), start)
                if rt.get("probe"):
                    gate.detail["probes"] = log(i, rt, "fail", gate.reason)
                    gate.reason = f"{label_of(rt)}: {gate.reason}"
                return gate
            if self._fresh_probe(i, rt, probe_plan):  # judged for the anti-hacking gate, not as a trial
                self.judge_fresh_probe(i, rt, mark, d)
                i, rt = next_trial(i + 1)
                d = send_trial(i, rt) if rt is not None else d
                continue
            self.candidate["kernel_calls"].append(int(mark.get("kernel_calls") or 0))
            flow = mark.get("flow")
            if isinstance(flow, dict):  # the followed trial (`decoy.flow_verdict` reads it)
                self.candidate["kernel_flow"] = {"trial": i, **_probe_counts(flow), "reached": flow.get("reached") is True}
            probe = mark.get("gpu_probe")
            if isinstance(probe, dict):  # the GPU side-stream probe (verifier.clock.gpu_timing.gpu_findings reads it)
                self.candidate.setdefault("gpu_probes", []).append(
                    {"pending_ms": float(probe.get("pending_ms") or 0.0), "idle_ms": float(probe.get("idle_ms") or 0.0),
                     "drain_ms": float(probe.get("drain_ms") or 0.0), "changed": bool(probe.get("changed"))})
            self.candidate["trials"].append({"seed": rt["seed"]})
            ni, following = next_trial(i + 1)
            decoy_trial = not rt.get("probe")  # the decoy probe replays an ordinary trial, after one
            if decoy_trial and i == probe_plan["of"]:
                probe_plan["rt"] = rt  # kept: a `prepared` mark may replace self.ref_side.reference meanwhile
            # On files the harness runs the next trial while this one is compared (its files are in their
            # own folder); on the device its shared buffer is read first, then the next call may fill it.
            digest = decoy_trial and i == probe_plan["of"]
            verdict = self.judge_call(i, rt, mark, d, label_of(rt), digest) if self.ref_side.device_compare else None
            probe_dir = (self.send_probe(probe_plan["rt"], i)  # before the next trial
                         if decoy_trial and i == probe_plan["after"] and "rt" in probe_plan else None)
            if probe_dir is not None and self.ref_side.device_compare and verdict is not None and not verdict.get("fail"):
                if not self.await_probe(probe_dir, probe_plan, deadline):
                    return CorrectnessGate().failure(self.evidence(), start)
                probe_dir = None
            after = send_trial(ni, following) if following is not None else None
            verdict = verdict if verdict is not None else self.judge_call(i, rt, mark, d, label_of(rt), digest)
            if "refused" in verdict:  # the candidate raised; allowed on a held-out shape only
                text = verdict["refused"]
                if rt.get("probe") == probes.SHAPE:
                    log(i, rt, "refused", text)
                    i, rt, d = ni, following, after if after is not None else d  # (None: the loop ends)
                    continue
                verdict = {"fail": f"{label_of(rt)}: forward raised {text}"}
            if rt.get("probe"):
                log(i, rt, "fail" if verdict.get("fail") else "pass", verdict.get("fail", ""))
            if verdict.get("fail"):
                return GateResult("correctness", FAIL, time.monotonic() - start, verdict["fail"],
                                  {k: v for k, v in verdict.items() if k != "fail"}
                                  | {"trial": i, "probes": log(i, None, ""), **inputs_detail(self.ref_side.reference)})
            if not rt.get("probe"):
                trials += 1
                worst_abs, worst_rel = max(worst_abs, verdict["max_abs"]), max(worst_rel, verdict["max_rel"])
            if decoy_trial and i == probe_plan["of"]:
                probe_plan["digests"] = (verdict.get("digests") if self.ref_side.device_compare
                                         else self.output_digests(d, mark.get("outputs")))
            else:  # compared and not replayed by the decoy probe: its output files are done with
                # the reference's own files stay while another run reads them after this one (compare)
                drop_outputs(d, None if self.shares_inputs else self.trusted_dir / rt["dir"])
            if probe_dir is not None and not self.await_probe(probe_dir, probe_plan, deadline):
                return CorrectnessGate().failure(self.evidence(), start)
            i, rt, d = ni, following, after if after is not None else d  # (None: the loop ends)
        return GateResult("correctness", PASS, time.monotonic() - start, "",
                          {"trials": trials, "max_abs": worst_abs, "max_rel": worst_rel, "atol": atol,
                           "rtol": rtol, "weights": self.candidate.get("weights"), "threads": _threads(self.config),
                           "probes": log(i, None, ""), **inputs_detail(self.ref_side.reference)})

    @staticmethod
    def _fresh_probe(i: int, rt: dict, probe_plan: dict) -> bool:
        """Whether reference trial `i` is the one the fresh probe takes the place of (an ordinary trial)."""
        return i == probe_plan.get("fresh") and not rt.get("probe")

    def judge_fresh_probe(self, i: int, rt: dict, mark: dict, d: HeldDir) -> None:
        """The fresh probe's result (`decoy.verdict` reads it): its garbled outputs against the reference's
        for trial `i`, outputs only (the harness saves no inputs-after for a probe). `right`: they passed,
        so no kernel result reached them. Recorded as `fresh_probe`; its files are dropped."""
        probe = mark.get("probe")
        found: dict = probe if isinstance(probe, dict) else {}
        record = {"trial": i, "fresh": True, **_probe_counts(found), "error": str(found.get("error") or "")[:300]}
        if not record["error"]:
            label = "the checked call on fresh inputs"
            if self.ref_side.device_compare:
                verdict = self.examine(i, mark, label, outputs_only=True)
            else:
                check_held(d, self.trusted_dir / rt["dir"], self.trusted_dir)
                verdict = compare_files(d, self.trusted_dir / rt["dir"], mark.get("outputs"), rt["outputs"],
                                        self.config.atol, self.config.rtol, self.config, label=label,
                                        scratch=self.read_buffer)
            record["right"] = not verdict.get("fail")
            if record["right"]:
                record["max_abs"], record["max_rel"] = verdict.get("max_abs"), verdict.get("max_rel")
        self.candidate["fresh_probe"] = record
        drop_outputs(d, None if self.shares_inputs else self.trusted_dir / rt["dir"])

    def send_probe(self, rt: dict, index: int) -> HeldDir:
        """The decoy probe (`verifier/correctness/decoy.py`): the inputs of reference trial `rt` again, every
        custom-kernel result replaced by garbage in the harness; the harness's next command after trial `index`."""
        d = self.files.subdir(f"t{index + 1}")  # named as a trial's folder
        if self.ref_side.reference.get("recipe") is None:
            self.files.hand_over(self.trusted_dir / rt["dir"], d, "in", move=not self.shares_inputs)
            self.job.send({"cmd": "probe", "dir": d.name, "index": index + 1})
        else:
            self.job.send({"cmd": "probe", "dir": d.name, "index": index + 1, "seed": rt["seed"],
                           "dist": rt.get("dist", "task")})
        self.forwards_queued = self.forwards_queued + 1
        return d

    def output_digests(self, d: HeldDir, outputs) -> list[str] | None:
        try:
            return _output_digests(d, outputs, self.config, self.read_buffer)
        except Exception:  # noqa: BLE001 - unreadable outputs: no decoy finding from this probe
            return None

    def await_probe(self, d: HeldDir, probe_plan: dict, deadline: float) -> bool:
        """The probe's result (the harness's next `trial_done`), recorded for the anti-hacking gate as
        `decoy_probe`; False when the harness died meanwhile."""
        mark = self.job.expect({"trial_done", "report"}, max(1.0, deadline - time.monotonic()))
        self.forwards_queued = 0 if mark is None or mark.get("phase") == "report" else self.forwards_queued - 1
        if mark is None or mark.get("phase") == "report":
            self._take_report(mark)
            self.candidate["failed_phase"] = self.candidate.get("failed_phase", "correctness")
            return False
        probe = mark.get("probe")
        found: dict = probe if isinstance(probe, dict) else {}
        record = {"trial": probe_plan["of"], **_probe_counts(found), "error": str(found.get("error") or "")[:300],
                  "trial_digests": probe_plan.get("digests")}
        if not record["error"]:
            record["probe_digests"] = (self.examine(None, mark, "the decoy probe", digest=True).get("digests")
                                       if self.ref_side.device_compare else self.output_digests(d, mark.get("outputs")))
        self.candidate["decoy_probe"] = record
        drop_held(d)
        return True

    def judge_call(self, i: int, rt: dict, mark: dict, d: HeldDir, label: str, digest: bool) -> dict:
        """Trial `i`'s results against the reference's: {"refused": text} when forward raised, else
        `compare_files`'s answer (from files, or from the candidate's shared buffer on the device)."""
        from verifier.correctness import probes

        if mark.get("refused") is not None:
            return {"refused": " ".join(str(mark["refused"]).split())[:240]}
        magnitude = rt.get("probe") == probes.MAGNITUDE
        if self.ref_side.device_compare:
            return self.examine(i, mark, label, magnitude=magnitude, digest=digest)
        check_held(d, self.trusted_dir / rt["dir"], self.trusted_dir)
        return compare_files(d, self.trusted_dir / rt["dir"], mark.get("outputs"), rt["outputs"],
                             self.config.atol, self.config.rtol, self.config, label=label,
                             after_digests=rt.get("after_digests"), magnitude=magnitude,
                             scratch=self.read_buffer)

    def examine(self, index: int | None, mark: dict, label: str, *, magnitude: bool = False,
                digest: bool = False, outputs_only: bool = False) -> dict:
        """A call's results checked by the trusted reference worker on the device (`Worker.examine`):
        trial `index` recomputed there and compared in full with what the candidate put in its shared
        buffer (index None: nothing compared), and with `digest` a keyed digest of its outputs. A buffer
        new to this run is passed on first: received from the harness's socket, sent to the worker's,
        closed here (this process never maps it). Returns `compare_files`'s shape of answer."""
        assert self.ref_side.held is not None
        # the worker answers commands in order: its preparation's marks come first, and are kept
        self.ref_side.finish_reference()
        ref = self.ref_side.held[0]
        staging = mark.get("staging")
        if not (isinstance(staging, dict) and isinstance(staging.get("tag"), str)
                and isinstance(staging.get("nbytes"), int) and 0 < staging["nbytes"] <= 1 << 42):
            return {"fail": f"{label}: the candidate's results were malformed (no shared buffer)"}
        cmd: dict = {"cmd": "examine", "index": index, "compare": index is not None, "outputs": mark.get("outputs"),
                     "after": mark.get("after"), "atol": self.config.atol, "rtol": self.config.rtol,
                     "magnitude": magnitude, "degenerate": bool(self.config.degenerate),
                     "label": label, "digest_key": self.digest_key if digest else None,
                     "outputs_only": outputs_only}
        if staging["tag"] != self.staging_tag:
            got = self.job.receive_fd(10.0)
            if got is None or got[0] != staging["tag"]:
                if got is not None:
                    os.close(got[1])
                return {"fail": f"{label}: the candidate's shared buffer did not arrive"}
            try:
                sent = ref.send_fd(got[1], staging["tag"])
            finally:
                os.close(got[1])
            if not sent:
                raise VerifierError("the reference worker could not be given the candidate's results")
            cmd["stage"] = {"tag": staging["tag"], "nbytes": staging["nbytes"]}
            self.staging_tag = staging["tag"]
        if not ref.send(cmd):
            raise VerifierError("the reference worker stopped before comparing the outputs")
        # the candidate's process ending mid-comparison (out of memory drawing its next trial) left the
        # worker stuck on the card with the buffer it exported for 240 s on an H100: not waited for
        job = self.job
        reply = ref.expect({"examined", "error"}, self.config.run_timeout_s, abort=ended_for(job, 5.0))
        if reply is None and job.ended():
            self.ref_side.drop()
            return {"fail": f"{label}: the candidate's process ended while its results were being compared"}
        if reply is None or reply.get("phase") == "error":
            why = "did not answer" if reply is None else f"failed: {str(reply.get('error', ''))[:200]}"
            self.ref_side.drop()
            raise VerifierError(f"the reference worker {why} while comparing the outputs on the device")
        return {k: v for k, v in reply.items() if k != "phase"}

    @functools.cached_property
    def digest_key(self) -> int:
        """The decoy probe's digest key, drawn per run (the candidate never sees it)."""
        return self.rng.getrandbits(62)

    def release_shared(self) -> None:
        """The reference worker unmaps the candidate's buffer once correctness is done (it held a call's
        results on the card)."""
        if self.ref_side.device_compare and self.ref_side.held is not None and self.staging_tag is not None:
            self.ref_side.held[0].send({"cmd": "release"})
            self.staging_tag = None



def inputs_detail(reference: dict) -> dict:
    """What the verdict says of the inputs, from the reference's report: their distribution and how they
    reached the candidate."""
    seeded = reference.get("recipe") is not None
    return {"input_distribution": reference.get("input_distribution", ""),
            "inputs": "seeded (drawn on the device from seeds revealed per call)" if seeded
            else "files (drawn on the CPU by the trusted side)"}


def _probe_counts(found: dict) -> dict:
    """The counts of a probe's record (`decoy.probe_forward`), a claim of the candidate's process: anything
    but a plain count is none."""
    def count(v) -> int:
        return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else 0

    return {k: count(found.get(k)) for k in ("kernel_calls", "replaced", "results", "copies", "reruns")}


def ended_for(job, grace_s: float):
    """A predicate: `job` ended at least `grace_s` ago (a worker gets that long to finish what it began)."""
    since: list[float] = []

    def check() -> bool:
        if not job.ended():
            return False
        if not since:
            since.append(time.monotonic())
        return time.monotonic() - since[0] >= grace_s

    return check


def _output_digests(held, outputs, config, scratch: ReadBuffer | None = None) -> list[str]:
    """A digest of each output's dtype, shape and bytes, read from the call's held directory (the decoy
    probe compares a trial's with its replay's: `verifier.correctness.decoy`); into `scratch` when given."""
    import numpy as np

    from verifier.gates.evidence import _dir_fd, _load_fd, _read_into

    found = []
    with _dir_fd(held) as dfd:
        for meta in outputs or []:
            if scratch is not None:
                arr = _read_into(dfd, str(meta["file"]), config, int(config.memory_gb * 1024**3), scratch)
            else:
                arr, _ = _load_fd(dfd, str(meta["file"]), config)
            h = hashlib.sha256(f"{arr.dtype.str}{arr.shape}".encode())
            h.update(np.ascontiguousarray(arr).reshape(-1).view(np.uint8).data)
            found.append(h.hexdigest())
    return found


_OUTPUT_FILE = re.compile(r"(out|after)\d+\.npy")  # outputs, and the inputs as forward left them


def drop_outputs(held: HeldDir, trusted: Path | None) -> None:
    """Remove a compared trial's output files and inputs-after, the candidate's (by name, through its held descriptor: a
    link put in their place is removed, never followed) and the reference's, so that a problem whose
    outputs are gigabytes keeps a trial or two of them in the job's memory-backed folders, not all of
    them (the reference worker waits for this before it writes more: `reference_worker.TRIAL_WINDOW`)."""
    for name in _names(held.fd):
        if _OUTPUT_FILE.fullmatch(name):
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=held.fd)
    if trusted is None:
        return
    for name in _names(str(trusted)):
        if _OUTPUT_FILE.fullmatch(name):
            with contextlib.suppress(OSError):
                os.unlink(trusted / name)


def _names(where) -> list[str]:
    try:
        return os.listdir(where)
    except OSError:
        return []
