"""The paired timing window: interleaved rounds of the trusted reference and one or more candidate
sides on the same fresh inputs (`_timed_rounds`), the reference's rounds clocked by the parent, the
blocks of a GPU output chosen after a round for checking, and what the latency detail records of the
attested clock. The per-candidate half of a round is `verifier.run.timed_calls`.
"""

from __future__ import annotations

import random
import shutil
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from verifier.config import VerifyConfig

WARMUP_ROUNDS = 2  # full-size rounds after the calibration round that are run and checked but not counted
ROUND_TARGET_MS = 15.0  # a GPU round's calls (VerifyConfig.round_target_ms unset)
CPU_ROUND_TARGET_MS = 5.0  # a CPU round's calls: each also moves its input set, so fewer calls a round
MAX_CALLS_PER_ROUND = 64  # a round's calls at most (VerifyConfig.max_calls_per_round / $EVOKERNEL_MAX_CALLS unset)
FILE_SET_BYTES = 16 << 20  # a CPU round's input sets up to this size per call travel as files


def sets_by_file(device: str, set_bytes: int, config: VerifyConfig) -> bool:
    """Whether a timed round's input sets reach both sides as files the trusted reference wrote (read and
    copied inside the clock) rather than drawn from seeds inside it. On the CPU drawing dominated the
    clocked window of a cheap op (randn of 512x1024: 2.3 ms, the relu it feeds: 0.09 ms), so the
    figure was mostly the trusted overhead subtracted out again, and noisy; a file costs a copy. Sets
    up to a quarter of the job tmpfs go by file too (`_job_share`); bigger ones (issue 22's gigabyte
    inputs) and the GPU keep the seeded draw: nothing that size goes to a file there. The candidate still cannot work ahead: the files are handed over just before the
    command, and CPU its sandbox uses while idle counts against its figure."""
    mode = str(config.timing_sets)
    if mode in ("files", "seeds"):
        return mode == "files"
    return device == "cpu" and 0 < set_bytes <= max(FILE_SET_BYTES, _job_share(config))


def _job_share(config: VerifyConfig) -> int:
    """The largest CPU set (inputs and outputs) that still goes by file: a quarter of the job directory's own
    tmpfs (`sandbox.job_mount.job_bytes`, where the files live and what caps them). Session 24, 2-core box,
    the 256 MB ReLU (512 MB a set, 3 GiB job tmpfs): by file, a window's trusted overhead 104-111 ms against
    369-439 ms drawing it in the window from seeds, the latency phase 20 s against 30 s, the whole verdict
    37-39 s against 49-55 s (`benchmarks/results/big_cpu_sets_2026-11-29_session24.md`). Gigabyte sets at the
    default limits still draw from seeds."""
    from verifier.sandbox.job_mount import job_bytes

    return job_bytes(config.memory_gb, config.job_dir_mb) // 4


def resolvable_share(device: str, config: VerifyConfig) -> float:
    """The least share of a round's wall time its calls must leave over the overhead (`stats.unresolved`):
    `PADDED_UNRESOLVED_SHARE` for a padded async GPU loop (its overhead is a spin that repeats closely),
    else `UNRESOLVED_SHARE`."""
    from verifier.clock.paired_calls import gpu_loop_of, gpu_pad_cycles_of
    from verifier.clock.stats import PADDED_UNRESOLVED_SHARE, UNRESOLVED_SHARE

    padded = device == "cuda" and gpu_loop_of(config) == "async" and gpu_pad_cycles_of(config) > 0
    return PADDED_UNRESOLVED_SHARE if padded else UNRESOLVED_SHARE


def max_calls_of(config: VerifyConfig) -> int:
    """The most calls a timed round makes: `VerifyConfig.max_calls_per_round`, else `EVOKERNEL_MAX_CALLS`, else
    `MAX_CALLS_PER_ROUND`. A round of µs kernels whose calls are a small share of its wall (a padded GPU loop:
    1-2%) resolves the calls against the handoffs' jitter (0.1-0.3 ms a window) only with more of them."""
    import os

    raw = config.max_calls_per_round if config.max_calls_per_round is not None else os.environ.get("EVOKERNEL_MAX_CALLS")
    try:
        calls = int(raw) if raw else 0
    except ValueError:
        calls = 0
    return calls if calls > 0 else MAX_CALLS_PER_ROUND


def _timed_rounds(owner, sides: list, estimate):
    """(`owner` is a `verifier.run.verification._Run`, whose reference worker serves the window; `sides` are
    the candidates' timing sides, `verifier.run.timed_calls.TimedCalls`, one per candidate timed.)
    Interleaved rounds in one window: the trusted reference draws `count` fresh input sets and times
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
    from verifier.clock import cpu_accounting as acct
    from verifier.clock.stats import (
        attested_round_ms,
        host_bound,
        lost_share,
        out_of_reach,
        own_overhead_ratio,
        select_rounds,
        unresolved,
    )

    assert owner.ref_side.held is not None and owner.trusted_dir is not None
    ref = owner.ref_side.held[0]
    for side in sides:
        side.round_reference = ref
    config = owner.config
    budget_end = time.monotonic() + config.timing_budget_s
    share = resolvable_share(owner.be.device, config)
    per_set = max(1, int(owner.ref_side.reference.get("input_bytes", 0)) + int(owner.ref_side.reference.get("output_bytes", 0)))
    memory_cap = max(1, int(config.timing_memory_mb * 1024**2 // (3 * per_set)))
    if owner.be.device == "cuda" and owner.ref_side.reference.get("device_free_bytes"):
        # on the GPU a round's sets and kept outputs live on the card and only blocks reach files: a
        # fifth of its free memory, shared by both sides, so calls of a few µs still fill a round
        memory_cap = max(1, int(0.2 * int(owner.ref_side.reference["device_free_bytes"]) // (4 * per_set)))
    cpus = acct.worker_cpus()
    aliasing = any(o.get("aliases_input") for t in owner.ref_side.reference.get("trials", []) for o in t.get("outputs", []))
    by_file = sets_by_file(owner.be.device, per_set, owner.config)
    warmup_rounds = WARMUP_ROUNDS if config.warmup_rounds is None else int(config.warmup_rounds)
    from verifier.clock.paired_calls import wake_enabled

    waking = wake_enabled(owner.be.device, config)  # every clocked window opens on a running worker
    means: list[list[float]] = [[] for _ in range(len(sides) + 1)]
    lost: list[list[float]] = [[] for _ in range(len(sides) + 2)]  # reference, stub, then each side
    clock: dict = {"overhead_ms": [], "walls_ms": [], "idle_cpu_ms": [[] for _ in sides],
                   "reported_ms": [[] for _ in sides], "psi_share": [], "repinned": 0,
                   "input_sets": "files" if by_file else "seeds", "warmup_rounds": warmup_rounds,
                   "own_overhead_ms": [[] for _ in sides], "ratio": [1.0 for _ in sides]}
    side_rounds: list[list[dict]] = [[] for _ in sides]  # each side's measured rounds: wall, idle, wait
    ref_resolved: list[bool] = []
    count, r, est = 1, 0, None
    tell = getattr(owner, "progress", None) or (lambda *a, **k: None)
    while True:
        if r == 0:
            tell("latency", "calibrate", "calibration round")
        elif r <= warmup_rounds:
            tell("latency", "warmup", f"warm-up round {r}/{warmup_rounds}", done=r, total=warmup_rounds)
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
                         "save": [] if owner.be.device == "cuda" else sample,
                         "in_memory": owner.be.device == "cpu"}):
            owner.candidate["ref_timing_failed"] = True
            return None
        mark = ref.expect({"round_done", "error"}, config.run_timeout_s)
        if mark is None or mark.get("phase") != "round_done":
            owner.candidate["ref_timing_failed"] = True
            return None
        ref_times = [float(t) for t in mark["times_ms"]]
        # Wall time its CPU time does not cover counts as lost on the CPU only: on a GPU the worker sleeps in
        # the driver while the card works (a 3 ms ReLU over 6.4 GB read as "100% lost", every round
        # dropped as disturbed on an idle H200); its run-queue wait still counts there.
        ref_lost = lost_share(float(mark.get("timing_wall_ms") or 0.0), mark.get("timing_wait_ms"),
                              mark.get("timing_cpu_ms") if owner.be.device == "cpu" else None)
        # the reference's own figure and the trusted overhead, each clocked as a candidate's round is
        worker = next(iter(acct.tree(ref.proc.pid)[1:]), None)
        parent = (threading.get_native_id(), getattr(getattr(ref, "_reader", None), "native_id", None))

        clocked_seeds = None if by_file else seeds  # what the candidate's harness gets, so the stub is like for like
        replay, stub = (_clocked_reference(ref, kind, rdir, count, not aliasing, worker, parent, config.run_timeout_s,
                                           clocked_seeds, waking) for kind in ("replay", "stub_round"))
        if replay is None or stub is None:
            owner.candidate["ref_timing_failed"] = True
            return None
        (replay_ms, replay_lost, replay_inner, replay_loop), (stub_ms, stub_lost, stub_inner, stub_loop) = replay, stub
        ref_figure = attested_round_ms(replay_ms, stub_ms, count)
        # a padded GPU round whose queue ran dry read the host, not the card: left out like a disturbed one
        host_bound_now = host_bound(replay_loop) or host_bound(stub_loop)
        ref_ok = not unresolved(replay_ms, stub_ms, share) and not host_bound_now
        ref_lost = max(ref_lost, replay_lost if ref_ok else 1.0)
        figures, rounds_now = [], []
        for i, side in enumerate(sides):
            times = side.timed_round(rdir, mark, count, r, sample, clocked_seeds)
            if times is None:
                return None
            facts = side.round_facts[-1]
            idle_ms = facts["idle_cpu_ms"]
            # before any round is measured, this round's own stub alone bounds the overhead (calibration)
            own_ms = facts.get("own_stub_ms")
            figures.append(attested_round_ms(facts["wall_ms"], min(stub_ms, own_ms or stub_ms), count, idle_ms))
            rounds_now.append({"wall": facts["wall_ms"], "idle": idle_ms, "wait": facts["wait_ms"], "own": own_ms})
            # where the candidate's window went by its own account (GPU diagnostics): [draw, loop] ms and the
            # allocator's running counts of driver allocations and retries
            clock.setdefault("candidate_inner_ms", [[] for _ in sides])[i].append(facts.get("inner"))
            clock.setdefault("candidate_walls_ms", [[] for _ in sides])[i].append(facts["wall_ms"])
            clock.setdefault("candidate_segments_ms", [[] for _ in sides])[i].append(
                {"round": facts.get("segments") or [], "own_stub": facts.get("own_stub_segments") or [],
                 "loop": facts.get("loop_detail"), "own_loop": facts.get("own_stub_loop"),
                 "device_alloc": (facts.get("allocator") or {}).get("device_alloc")})
            clock.setdefault("candidate_allocator", [None for _ in sides])[i] = facts.get("allocator")
            if r:
                clock["idle_cpu_ms"][i].append(idle_ms)
                clock["reported_ms"][i].append(sum(times) / len(times))
            # the sandbox's own stub round (after the round) is its harness's work, not idle CPU
            side.idle_from = side.sandbox_cpu()
        shutil.rmtree(rdir, ignore_errors=True)
        psi1 = acct.cpu_pressure_us()
        r += 1
        if r == 1:
            per_call = max(1e-4, min([ref_times[0], *figures]))
            target_ms = config.round_target_ms or (CPU_ROUND_TARGET_MS if owner.be.device == "cpu" else ROUND_TARGET_MS)
            count = int(max(1, min(max_calls_of(config), memory_cap, target_ms / per_call)))
            continue
        if r <= 1 + warmup_rounds:
            # a fresh sandbox's first full-size rounds ran up to 2x slow (its heap and buffers growing to
            # the round's size) while the pooled reference was warm: measured, they only widened the interval
            continue
        means[0].append(ref_figure)
        clock["host_bound_rounds"] = clock.get("host_bound_rounds", 0) + int(host_bound_now)
        clock.setdefault("reference_reported_ms", []).append(sum(ref_times) / len(ref_times))
        clock["overhead_ms"].append(stub_ms)
        # where the trusted side's clocked windows went (diagnostics: the parent's wall of the replay, and
        # the worker's own split of each window into drawing the sets and the timed loop)
        clock.setdefault("replay_walls_ms", []).append(replay_ms)
        clock.setdefault("reference_inner_ms", []).append({"replay": replay_inner, "stub": stub_inner})
        clock.setdefault("reference_loops", []).append({"replay": replay_loop, "stub": stub_loop})
        ref_resolved.append(ref_ok)
        lost[0].append(ref_lost)
        lost[1].append(stub_lost)
        resolved = list(ref_resolved)
        for i, now in enumerate(rounds_now):
            # every measured round's figure again: the share of the trusted stub subtracted is the median
            # over the rounds so far of the side's own stub over the trusted one (`own_overhead_ratio`)
            side_rounds[i].append(now)
            clock["own_overhead_ms"][i].append(now["own"])
            ratio = own_overhead_ratio(clock["overhead_ms"], clock["own_overhead_ms"][i])
            clock["ratio"][i] = ratio
            subtracted = [ratio * t for t in clock["overhead_ms"]]
            means[i + 1] = [attested_round_ms(m["wall"], o, count, m["idle"]) for m, o in zip(side_rounds[i], subtracted,
                                                                                             strict=True)]
            off = [unresolved(m["wall"], o, share) for m, o in zip(side_rounds[i], subtracted, strict=True)]
            lost[i + 2] = [1.0 if u else lost_share(m["wall"], m["wait"]) for m, u in zip(side_rounds[i], off, strict=True)]
            resolved = [a and not u for a, u in zip(resolved, off, strict=True)]
        clock["resolved"] = [k for k, ok in enumerate(resolved) if ok]
        round_ms = (time.monotonic() - round0) * 1000.0
        clock["walls_ms"].append(round_ms)
        if psi0 is not None and psi1 is not None:
            clock["psi_share"].append(min(1.0, (psi1 - psi0) / 1000.0 / max(1e-6, round_ms)))
        keep = select_rounds(lost)
        measured, spent = len(means[0]), time.monotonic() >= budget_end
        # at least `min_rounds` measured rounds whatever the budget says (as before the attested clock)
        if measured >= config.min_rounds and (len(keep) >= config.min_rounds or spent or measured >= config.max_rounds):
            est = estimate(means, keep)
            _tell_round(tell, measured, len(keep), config.max_rounds, est)
            if not est.noisy or spent or measured >= config.max_rounds:
                break
            walls = clock["walls_ms"]
            if out_of_reach(float(getattr(est, "halfwidth", 0.0)), int(getattr(est, "rounds", 0)),
                            sum(walls) / len(walls) / 1000.0, budget_end - time.monotonic(), config.noise_halfwidth):
                clock["out_of_reach"] = True  # as noisy at the budget's end: said now
                break
        else:
            _tell_round(tell, measured, len(keep), config.max_rounds, None)
    clock["lost"] = lost
    clock["keep"] = keep
    return est, means, count, sum(getattr(s, "checked_calls", 0) for s in sides), clock


def _tell_round(tell, measured: int, kept: int, max_rounds: int, est) -> None:
    """`timing round 4 (3 kept)`, with the estimate so far once there is one (`1.07x [0.98, 1.16]`): the
    window can run for a minute, and how wide the interval still is says why it goes on."""
    text = f"timing round {measured} ({kept} kept)"
    figures = {}
    if est is not None and all(isinstance(getattr(est, k, None), (int, float)) for k in ("speedup", "lo", "hi")):
        figures = {"speedup": float(est.speedup), "lo": float(est.lo), "hi": float(est.hi)}
        text += f", {est.speedup:.2f}x [{est.lo:.2f}, {est.hi:.2f}] so far"
    tell("latency", "round", text, done=measured, total=max_rounds, kept=kept, **figures)


OWN_CHEAPER = 0.9  # the candidate's own loop ran under this share of the trusted stub's cost: noted in the detail


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
                       parent: tuple, timeout_s: float, seeds: list[int] | None,
                       wake: bool = False) -> tuple[float, float, list, dict | None] | None:
    """One command of the reference worker (`replay`: its real model, `stub_round`: the overhead) on the
    round's input sets (drawn from `seeds` for a task with a recipe, as the harness does, else read from
    the round's files), clocked by the parent from sending it to `timing_end`, as a candidate's round is;
    (wall ms, the share of it lost waiting for a CPU, the worker's own [sets ms, loop ms] split followed by
    `window_segments`, its GPU loop's own detail), or None when the worker failed."""
    from verifier.clock import cpu_accounting as acct
    from verifier.clock.stats import lost_share

    if wake and (wake_worker(ref, timeout_s) or {}).get("phase") != "awake":
        return None
    wait0 = (acct.thread_wait_ns(worker) if worker else 0.0) + acct.parent_wait_ns(parent)
    t0 = time.monotonic()
    ok = ref.send({"cmd": kind, "dir": str(rdir), "count": count, "detach_inputs": detach_inputs, "seeds": seeds})
    done = ref.expect({"timing_end", "error"}, timeout_s) if ok else None
    t1 = time.monotonic()
    wall = (t1 - t0) * 1000.0
    if done is None or done.get("phase") != "timing_end":
        return None
    wait1 = (acct.thread_wait_ns(worker) if worker else 0.0) + acct.parent_wait_ns(parent)
    inner = done.get("inner_ms")
    split = [float(x) for x in inner[:2]] if isinstance(inner, list) and all(isinstance(x, (int, float)) for x in inner[:2]) else []
    split += window_segments(t0, done.get("stamps"), mark_read_at(ref, done), t1)
    loop = done.get("loop_detail")
    return wall, lost_share(wall, (wait1 - wait0) / 1e6), split, loop if isinstance(loop, dict) else None


def wake_worker(job, timeout_s: float) -> dict | None:
    """The `wake` handshake before a clocked window (`verifier.clock.paired_calls.wake`), outside the clock:
    the worker's answer (`awake`, or its `error`/`report` for the caller to take), None when it gave none."""
    if not job.send({"cmd": "wake"}):
        return None
    return job.expect({"awake", "error", "report"}, timeout_s)


#: the parts of a clocked window `window_segments` gives, in order (the latency detail's `*_segments` legend)
WINDOW_SEGMENTS = ("to worker", "before sets", "sets", "loop", "after loop", "to reader", "to parent")


def mark_read_at(job, mark: dict) -> float | None:
    """When the parent's reader thread took `mark` off the worker's pipe (`LiveJob.marks`), or None."""
    for at, seen in reversed(getattr(job, "marks", None) or []):
        if seen is mark:
            return float(at)
    return None


def window_segments(sent: float, stamps, read: float | None, got: float) -> list[float]:
    """Where one clocked window went, in ms, from the worker's own monotonic stamps ([command received,
    sets started, loop started, loop ended, mark written]; the same system clock as the parent's) and the
    parent's (`sent`, the reader's `read`, `got`): the parts named by `WINDOW_SEGMENTS`. Diagnostics only:
    the stamps are the worker's claim (the candidate's can be anything) and decide no figure. Empty when
    the stamps are missing or malformed."""
    if not isinstance(stamps, list) or len(stamps) != 5 or not all(isinstance(x, (int, float)) for x in stamps):
        return []
    points = [sent, *map(float, stamps), read if read is not None else got, got]
    return [round((b - a) * 1e3, 4) for a, b in zip(points, points[1:], strict=False)]


def _clock_detail(clock: dict, means: list[list[float]], count: int, side: int = 0) -> dict:
    """What the latency detail records of the attested clock for side `side` (0: the first candidate)."""
    from verifier.clock.stats import DISTURBED_SHARE, REPORTED_DISAGREES, busy_reason

    n = len(means[0])
    cand = means[side + 1]
    own_ratio = float((clock.get("ratio") or [1.0] * (side + 1))[side])
    overhead = [own_ratio * o for o in clock["overhead_ms"]]  # what was subtracted from this side's rounds
    own = [o for o in (clock.get("own_overhead_ms") or [[]] * (side + 1))[side] if o is not None]
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
        # the trusted stub (reference worker) and the candidate's own stub round (its harness, its process);
        # the share of the trusted one subtracted (`verifier.clock.stats.own_overhead_ratio`)
        "trusted_overhead_ms": _median(clock["overhead_ms"]),
        "stub_walls_ms": [round(x, 4) for x in clock["overhead_ms"][:60]],
        "replay_walls_ms": [round(x, 4) for x in (clock.get("replay_walls_ms") or [])[:60]],
        "reference_inner_ms": (clock.get("reference_inner_ms") or [])[:20],
        "reference_loops": (clock.get("reference_loops") or [])[:8],  # the GPU loops' own detail (diagnostics)
        # every round of the candidate from the calibration on: the parent's wall and the harness's own split
        "candidate_walls_ms": [round(x, 4) for x in (clock.get("candidate_walls_ms") or [[]] * (side + 1))[side][:20]],
        "candidate_inner_ms": (clock.get("candidate_inner_ms") or [[]] * (side + 1))[side][:20],
        "candidate_allocator": (clock.get("candidate_allocator") or [None] * (side + 1))[side],
        # where each clocked window went, by `WINDOW_SEGMENTS` (the workers' own stamps: diagnostics only);
        # the reference's are the last entries of `reference_inner_ms` after its [sets, loop]
        "window_segments": list(WINDOW_SEGMENTS),
        "candidate_segments_ms": (clock.get("candidate_segments_ms") or [[]] * (side + 1))[side][:20],
        "own_overhead_ms": _median(own),
        "own_overhead_ratio": own_ratio,
        "own_overhead_cheaper": bool(own) and own_ratio < OWN_CHEAPER,
        "reported_times_ms": reported[:200],
        "reported_vs_attested": ratio,
        "idle_cpu_ms": idle[:200],
        "idle_cpu_total_ms": sum(idle),
        "lost_share": worst[:200],
        "lost_by_side": {"reference": _median(lost[0]), "overhead": _median(lost[1]),
                         "candidate": _median(lost[side + 2])},
        "disturbed_rounds": sum(1 for w in worst if w > DISTURBED_SHARE),
        "kept_rounds": len(clock["keep"]),
        # measured rounds whose padded GPU queue ran dry on the trusted side (`stats.host_bound`): left out
        "host_bound_rounds": int(clock.get("host_bound_rounds", 0)),
        "psi_share": _median(clock["psi_share"]),
        "affinity_repinned": clock["repinned"],
        "out_of_reach": bool(clock.get("out_of_reach")),  # stopped before the budget: no claim was in reach
    }
    out["reported_disagrees"] = bool(ratio is not None and ratio < REPORTED_DISAGREES
                                     and (_median(cand) or 0.0) > 0.05)
    from verifier.clock.stats import IDLE_ALLOWANCE_MS

    out["idle_cpu_counted"] = sum(1 for x in idle if x > IDLE_ALLOWANCE_MS) * 2 > max(1, len(idle)) or (
        sum(idle) > 0.05 * sum(round_ms) and sum(idle) > IDLE_ALLOWANCE_MS * max(1, len(idle)))
    out["busy"] = busy_reason(lost, clock["walls_ms"])
    return out


def _median(times: list[float] | None) -> float | None:
    if not times:
        return None
    from verifier.correctness.compare import median_and_spread

    return median_and_spread(times)[0]
