"""The candidate's side of a verification: runs inside the sandbox, never in the app's process.

`python -m verifier.workers.harness JOBDIR [--wait]` imports torch, (with `--wait`: sits warm until the parent
says go), reads `JOBDIR/job.json`, builds and imports the candidate, constructs `ModelNew` and then
serves the parent's commands: a correctness trial, a profiled call, a timed round, saving every timed
call's outputs, finish. For a task with an input recipe (`verifier.correctness.input_recipe`, sent with `construct`)
each command carries the seeds of its inputs, revealed only then, and the harness draws them on its
device (`runner.draw_sets`); otherwise inputs arrive as files written by the trusted side only when a
command needs them;
the candidate's process never holds the task's `Model`, its seeds or the reference's outputs. The
harness computes no verdict: the parent compares the files it writes.
Clock and torch references are taken before the candidate is imported.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
import types
from pathlib import Path

_perf_ns = time.perf_counter_ns
_monotonic = time.monotonic

IGNORED_OPS = {
    "aten::empty", "aten::empty_like", "aten::empty_strided", "aten::zeros", "aten::zero_", "aten::fill_",
    "aten::resize_", "aten::as_strided", "aten::view", "aten::reshape", "aten::_reshape_alias", "aten::t",
    "aten::transpose", "aten::permute", "aten::contiguous", "aten::detach", "aten::detach_", "aten::lift_fresh",
    "aten::expand", "aten::unsqueeze", "aten::squeeze", "aten::select", "aten::slice", "aten::alias",
    "aten::result_type", "aten::to", "aten::_to_copy", "aten::item", "aten::_local_scalar_dense",
    "aten::is_nonzero", "aten::size", "aten::stride", "aten::numel", "aten::dim", "aten::ones", "aten::full",
    "aten::new_empty", "aten::new_empty_strided", "aten::set_", "aten::clone", "aten::copy_", "aten::flatten",
    "aten::unflatten", "aten::split", "aten::chunk", "aten::narrow", "aten::unbind", "aten::record_stream",
}


class Progress:
    """Phase marks for the parent (kept for the GPU clock and tools that only mark)."""

    def __init__(self, fd: int | None):
        from verifier.sandbox.channel import Channel

        self._channel = Channel(fd, None)

    def mark(self, phase: str, **extra) -> None:
        self._channel.mark(phase, **extra)


from verifier.build.inline_hook import (  # noqa: E402,F401  (sandbox-side pieces the backends install; re-exported)
    MAX_SOURCE_MARK,
    CountingModule,
    report_built_source,
    request_artefact,
)


def _snapshot(torch) -> dict[str, int]:
    """Identities of torch's and the clocks' public attributes, to detect monkey-patching."""
    snap = {f"torch.{k}": id(v) for k, v in vars(torch).items() if not k.startswith("_")}
    snap.update({f"torch.Tensor.{k}": id(v) for k, v in vars(torch.Tensor).items() if not k.startswith("_")})
    snap.update({f"torch.nn.functional.{k}": id(v) for k, v in vars(torch.nn.functional).items()
                 if not k.startswith("_")})
    snap.update({f"time.{k}": id(getattr(time, k)) for k in ("perf_counter", "perf_counter_ns", "time",
                                                              "monotonic", "monotonic_ns", "process_time")})
    snap["torch.Tensor.__eq__"] = id(torch.Tensor.__eq__)
    snap["torch.Tensor.__sub__"] = id(torch.Tensor.__sub__)
    snap["torch.Tensor.clone"] = id(torch.Tensor.clone)
    snap["torch.Tensor.copy_"] = id(torch.Tensor.copy_)
    snap["torch.Tensor.__torch_function__"] = id(vars(torch.Tensor).get("__torch_function__"))
    import verifier.clock.paired_calls as runner
    import verifier.correctness.decoy as decoy
    import verifier.correctness.input_recipe as input_recipe

    snap.update({f"runner.{k}": id(v) for k, v in vars(runner).items() if not k.startswith("__")})
    snap.update({f"input_recipe.{k}": id(v) for k, v in vars(input_recipe).items() if not k.startswith("__")})
    snap.update({f"decoy.{k}": id(v) for k, v in vars(decoy).items() if not k.startswith("__")})
    import verifier.correctness.bit_digest as bit_digest

    snap.update({f"bit_digest.{k}": id(v) for k, v in vars(bit_digest).items() if not k.startswith("__")})
    for cls in (bit_digest.KeyedDigest, bit_digest.Bits, decoy.Probe, decoy.Flow):
        snap.update({f"{cls.__name__}.{k}": id(v) for k, v in vars(cls).items() if not k.startswith("__")})
    import verifier.build.inline_hook as inline_hook

    snap.update({f"inline_hook.{k}": id(v) for k, v in vars(inline_hook).items() if not k.startswith("__")})
    snap.update({f"CountingModule.{k}": id(v) for k, v in vars(CountingModule).items()})
    snap["harness._perf_ns"] = id(_perf_ns)
    return snap


def _patched(before: dict[str, int], after: dict[str, int]) -> list[str]:
    return sorted(k for k, v in before.items() if after.get(k) != v)


def _exec_module(name: str, path: str, source: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__file__ = path
    code = compile(source, path, "exec")
    sys.modules[name] = module
    exec(code, module.__dict__)
    return module


def top_ops(prof, limit: int = 15) -> list[dict]:
    rows = []
    for evt in prof.key_averages():
        self_us = getattr(evt, "self_device_time_total", 0) or 0
        self_us = max(self_us, getattr(evt, "self_cpu_time_total", 0) or 0)
        on_device = str(getattr(evt, "device_type", "")).endswith(("CUDA", "PrivateUse1"))
        rows.append({"name": evt.key, "self_ms": self_us / 1000.0, "calls": int(evt.count), "device_kernel": on_device})
    rows.sort(key=lambda r: r["self_ms"], reverse=True)
    return rows[:limit]


def profiler(torch, device: str):
    """Kineto for GPU kernel times; on the CPU the legacy profiler, which skips kineto's ~1.5 s start-up."""
    if device == "cuda":
        from torch.profiler import ProfilerActivity, profile

        return profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    return torch.autograd.profiler.profile(use_kineto=False)


def device_ms(prof) -> float:
    """GPU time of every kernel one forward launched, on any stream (what CUDA events may not see)."""
    total_us = 0.0
    for evt in prof.key_averages():
        if str(getattr(evt, "device_type", "")).endswith("CUDA"):
            total_us += getattr(evt, "self_device_time_total", 0) or 0
    return total_us / 1000.0


# the data movement every copy-like op (clone, contiguous, .to) ends in: reported on its own, since it is
# an honest kernel's conversion but the whole work of a data-movement task (see gates._torch_outside_kernel)
COPY_WORK_OPS = {"aten::copy_"}


def work_split(prof) -> dict:
    """CPU self time inside the custom kernel versus torch compute ops around it (allocation and views
    excluded; copies apart, as `copy_ms`): torch arithmetic beside a do-nothing kernel shows up here."""
    kernel_us = torch_us = copy_us = 0.0
    torch_ops: list[tuple[str, float]] = []
    for evt in prof.key_averages():
        us = float(getattr(evt, "self_cpu_time_total", 0) or 0)
        if evt.key.startswith("kernel::"):
            kernel_us += us
        elif evt.key in COPY_WORK_OPS:
            copy_us += us
        elif evt.key.startswith("aten::") and evt.key not in IGNORED_OPS:
            torch_us += us
            torch_ops.append((evt.key, us / 1000.0))
    torch_ops.sort(key=lambda r: r[1], reverse=True)
    return {"kernel_ms": kernel_us / 1000.0, "torch_ms": torch_us / 1000.0, "torch_ops": torch_ops[:5],
            "copy_ms": copy_us / 1000.0}


def _subdir(job_dir: Path, name: str) -> Path:
    """A directory named by the parent, inside the job directory and not a link."""
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"bad directory name {name!r}")
    path = job_dir / name
    if path.is_symlink() or not path.is_dir():
        raise ValueError(f"{name} is not a directory of this job")
    return path


def _install_builder(job: dict, counter: dict, report: dict) -> None:
    """Let the backend hook the candidate's build calls (see `verifier.backends`)."""
    import importlib

    module_name, func = job["installer"].split(":")
    getattr(importlib.import_module(module_name), func)(job, counter, report)


def _construct(torch, np, init_dir: Path, weights_dir: Path, job: dict, model_cls, device: str) -> dict:
    """ModelNew(*init) under the init seed the trusted side drew; the reference's weights loaded when
    names and shapes match (so the order of parameter creation cannot matter)."""
    from verifier.clock.paired_calls import load_args

    init = load_args(torch, np, init_dir, "cpu", prefix="init")
    torch.manual_seed(int(job["init_seed"]))
    model = model_cls(*init)
    weights = "seed"
    if hasattr(model, "state_dict") and (weights_dir / "weights.json").exists():
        records = json.loads((weights_dir / "weights.json").read_text())
        mine = {k: (tuple(v.shape), str(v.dtype).replace("torch.", "")) for k, v in model.state_dict().items()}
        theirs = {k: (tuple(r["shape"]), r["dtype"]) for k, r in records.items()}
        if mine and mine == theirs:
            from verifier.clock.paired_calls import load_tensor

            state = {k: load_tensor(torch, np, weights_dir, r, "cpu") for k, r in records.items()}
            model.load_state_dict(state)
            weights = "reference state_dict"
    if hasattr(model, "to"):
        model = model.to(device)
    if hasattr(model, "eval"):
        model.eval()
    return {"model": model, "weights": weights}


def serve(job_dir: Path, channel, report: dict) -> None:
    """Build, construct, then answer commands until `finish`. Fills `report` as it goes, so a failure
    still tells the parent how far the run got."""
    import numpy as np
    import torch

    from verifier.clock.cpu_accounting import reset_rss_peak, rss_bytes
    from verifier.clock.paired_calls import (
        draw_sets,
        last_loop_detail,
        load_args,
        load_sets,
        plain_outputs,
        ready_model,
        save_args,
        save_blocks,
        save_tensor,
        sync,
        time_round,
        wake,
    )
    from verifier.correctness.decoy import counted_model, flow_forward, probe_forward, scrub_free_cuda_memory
    from verifier.correctness.input_recipe import draw

    job = json.loads((job_dir / "job.json").read_text())
    threads = max(1, int(job.get("threads") or torch.get_num_threads()))
    torch.set_num_threads(threads)
    device = job.get("device", "cpu")
    if device == "cuda":
        import torch._dynamo  # noqa: F401  (the CUDA profiler imports it, and it rebinds torch functions)
    before = _snapshot(torch)
    report.update({"mode": "candidate", "phase": "build", "torch": torch.__version__, "threads": threads})
    clock = None
    if device == "cuda":
        from verifier.clock.paired_calls import apply_gpu_round_fields

        apply_gpu_round_fields(job)  # the trusted side's flush, loop and pad, before the candidate is imported
        report["device_name"] = torch.cuda.get_device_name()
        if job.get("gpu_memory_fraction"):
            torch.cuda.set_per_process_memory_fraction(float(job["gpu_memory_fraction"]))
        from verifier.clock.gpu_timing import CudaClock
        from verifier.clock.paired_calls import flush_buffer

        # Before the candidate is imported: the probe holds the real CUDA entry points. Its room is the rounds'
        # flush buffer (one buffer, not two: the second was 1 GiB of every phase on the card; issue 33)
        clock = CudaClock(torch, room=flush_buffer(torch))
    else:
        import platform

        report["device_name"] = f"cpu ({platform.machine()}, {threads} threads)"
    counter = {"calls": 0}
    channel.mark("build")
    _install_builder(job, counter, report)
    t0 = _monotonic()
    cand = _exec_module("evk_candidate", job["candidate_path"], Path(job["candidate_path"]).read_text())
    report["import_seconds"] = _monotonic() - t0
    model_cls = getattr(cand, "ModelNew", None)
    if model_cls is None:
        raise LookupError("the candidate defines no ModelNew class")
    report["patched"] = _patched(before, _snapshot(torch))
    report["phase"] = "construct"
    recipe = job.get("recipe")  # a recipe known when the job was written (the Nsight Compute copy)
    stager = None
    if job.get("profile_once"):
        init_dir, weights_dir = job_dir / "init", job_dir / "weights"
    else:
        # The trusted side prepares the init arguments and weights while the candidate builds.
        channel.mark("imported")
        cmd = channel.recv()
        while cmd.get("cmd") == "built":  # a late answer to a build request the builder stopped waiting for
            cmd = channel.recv()
        if cmd.get("cmd") != "construct":
            raise RuntimeError(f"expected construct, got {cmd.get('cmd')!r}")
        init_dir, weights_dir = _subdir(job_dir, cmd["init"]), _subdir(job_dir, cmd["weights"])
        recipe = cmd.get("recipe")
        if cmd.get("device_compare") and device == "cuda":
            # each call's results go into a device buffer the trusted side maps and compares there
            # (verifier/correctness/shared_device_memory.py): no output file on the host
            from verifier.correctness.shared_device_memory import Stager

            stager = Stager(torch, channel.send_fd)

    def call_inputs(cmd: dict, d: Path | None, reuse: list | None = None) -> list:
        """One call's inputs: drawn on the device from the command's seed when the task has a recipe (into
        `reuse`, the last call's inputs, where shapes match), else read from the files the trusted side
        handed over in `d`."""
        drawn_from = cmd["recipe"] if isinstance(cmd.get("recipe"), list) else recipe  # a held-out shape's own
        if drawn_from is not None and "seed" in cmd:
            return draw(torch, drawn_from, int(cmd["seed"]), str(cmd.get("dist") or "task"), device, into=reuse)
        assert d is not None
        if reuse is not None:
            reuse.clear()  # not read into: freed before this call's files are loaded
        return load_args(torch, np, d, device)

    built = _construct(torch, np, init_dir, weights_dir, job, model_cls, device)
    model = built["model"]
    report["weights"] = built["weights"]
    threads_before = threading.active_count()
    if job.get("profile_once"):
        # Under Nsight Compute: one forward on the profile inputs and nothing else on the device.
        with torch.no_grad():
            model(*call_inputs({"seed": job["profile_seed"]} if "profile_seed" in job else {}, job_dir / "profile"))
            sync(torch, device)
        report["phase"] = "done"
        return
    channel.mark("ready", builds=report.get("builds", []), import_seconds=report["import_seconds"],
                 patched=report["patched"], weights=report["weights"], device_name=report["device_name"],
                 threads=threads, pid=os.getpid())
    kept: list = []
    inputs: list = []
    last_command: str | None = None  # the last command's kind, a followed trial told apart (`flow`)

    def charge_cuda_peak(command: str | None) -> None:
        """Live tensors at their peak since the last reading, charged to the phase that ran since (trials and
        probes, the profile, the timed rounds): where the memory plan is measured. Read at an unclocked
        command (`max_memory_reserved` builds the allocator's whole statistics dict: 0.3 ms of a clocked
        window the trusted side's never held, session 15, H200), and at the profile's end, so the first timed
        rounds are not charged with the profile's call."""
        staged_bytes = stager.buffer.nbytes if stager is not None and stager.buffer is not None else 0
        report["device_peak_bytes"] = max(int(report.get("device_peak_bytes") or 0),
                                          int(torch.cuda.max_memory_reserved()) + staged_bytes)
        since = PHASE_GROUP.get(str(command))
        if since is not None:
            phases = report.setdefault("device_peak_phases", {})
            _raise_peak(phases, since, torch.cuda.max_memory_allocated())
            if command in ("probe", "flow"):  # within the trials: which kind of call drew the peak
                _raise_peak(phases, command, torch.cuda.max_memory_allocated())
            torch.cuda.reset_peak_memory_stats()

    if device == "cpu":  # where the trials' host memory starts: the model built, nothing drawn yet
        report["device_peak_phases"] = {"base": rss_bytes()}
        reset_rss_peak()
    with torch.no_grad():
        while True:
            cmd = channel.recv()
            t_recv = _monotonic()  # when the command arrived (diagnostics: where a clocked window went)
            kind = cmd.get("cmd")
            # the card this process held so far: the allocator's peak and its shared buffer. Not read at the start
            # of a clocked command: `max_memory_reserved` builds the allocator's whole statistics dict, 0.3 ms of
            # the candidate's window that the trusted side's never held (session 15, H200); the next command reads it
            if device == "cpu" and kind not in ("round", "stub_round", "wake"):
                # on the CPU the host is the device: the resident peak (`VmHWM`) since the last unclocked
                # command, charged as on the card; a claim of this process, shown and never relied on
                since = PHASE_GROUP.get(str(last_command))
                if since is not None:
                    phases = report.setdefault("device_peak_phases", {})
                    peak = _raise_peak(phases, since, rss_bytes(peak=True))
                    report["device_peak_bytes"] = max(int(report.get("device_peak_bytes") or 0), peak)
                    reset_rss_peak()
            if device == "cuda" and kind not in ("round", "stub_round", "wake"):
                charge_cuda_peak(last_command)
                if kind in ("trial", "probe", "profile"):  # what earlier commands left on the card (a leak shows)
                    _raise_peak(report.setdefault("device_peak_phases", {}), f"live:{kind}", torch.cuda.memory_allocated())
            last_command = "flow" if kind == "trial" and cmd.get("flow") else kind
            if kind == "finish":
                break
            report["phase"] = {"trial": "correctness", "probe": "correctness", "profile": "profile",
                               "round": "latency", "stub_round": "latency"}.get(kind, kind)
            if stager is not None and kind not in ("trial", "probe"):
                stager.close()  # correctness is over: the shared buffer's gigabytes back to the card
            if kind == "trial":
                d = _subdir(job_dir, cmd["dir"])
                # the last call's outputs freed and its inputs drawn into: a trial holds one call's tensors,
                # not two (a 256 MB problem's trials held 2x its inputs and outputs; issue 33)
                outs = None
                inputs = call_inputs(cmd, d, inputs)
                scrub_free_cuda_memory(torch)
                before_calls = counter["calls"]
                flow = None
                try:
                    if cmd.get("flow"):  # one ordinary trial, drawn in secret: where the kernel's results go
                        raw, flow = flow_forward(torch, model, inputs, counter)
                        outs = plain_outputs(torch, raw)
                        raw = None  # held past the trial, it kept the followed call's outputs on the card
                    else:
                        outs = plain_outputs(torch, model(*inputs))
                    # Right as forward returns, before any synchronise: was its output finished on the current
                    # stream, and was the device idle once that stream drained? (work hidden on a side stream)
                    probe = clock.probe([o for o in outs if o.is_cuda]) if clock is not None else None
                    sync(torch, device)
                except Exception as exc:
                    if not cmd.get("may_refuse"):
                        raise
                    # a held-out shape (verifier/correctness/probes.py) the kernel does not take: noted, not refused
                    channel.mark("trial_done", index=cmd.get("index"), outputs=[], refused=f"{type(exc).__name__}: "
                                 f"{str(exc)[:300]}", kernel_calls=counter["calls"] - before_calls)
                    continue
                calls = counter["calls"] - before_calls
                staged = stager.stage(outs, inputs) if stager is not None else {}

                def meta_of(j: int, o, staged=staged, d=d, inputs=inputs) -> dict:
                    meta = staged["outputs"][j] if staged else save_tensor(torch, np, d / f"out{j}.npy", o)
                    meta["aliases_input"] = any(
                        isinstance(x, torch.Tensor) and o.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
                        for x in inputs)
                    return meta

                # built in a comprehension: a loop's variable kept the last output alive after `outs` was
                # dropped (one output more beside the next trial's, on the card while the trusted side checked)
                metas = [meta_of(j, o) for j, o in enumerate(outs)]
                meta_of = None  # type: ignore[assignment]  # its defaults hold this call's inputs: kept, they stayed through every later phase
                if not staged:
                    save_args(torch, np, d, inputs, prefix="after")
                elif staged["staging"]["nbytes"] >= BIG_CALL_BYTES:
                    # staged: the call's own tensors go back to the driver, so the trusted worker's check of
                    # a gigabyte call has room on the card (a 6.4 GB ReLU ran out of memory on an H100)
                    del outs
                    inputs = []
                    torch.cuda.empty_cache()
                channel.mark("trial_done", index=cmd.get("index"), outputs=metas, kernel_calls=calls,
                             **({"flow": flow} if flow is not None else {}),
                             **({"gpu_probe": probe} if probe is not None else {}),
                             **({"after": staged["after"], "staging": staged["staging"]} if staged else {}))
            elif kind == "probe":  # the decoy probe: a trial's inputs again, kernel results garbled
                d = _subdir(job_dir, cmd["dir"])
                outs = None
                inputs = call_inputs(cmd, d, inputs)
                scrub_free_cuda_memory(torch)
                outs, found = probe_forward(torch, model, inputs, counter)  # type: ignore[assignment]  # forward's raw output or None
                sync(torch, device)
                staged = stager.stage(plain_outputs(torch, outs), []) if stager is not None and outs is not None else {}
                metas = staged.get("outputs") or ([save_tensor(torch, np, d / f"out{j}.npy", o)
                                                   for j, o in enumerate(plain_outputs(torch, outs))]
                                                  if outs is not None and stager is None else [])
                if device == "cuda":
                    # the probe's tensors back to the card before the next command, as a big trial's are: the
                    # probe's inputs and garbled outputs were held through every timed round after it (with the
                    # profile's inputs, 2x a 6.4 GB ReLU's problem on top of the rounds' own; issue 33)
                    held = _tensor_bytes(torch, inputs)
                    outs, inputs = None, []
                    _return_if_big(torch, held)
                channel.mark("trial_done", index=cmd.get("index"), outputs=metas, probe=found,
                             **({"staging": staged["staging"]} if staged else {}))
            elif kind == "profile":
                outs = None
                inputs = call_inputs(cmd, None if "seed" in cmd and recipe is not None else _subdir(job_dir, cmd["dir"]),
                                     inputs)
                counter["profiling"] = True
                before_calls = counter["calls"]
                with profiler(torch, device) as prof:
                    model(*inputs)
                    sync(torch, device)
                counter["profiling"] = False
                found = {"profile": top_ops(prof), "ops_run": sorted({e.key for e in prof.key_averages()} - IGNORED_OPS),
                         "profile_kernel_calls": counter["calls"] - before_calls}
                if device == "cuda":
                    found["profile_device_ms"] = device_ms(prof)
                    held = _tensor_bytes(torch, inputs)
                    inputs = []  # not held through the timed rounds that follow (see the probe's)
                    _return_if_big(torch, held)
                    charge_cuda_peak("profile")
                    last_command = None  # read: the next command charges nothing to the profile again
                else:
                    found["work_split"] = work_split(prof)
                channel.mark("profile_done", **found)
            elif kind == "round":
                # the last round's sets and kept outputs are done with (checked, saved): freed before this
                # round's are drawn, not held beside them (on the card a gigabyte problem has room for one)
                sets, kept = None, []
                t_draw = _monotonic()
                if recipe is not None and "seeds" in cmd:  # drawn inside the parent's clock, as loading was
                    sets = draw_sets(torch, recipe, cmd["seeds"], device)
                else:
                    sets = load_sets(torch, np, _subdir(job_dir, cmd["dir"]), int(cmd["count"]), device)
                per_call: list[int] = []  # custom-kernel calls of each timed forward (custom-kernel-skipped)
                t_loop = _monotonic()
                channel.mark("timing_start")
                times, kept = time_round(torch, counted_model(model, counter, per_call), sets, device,
                                         detach_inputs=cmd.get("detach_inputs") is not False, by_reference=device == "cpu")
                # where this process's part of the clocked window went (diagnostics, as the reference worker's)
                t_end = _monotonic()
                inner = [(t_loop - t_draw) * 1e3, (t_end - t_loop) * 1e3]
                # On the CPU the parent pauses this sandbox and reads the kept outputs from this process's
                # memory at these addresses (verifier/clock/frozen_read.py): nothing is saved after the clock.
                at = ([[{"addr": o.data_ptr(), "nbytes": o.numel() * o.element_size(), "shape": list(o.shape),
                         "dtype": str(o.dtype).replace("torch.", "")} for o in outs] for outs in kept]
                      if device == "cpu" else None)
                channel.mark("timing_end", times_ms=times, kernel_calls=per_call, inner_ms=inner,
                             stamps=[t_recv, t_draw, t_loop, t_end, _monotonic()], loop_detail=last_loop_detail(),
                             **({"outputs_at": at} if at is not None else {}))
            elif kind == "stub_round":
                # This process's own round loop with a model whose calls return the round's outputs again: the
                # overhead of a round *here*, in the candidate's allocator and page state, on the round's own
                # sets (already checked, so nothing can be worked ahead). The parent subtracts no more than
                # this (verifier.clock.stats.own_overhead_ratio): what the candidate sets in its process to
                # make its loop cheaper makes this round cheaper too.
                sets = None  # the round's, freed before the stub's are drawn (as the reference worker's are)
                t_draw = _monotonic()
                if recipe is not None and "seeds" in cmd:
                    sets = draw_sets(torch, recipe, cmd["seeds"], device)
                else:
                    sets = load_sets(torch, np, _subdir(job_dir, cmd["dir"]), int(cmd["count"]), device)
                t_loop = _monotonic()
                channel.mark("timing_start")
                times, _ = time_round(torch, ready_model(kept), sets, device,
                                      detach_inputs=cmd.get("detach_inputs") is not False, by_reference=device == "cpu")
                t_end = _monotonic()
                # `sets` stays until the next command replaces it, as a real round's does: freeing it here
                # would put a cost in this window that the real round has only in the next one
                channel.mark("timing_end", times_ms=times, stamps=[t_recv, t_draw, t_loop, t_end, _monotonic()],
                             loop_detail=last_loop_detail())
                if device == "cuda":
                    kept = []  # checked and saved before this stub: back to the card before the next replay
            elif kind == "wake":  # just before a clocked window (`paired_calls.wake_enabled`)
                wake(torch, device)
                channel.mark("awake")
            elif kind == "save" and isinstance(cmd.get("blocks"), dict):  # the GPU's block checks
                saved = save_blocks(torch, np, _subdir(job_dir, cmd["dir"]), kept, cmd["blocks"], str(cmd.get("tag") or "b"))
                if not cmd.get("keep"):  # kept for the own stub round that follows (EVOKERNEL_OWN_STUB=on)
                    kept = []
                    # the round's sets freed here, outside any clocked window (the next round's would free them
                    # inside its own, as the trusted worker's replay never does)
                    sets = None
                channel.mark("saved", outputs=saved, allocator=_allocator_counts(torch))
    report["threads_after_forward"] = threading.active_count() - threads_before
    report["patched_after_forward"] = _patched(before, _snapshot(torch))
    report["phase"] = "done"


#: the phase a command's device memory is charged to (`device_peak_phases`)
PHASE_GROUP = {"trial": "trials", "flow": "trials", "probe": "trials", "profile": "profile", "round": "rounds", "stub_round": "rounds",
               "save": "rounds", "wake": "rounds"}


#: a call whose tensors take this much gives the allocator's cached blocks back to the driver once done with
#: them (outside any clock), so the card has room for what the trusted side and the next phase need
BIG_CALL_BYTES = 1 << 28


def _raise_peak(peaks: dict, key: str, value: int) -> int:
    """`peaks[key]` raised to `value` if that is higher (a phase's peak is the largest seen for it): the new figure."""
    peaks[key] = max(int(peaks.get(key, 0)), int(value))
    return peaks[key]


def _tensor_bytes(torch, values: list) -> int:
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


def _return_if_big(torch, nbytes: int) -> None:
    if nbytes >= BIG_CALL_BYTES:
        torch.cuda.empty_cache()


def _allocator_counts(torch) -> dict[str, int]:
    """The caching allocator's running counts of driver allocations, frees and out-of-memory retries
    (diagnostics, read after the clock): a round that reaches cudaMalloc or cudaFree pays a device-wide
    synchronisation inside its window, which a gigabyte problem sharing the card can hit every round."""
    try:
        stats = torch.cuda.memory_stats()
    except Exception:  # noqa: BLE001 - another allocator backend: nothing to say
        return {}
    return {k: int(stats.get(f"num_{k}", 0)) for k in ("device_alloc", "device_free", "alloc_retries")}


def _warm_cuda() -> None:
    """What every CUDA job does before its candidate is imported, done while a spare worker waits for its
    job: the CUDA context (1-2 s), torch._dynamo (which the CUDA profiler imports) and the extension
    builder's modules. A failure here is left for the job itself to meet and report."""
    try:
        import torch
        import torch._dynamo  # noqa: F401
        import torch.utils.cpp_extension  # noqa: F401

        import verifier.backends.cuda  # noqa: F401
        import verifier.clock.gpu_timing  # noqa: F401

        if torch.cuda.is_available():
            torch.cuda.init()
    except Exception:  # noqa: BLE001 - see the docstring
        pass


def _warm_flow() -> None:
    """Enter the followed trial's dispatch mode once (`decoy.flow_forward`) before the candidate is imported
    (done while a spare waits for its job): whatever its first use imports or binds lies before the
    monkey-patch check's snapshot, not between the candidate's import and its forwards."""
    try:
        import torch

        from verifier.correctness.decoy import Flow, flow_mode

        with flow_mode(torch, Flow(torch)):
            torch.ones(1).add(1)
    except Exception:  # noqa: BLE001 - a failure is met again, and reported, by the followed trial itself
        pass


def _start_exec_watch(channel) -> None:
    """Before anything of the candidate's is imported (and before torch starts a thread): every later
    `mmap`/`mprotect` making executable memory is told to the trusted side (`verifier.sandbox.exec_watch`),
    which holds the listener; this process keeps no copy of it. A failure sends nothing: the trusted side
    then refuses to go on without its watch."""
    if channel.fd_socket is None:
        return
    try:
        from verifier.sandbox.exec_watch import send_listener

        send_listener(channel.fd_socket)
    except OSError as exc:
        print(f"exec watch: {exc}", file=sys.stderr)


def main() -> int:
    from verifier.sandbox.channel import Channel

    job_dir = Path(sys.argv[1])
    channel = Channel.from_env()
    if os.environ.get("EVK_EXEC_WATCH") == "1":
        _start_exec_watch(channel)
    import numpy  # noqa: F401  (warm: imported before the job arrives)
    import torch  # noqa: F401
    import torch.utils.cpp_extension  # noqa: F401  (0.17 s of every C++ candidate's import, done while waiting)

    import verifier.clock.paired_calls  # noqa: F401

    _warm_flow()
    if "--warm-cuda" in sys.argv[2:]:
        _warm_cuda()
    if "--wait" in sys.argv[2:] and channel.recv().get("cmd") != "go":
        return 0
    report: dict = {}
    try:
        serve(job_dir, channel, report)
        status = 0
    except BaseException as exc:  # the child reports every failure as data for the parent
        from verifier.build.split_build import BuildError

        report.update({"failed_phase": report.get("phase", "start"), "phase": "error",
                       "error_type": type(exc).__name__, "error": str(exc)[:2000],
                       "traceback": traceback.format_exc()[-4000:]})
        if isinstance(exc, BuildError):
            diags = exc.diagnostics
            if getattr(exc, "source", ""):
                from verifier.build.diagnostics import locate_in_file

                job = json.loads((job_dir / "job.json").read_text())
                diags = locate_in_file(diags, exc.source, Path(job["candidate_path"]).read_text())
            from verifier.build.diagnostics import first_error

            report["build_error"] = {"message": first_error(diags, exc.log) if diags else str(exc), "diagnostics": diags,
                                     "log": exc.log[-6000:]}
        status = 3
    channel.mark("report", report=report)
    sys.stdout.flush()
    return status


if __name__ == "__main__":
    os._exit(main())
