"""The latency gate of one verification, from the candidate's side: its timed rounds in the paired
window (`verifier.clock.rounds`), every timed call's outputs checked (read frozen from the paused process on
the CPU, by blocks on the GPU), and the sandbox's CPU and wait around each round.

`TimedCalls` is a collaborator of one verification (`verifier.run.verification._Run` makes one when timing
starts, as `timing`): the per-candidate side of the paired window (`verifier.clock.rounds._timed_rounds`
drives it, one per candidate timed). It is given the candidate's job, its hand-over directories and harness,
the reference side, the settings and the run's secret generator, the run's record of the candidate and of
anonymous executable memory (both of which it adds to), and a callback that takes the harness's report.
What it finds is its own: `timing_violation`, `timed_mismatch`, `round_facts`, `checked_calls`.
`latency_gate` makes the latency gate from the window over one run.
"""

from __future__ import annotations

import dataclasses
import math
import random
import secrets
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from verifier.clock.rounds import (
    _clock_detail,
    _median,
    _timed_rounds,
    choose_blocks,
    mark_read_at,
    wake_worker,
    window_segments,
)
from verifier.correctness.compare import compare_tensor, output_spread
from verifier.gates.evidence import compare_files
from verifier.result import FAIL, PASS, GateResult
from verifier.run.handover import check_held, drop_held
from verifier.sandbox.job_dir import HeldDir
from verifier.workers.pools import _threads

if TYPE_CHECKING:
    from verifier.backends import Backend
    from verifier.config import VerifyConfig
    from verifier.run.handover import JobFiles
    from verifier.run.reference_replies import ReferenceSide
    from verifier.sandbox.supervisor import LiveJob

# what a wrong timed call's verdict says, whichever way its outputs reached the parent
FRESH_OUTPUTS = ("every call gets new inputs and must compute its outputs afresh (a cached or stale result, or a view "
                 "of its inputs?)")


#: the latency detail's ratios and times, all empty in a verdict with no figure (every round unresolved or
#: disturbed): a ratio from rounds that were thrown out is no figure either
NO_FIGURE_RATIOS = ("speedup", "lo", "hi", "halfwidth", "ref_ms", "cand_ms", "ref_iqr_ms", "cand_iqr_ms",
                    "speedup_vs_compile")


def own_stub_enabled(device: str, config: VerifyConfig) -> bool:
    """Whether the candidate's harness runs its own stub round after each CPU round (`own_stub`;
    `VerifyConfig.own_stub`: "off" for an experiment; `EVOKERNEL_OWN_STUB=on` adds it). On the GPU
    only when asked ("on"): there it runs after the round's blocks were saved and checked, on the outputs
    the harness kept for it, and says whether the candidate's own loop costs more than the trusted one
    (session 14: its rounds on an H100 cost 0.05 ms a call and ~1 ms a round more than the trusted
    worker's, which the subtraction, capped at the trusted stub, charges to the kernel)."""
    import os

    mode = str(config.own_stub)
    if os.environ.get("EVOKERNEL_OWN_STUB") == "on":  # the environment can only add the round, never drop it
        mode = "on"
    return mode == "on" or (mode == "auto" and device == "cpu")


def speed_of_light_detail(config: VerifyConfig, reference: dict, device: str, moved: int, gbps: float | None,
                          reference_gbps: float | None) -> dict:
    """The verdict's position against the machine's bandwidth peak (`verifier.clock.bandwidth`) on `device`:
    the peak the reference worker measured or read from its cache (its report, `reference`;
    `VerifyConfig.bandwidth_peak_gbps` gives one instead), the fractions of it, the bound, and a
    flag above 1."""
    from verifier.clock.bandwidth import speed_of_light

    if config.speed_of_light is False:
        return {}
    peak = reference.get("bandwidth_peak") or {}
    given = config.bandwidth_peak_gbps
    peak_gbps = float(given) if given is not None else peak.get("gbps")
    flops_peak = reference.get("flops_peak") or {}
    given_flops = config.flops_peak_gflops
    peak_gflops = float(given_flops) if given_flops is not None else flops_peak.get("gflops")
    tf32 = (reference.get("flops_peak_tf32") or {}).get("gflops") if given_flops is None else None
    out = speed_of_light(moved or None, gbps, reference_gbps, peak_gbps, reference.get("flops"), peak_gflops,
                         tf32_peak_gflops=tf32)
    for key in ("flops_method", "flops_error"):  # how the FLOPs were counted, or why they were not
        if reference.get(key):
            out[key] = str(reference[key])
    if out.get("flops_peak_gflops") is not None:
        # the roof's dtype: the task's own (`bandwidth.compute_dtype`), float32 for a peak given by hand
        out["flops_peak_dtype"] = "float32" if given_flops is not None else str(flops_peak.get("dtype") or "float32")
        if out.pop("flops_roof", None) == "tf32":  # above the float32 roof, within the tensor cores' TF32 one
            out["flops_peak_dtype"] = "tf32"
            tf32_peak = reference.get("flops_peak_tf32") or {}
            flops_peak = {**flops_peak, **{k: tf32_peak[k] for k in ("method", "cached") if k in tf32_peak}}
        out["flops_peak_source"] = "given" if given_flops is not None else (
            f"{flops_peak.get('method', 'measured')}, {'cached' if flops_peak.get('cached') else 'measured now'}")
    if given is not None:
        out["bandwidth_peak_source"] = "given"
    elif peak.get("gbps"):
        out["bandwidth_peak_source"] = (f"{peak.get('method', 'measured')}, "
                                        f"{'cached' if peak.get('cached') else 'measured now'} ({peak.get('key', '')})")
    elif peak.get("error"):
        out["bandwidth_peak_source"] = "not measured: " + str(peak["error"])
    if device == "cuda":
        out["bandwidth_peak_note"] = ("GPU peak: the card's own device-to-device copy rate (each byte read and "
                                      "written once), not its datasheet figure")
    return out


class TimedRun(Protocol):
    """What the latency gate reads of the run it times (a `verifier.run.verification._Run`), besides what
    `_timed_rounds` reads of the window's owner: its settings, backend, record of the candidate and reference."""

    config: VerifyConfig
    be: Backend
    candidate: dict[str, Any]
    ref_side: ReferenceSide


def latency_gate(run: TimedRun, side: TimedCalls | None) -> GateResult | None:
    """Paired rounds of `run`'s candidate (its timing `side`) against the trusted reference (see
    `_timed_rounds`), as the latency gate."""
    from verifier.clock.stats import robust_paired

    start = time.monotonic()
    rounds = _timed_rounds(run, [side], lambda means, keep: robust_paired(
        means[0], means[1], keep, rng_seed=0, noisy_halfwidth=run.config.noise_halfwidth))
    if rounds is None:
        if run.candidate.get("ref_timing_failed"):
            return GateResult("latency", FAIL, time.monotonic() - start, "the reference failed while timing")
        return None
    est, means, count, checked, clock = rounds
    if est.rounds == 0 and clock.get("resolved"):
        # every round was disturbed (a busy machine, or the app's own event loop beside the verifier):
        # an estimate from the rounds the overhead did not swallow, said noisy (no speed claim)
        fallback = robust_paired(means[0], means[1], clock["resolved"], rng_seed=0,
                                 noisy_halfwidth=run.config.noise_halfwidth)
        est = dataclasses.replace(fallback, noisy=True)
    detail = est.to_dict()
    # the candidate's time as the paired ratio implies it, so latency and reference give the verdict's speedup
    implied_ms = est.ref_ms / est.speedup if est.speedup > 0 else est.cand_ms
    detail.update(median_ms=implied_ms, reference_ms=est.ref_ms, runs=len(means[1]) * count,
                  calls_per_round=count, rounds=len(means[1]), threads=_threads(run.config),
                  checked_calls=checked, sampled_checks=checked, times_ms=means[1][:200],
                  reference_times_ms=means[0][:200], **_clock_detail(clock, means, count))
    if getattr(getattr(run, "be", None), "device", "") == "cuda":  # the flush before each timed call: its size sets the rounds' overhead
        from verifier.clock.gpu_timing import L2_FLUSH_BYTES
        from verifier.clock.paired_calls import (
            PAD_CYCLES_PER_US,
            flush_bytes_of,
            gpu_loop_of,
            gpu_pad_cycles_of,
        )

        detail["l2_flush_mb"] = (flush_bytes_of(run.config) or L2_FLUSH_BYTES) / 1024**2
        detail["gpu_loop"] = gpu_loop_of(run.config)
        detail["gpu_pad_us"] = gpu_pad_cycles_of(run.config) / PAD_CYCLES_PER_US
    moved = int(run.ref_side.reference.get("input_bytes", 0)) + int(run.ref_side.reference.get("output_bytes", 0))
    if moved and est.cand_ms > 0:
        detail["gbps"] = moved / (est.cand_ms / 1000.0) / 1e9
        detail["reference_gbps"] = moved / (est.ref_ms / 1000.0) / 1e9
    detail.update(speed_of_light_detail(run.config, run.ref_side.reference, getattr(getattr(run, "be", None), "device", ""),
                                        moved, detail.get("gbps"), detail.get("reference_gbps")))
    comp = run.ref_side.reference.get("compiled_times_ms")
    if comp:
        comp_med = _median(comp)
        detail.update(compiled_ms=comp_med, speedup_vs_compile=comp_med / est.cand_ms if est.cand_ms > 0 else None)
    wide = "the interval stayed wide" + (" (stopped early: no claim was in reach in the time budget)"
                                         if detail.get("out_of_reach") else "")
    cause = host_bound_reason(detail) or detail["busy"]
    reason = ("noisy: " + (cause or wide)) if est.noisy else ""
    if est.rounds == 0:
        # every round was disturbed or left the calls no measurable share of its time: no figure at
        # all rather than one from rounds that were thrown out (clamped rounds read as 90000x)
        # ...and no ratio either: the interval of those rounds is as meaningless as their median (a
        # relu whose every round came out below the stub read 19984-65828 in `timing.lo/hi`)
        detail.update(median_ms=None, reference_ms=None, no_figure=True, gbps=None, reference_gbps=None,
                      bandwidth_fraction=None, reference_bandwidth_fraction=None, bound=None,
                      gflops=None, reference_gflops=None, flops_fraction=None, reference_flops_fraction=None,
                      **dict.fromkeys(NO_FIGURE_RATIOS))
        reason = "noisy: no round could be measured (" + (cause or "the overhead swallowed the calls") + ")"
    return GateResult("latency", PASS, time.monotonic() - start, reason, detail)


def host_bound_reason(detail: dict) -> str:
    """Why rounds were left out when most of the lost ones were padded GPU rounds whose queue ran dry
    (`stats.host_bound`): the pad, not the machine, is what to change; '' otherwise."""
    bound, disturbed = int(detail.get("host_bound_rounds") or 0), int(detail.get("disturbed_rounds") or 0)
    if not bound or bound * 2 < max(1, disturbed):
        return ""
    return (f"the card waited on the host in {bound} of {int(detail.get('rounds') or bound)} rounds: the GPU pad "
            f"({float(detail.get('gpu_pad_us') or 0):g} µs) is shorter than a call's host work; raise EVOKERNEL_GPU_PAD_US")


class TimedCalls:
    """The timing side of one candidate (see the module docstring). `shares_inputs`: another run reads the
    same trusted inputs after this one (`compare`), so they are copied, never moved."""

    def __init__(self, job: LiveJob, files: JobFiles, harness_pid: int | None, trusted_dir: Path | None,
                 ref_side: ReferenceSide, be: Backend, config: VerifyConfig, rng: random.Random,
                 candidate: dict[str, Any], anon_exec: dict, shares_inputs: bool, *,
                 take_report: Callable[[dict | None], None], check_exec_watch: Callable[[], None]) -> None:
        self.job, self.files, self.harness_pid, self.trusted_dir = job, files, harness_pid, trusted_dir
        self.ref_side, self.be, self.config, self.rng = ref_side, be, config, rng
        self.candidate, self.anon_exec, self.shares_inputs = candidate, anon_exec, shares_inputs
        self._take_report = take_report
        self.check_exec_watch = check_exec_watch  # the run's exec watch, read at each round's pause (`_Run.check_exec_watch`)
        self.timing_violation: str | None = None  # what a round reported that cannot be (too many ms, ...)
        self.timed_mismatch: dict | None = None  # a timed call whose output was wrong
        self.round_facts: list[dict] = []  # per round on the parent's clock: wall, CPU, wait, segments
        self.checked_calls = 0
        self.allocator_counts: dict | None = None
        self.idle_from: Any = None  # the sandbox's CPU when its previous round ended (`_timed_rounds` sets it)
        self.round_reference: LiveJob | None = None  # the reference worker of the window (`_timed_rounds` sets it)
        self._read_buffers: Any = None  # buffers the frozen reads reuse round after round (`frozen_read.ReadBuffers`)
        self._reference_buffers: Any = None

    def timed_round(self, rdir: Path, ref_mark: dict, count: int, r: int, sample: list[int],
                    seeds: list[int] | None = None) -> list[float] | None:
        """This candidate's timed round on the round's input sets (drawn by the harness from `seeds`, sent
        with the command, for a task with a recipe; else the files in `rdir`), then a check of every
        call's outputs (`sample` lists them all) against the reference's, read through the round
        directory's held descriptor; None (with `timing_violation` or the report set) when it fails."""
        d = self.files.subdir(f"r{r}")
        seeded = self.ref_side.reference.get("recipe") is not None and seeds is not None
        for k in range(0 if seeded else count):
            self.files.hand_over(rdir, d, f"s{k}_in", move=not self.shares_inputs)
        # outputs are copied after their inputs were overwritten (a view of the input shows), unless the
        # reference's own outputs alias its inputs (an in-place task), where that is the right answer
        aliasing = any(o.get("aliases_input") for t in self.ref_side.reference.get("trials", []) for o in t.get("outputs", []))
        if not self._woken():
            return None
        pre = self.sandbox_cpu()  # the sandbox's CPU so far, and its run-queue wait: read before the clock starts
        wall0 = time.monotonic()
        self.job.send({"cmd": "round", "dir": d.name, "count": count, "detach_inputs": not aliasing,
                       **({"seeds": seeds} if seeded else {})})
        cmark = self.job.expect({"timing_end", "report"}, max(1.0, self.config.run_timeout_s))
        wall1 = time.monotonic()
        wall_ms = (wall1 - wall0) * 1000.0
        post = self.sandbox_cpu()
        if cmark is None or cmark.get("phase") == "report":
            self._take_report(cmark)
            return None
        times = [float(t) for t in cmark.get("times_ms") or [] if isinstance(t, (int, float))]
        calls = cmark.get("kernel_calls")  # per timed call (verifier/correctness/decoy.py: custom-kernel-skipped)
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
            self.round_facts[-1]["inner"] = cmark.get("inner_ms")
        else:  # device memory cannot be read from /proc: blocks drawn after the round, saved by both sides
            checked = self.check_blocks(d, rdir, ref_mark, count, r)
            self.record_round(wall_ms, pre, post)
            self.round_facts[-1].update(inner=cmark.get("inner_ms"), allocator=self.allocator_counts)
        self.round_facts[-1]["segments"] = window_segments(wall0, cmark.get("stamps"), mark_read_at(self.job, cmark), wall1)
        loop = cmark.get("loop_detail")
        self.round_facts[-1]["loop_detail"] = loop if isinstance(loop, dict) else None
        if checked and own_stub_enabled(self.be.device, self.config):
            own = self.own_stub(d, count, not aliasing, seeds if seeded else None)
            if own is None:
                drop_held(d)
                return None
            self.round_facts[-1].update(own)
        drop_held(d)
        return times if checked else None

    def own_stub(self, d: HeldDir, count: int, detach_inputs: bool, seeds: list[int] | None) -> dict | None:
        """The overhead of a round in the candidate's own process: its harness runs the round loop again on
        the same sets (`seeds`, or the files still in `d`) with a model whose calls return the outputs it
        just returned, clocked by the parent from the command to `timing_end` exactly as its round was.
        Run after the round's outputs were read and checked, so the sets are spent: nothing done in this
        window can work ahead. {"own_stub_ms": wall ms, "own_stub_lost": share lost waiting for a CPU}, or
        None (with the report taken) when the harness failed in it: the round fails as a failed round does."""
        if not self._woken():
            return None
        pre = self.sandbox_cpu()
        wall0 = time.monotonic()
        self.job.send({"cmd": "stub_round", "dir": d.name, "count": count, "detach_inputs": detach_inputs,
                       **({"seeds": seeds} if seeds is not None else {})})
        mark = self.job.expect({"timing_end", "report"}, max(1.0, self.config.run_timeout_s))
        wall1 = time.monotonic()
        wall_ms = (wall1 - wall0) * 1000.0
        post = self.sandbox_cpu()
        if mark is None or mark.get("phase") == "report":
            self._take_report(mark)
            return None
        wait = None if pre is None or post is None else (
            post.wait_ns - pre.wait_ns + post.parent_wait_ns - pre.parent_wait_ns) / 1e6
        from verifier.clock.stats import lost_share

        return {"own_stub_ms": wall_ms, "own_stub_lost": lost_share(wall_ms, wait),
                "own_stub_segments": window_segments(wall0, mark.get("stamps"), mark_read_at(self.job, mark), wall1),
                "own_stub_loop": mark.get("loop_detail") if isinstance(mark.get("loop_detail"), dict) else None}

    def _woken(self) -> bool:
        """The `wake` handshake before a clocked window, where it is on (`paired_calls.wake_enabled`); False
        (with the harness's report taken) when the harness did not answer it."""
        from verifier.clock.paired_calls import wake_enabled

        if not wake_enabled(self.be.device, self.config):
            return True
        woke = wake_worker(self.job, max(1.0, self.config.run_timeout_s))
        if woke is None or woke.get("phase") != "awake":
            self._take_report(woke)
            return False
        return True

    def check_blocks(self, d: HeldDir, rdir: Path, ref_mark: dict, count: int, r: int) -> bool:
        """The GPU's check of a timed round: for every call and output, blocks chosen here after the round
        ended (random offsets, and the tail), saved by the harness and by the trusted reference worker
        (which kept its outputs on the device) and compared. Device memory cannot be read from /proc,
        so the save still runs after the clock; the device-resident comparison of issue 22 is to close that."""
        ref = self.round_reference  # the reference worker of the round (compare: one for both)
        blocks = choose_blocks(self.rng, [[int(math.prod(m.get("shape") or [1])) for m in outs]
                                          for outs in ref_mark["outputs"][:count]])
        tag = "b" + secrets.token_hex(4)
        self.job.send({"cmd": "save", "dir": d.name, "blocks": blocks, "tag": tag,
                       "keep": own_stub_enabled(self.be.device, self.config)})  # the own stub's ready outputs
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
        check_held(d, rdir, self.trusted_dir)
        self.allocator_counts = smark.get("allocator") if isinstance(smark.get("allocator"), dict) else None
        outputs = smark.get("outputs")
        saved: dict = outputs if isinstance(outputs, dict) else {}
        for k in range(count):
            want = rmark["outputs"].get(str(k)) or []
            verdict = compare_files(d, rdir, saved.get(str(k)), want, self.config.atol, self.config.rtol, self.config,
                                    label=f"timed call {k + 1} of round {r + 1} (blocks)")
            if verdict.get("fail"):
                self.timed_mismatch = verdict
                self.timed_mismatch["fail"] = f"{verdict['fail']} — {FRESH_OUTPUTS}"
                return False
            self.checked_calls += 1
        return True

    def check_frozen(self, cmark: dict, rdir: Path, ref_mark: dict, count: int, r: int) -> bool:
        """Every output of the round just clocked, read from the candidate's paused process at the addresses
        its `timing_end` gave (`verifier/clock/frozen_read.py`) and compared with the reference's for the same
        inputs; False (with `timed_mismatch` set) on the first that is wrong or cannot be read."""
        from verifier.clock.frozen_read import (
            FrozenReadError,
            ReadBuffers,
            paused,
            process_memory,
            read_output,
        )
        label = f"round {r + 1}"
        at = cmark.get("outputs_at")
        pid = self.harness_pid
        try:
            wants = self.reference_outputs(rdir, ref_mark, count)
        except (FrozenReadError, ValueError, OSError, KeyError, TypeError):
            self.candidate["ref_timing_failed"] = True  # the trusted side's fault, not the candidate's
            return False
        try:
            if not isinstance(at, list) or len(at) != count or pid is None:
                raise ValueError("the round's outputs were not reported where the verifier reads them")
            if self._read_buffers is None:  # kept for the next round
                self._read_buffers = ReadBuffers()
            buffers = self._read_buffers
            got: list[list] = []
            root = getattr(self.job, "proc", None)
            pids = sandbox_pids(pid, root.pid if root is not None else None)
            with paused(pids), process_memory(pid) as mem:
                # while it is stopped, code made at run time and dropped before the last audit is seen too
                from verifier.policy.mapped_audit import anonymous_exec_in

                self.anon_exec.update(anonymous_exec_in(pids))
                self.check_exec_watch()  # code made and dropped within this round's forwards: hidden-exec
                for k in range(count):
                    claims = at[k] if isinstance(at[k], list) else []
                    if len(claims) != len(wants[k]):
                        raise ValueError(f"timed call {k + 1} of {label}: forward returned {len(claims)} outputs, "
                                         f"expected {len(wants[k])}")
                    got.append([read_output(mem, c if isinstance(c, dict) else {}, 8 * w.nbytes + 65536, buffers, (k, j))
                                for j, (c, w) in enumerate(zip(claims, wants[k], strict=True))])
        except (FrozenReadError, ValueError, OSError, KeyError, TypeError) as exc:
            self.timed_mismatch = {"fail": f"{label}: {exc}"}
            return False
        for k in range(count):
            for j, (g, w) in enumerate(zip(got[k], wants[k], strict=True)):
                ro = ref_mark["outputs"][k][j]
                spread = output_spread(w) if self.config.degenerate else None
                cmp = compare_tensor(g, w, str(at[k][j].get("dtype")), ro["dtype"], self.config.atol, self.config.rtol,
                                     f"output {j}", spread=spread)
                if not cmp.ok:
                    self.timed_mismatch = {
                        "fail": f"timed call {k + 1} of {label}: {cmp.reason} — {FRESH_OUTPUTS}",
                        "mismatch": cmp.mismatch, "max_abs": cmp.max_abs, "max_rel": cmp.max_rel}
                    return False
            self.checked_calls += 1
        return True

    def reference_outputs(self, rdir: Path, ref_mark: dict, count: int) -> list[list]:
        """The trusted reference's outputs of the round's calls: read from its worker's memory where its
        `round_done` says where they are (the CPU: the worker waits for its next command meanwhile, and
        keeps them until then), else its files mapped read-only."""
        from verifier.clock.frozen_read import ReadBuffers, process_memory, read_output
        from verifier.gates.evidence import _map

        at, pid = ref_mark.get("outputs_at"), ref_mark.get("pid")
        if isinstance(at, list) and len(at) >= count and isinstance(pid, int):
            if self._reference_buffers is None:  # kept for the next round
                self._reference_buffers = ReadBuffers()
            buffers = self._reference_buffers
            with process_memory(pid) as mem:
                return [[read_output(mem, c, int(c["nbytes"]), buffers, (k, j)) for j, c in enumerate(at[k])]
                        for k in range(count)]
        return [[_map(rdir, f"s{k}_out{j}.npy", self.config) for j in range(len(ref_mark["outputs"][k]))]
                for k in range(count)]

    def sandbox_cpu(self):
        """CPU time of every process in the candidate's sandbox and the harness's run-queue wait."""
        from verifier.clock.cpu_accounting import sample

        reader = getattr(self.job, "_reader", None)
        return sample(self.job.proc.pid, self.harness_pid,
                      (threading.get_native_id(), getattr(reader, "native_id", None)))

    def record_round(self, wall_ms: float, pre, post) -> None:
        """One timed round on the parent's clock: its wall time, the sandbox's CPU and the harness's wait
        over it, and the CPU the sandbox used since its previous round ended (it should have been idle)."""
        idle_from = self.idle_from
        facts = {"wall_ms": wall_ms, "cpu_ms": None, "wait_ms": None, "idle_cpu_ms": 0.0}
        if pre is not None and post is not None:
            facts.update(cpu_ms=(post.cpu_ns - pre.cpu_ns) / 1e6,
                         wait_ms=(post.wait_ns - pre.wait_ns + post.parent_wait_ns - pre.parent_wait_ns) / 1e6)
        if pre is not None and idle_from is not None:
            facts["idle_cpu_ms"] = max(0.0, (pre.cpu_ns - idle_from.cpu_ns) / 1e6)
        self.round_facts.append(facts)


def sandbox_pids(harness_pid: int, sandbox_root: int | None) -> list[int]:
    """What the pause stops: the harness first, every other process of its PID namespace, and every
    descendant of the sandbox's outermost process (bubblewrap) whatever namespace it is in: a helper in a
    nested PID namespace was missed by the namespace alone (issue 37; none can be made now, but the pause
    does not depend on that)."""
    from verifier.policy.mapped_audit import namespace_pids
    from verifier.sandbox.procs import descendants

    out = namespace_pids(harness_pid) or [harness_pid]
    seen = set(out)
    if sandbox_root is not None:
        for pid in descendants(sandbox_root):
            if pid not in seen:
                seen.add(pid)
                out.append(pid)
    return out
