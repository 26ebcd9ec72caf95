"""The child side of a verification: runs inside the sandbox, never in the app's process.

`python -m verifier.harness JOBDIR` reads `JOBDIR/job.json` and writes `JOBDIR/out/`: a JSON report and
`.npy` files of outputs and inputs-after-call. It computes no verdict: the parent compares the files
with the reference's, so nothing a candidate does to this interpreter can make it pass.
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
    """Phase marks for the parent (live gate lights and the wall-clock cross-check of timings)."""

    def __init__(self, fd: int | None):
        self._fd = fd

    def mark(self, phase: str, **extra) -> None:
        if self._fd is None:
            return
        line = json.dumps({"phase": phase, **extra}) + "\n"
        try:
            os.write(self._fd, line.encode())
        except OSError:
            self._fd = None


MAX_SOURCE_MARK = 256 * 1024


def report_built_source(sources: list[str]) -> None:
    """Tell the parent exactly which C++/CUDA text is about to be compiled, before it can run: sources
    assembled at run time (string concatenation) never appear as literals for the static scan."""
    fd = os.environ.get("EVK_PROGRESS_FD")
    if not fd:
        return
    text = "\n".join(sources)
    Progress(int(fd)).mark("source", text=text[:MAX_SOURCE_MARK], truncated=len(text) > MAX_SOURCE_MARK)


class ReferenceTripwire:
    """Stands in for the reference `Model` in the candidate's process; instantiating it is recorded."""

    hits = 0

    def __init__(self, *args, **kwargs):
        type(self).hits += 1
        raise RuntimeError("the reference Model is not available to candidates")


class CountingModule:
    """Wraps a built extension so the harness can tell whether forward called the custom kernel."""

    def __init__(self, module, counter: dict):
        object.__setattr__(self, "_module", module)
        object.__setattr__(self, "_counter", counter)

    def __getattr__(self, name):
        attr = getattr(self._module, name)
        if callable(attr) and not name.startswith("__"):
            counter = self._counter

            def counted(*args, **kwargs):
                counter["calls"] += 1
                from torch.profiler import record_function

                with record_function(f"kernel::{name}"):
                    return attr(*args, **kwargs)

            counted.__name__ = name
            return counted
        return attr


def _snapshot(torch) -> dict[str, int]:
    """Identities of torch's and the clocks' public attributes, to detect monkey-patching."""
    snap = {f"torch.{k}": id(v) for k, v in vars(torch).items() if not k.startswith("_")}
    snap.update({f"torch.Tensor.{k}": id(v) for k, v in vars(torch.Tensor).items() if not k.startswith("_")})
    snap.update({f"torch.nn.functional.{k}": id(v) for k, v in vars(torch.nn.functional).items()
                 if not k.startswith("_")})
    snap.update({f"time.{k}": id(getattr(time, k)) for k in ("perf_counter", "perf_counter_ns", "time",
                                                              "monotonic", "monotonic_ns", "process_time")})
    snap.update(_cuda_snapshot(torch))
    snap["torch.Tensor.__eq__"] = id(torch.Tensor.__eq__)
    snap["torch.Tensor.__sub__"] = id(torch.Tensor.__sub__)
    return snap


def _cuda_snapshot(torch) -> dict[str, int]:
    """The CUDA entry points that timing and synchronisation rely on (streams, events, sync)."""
    if not torch.cuda.is_available():
        return {}
    snap = {f"torch.cuda.{k}": id(getattr(torch.cuda, k, None)) for k in (
        "Event", "Stream", "synchronize", "current_stream", "default_stream", "set_stream", "stream")}
    snap.update({f"torch.cuda.Event.{k}": id(getattr(torch.cuda.Event, k, None))
                 for k in ("record", "elapsed_time", "synchronize", "query", "wait")})
    snap.update({f"torch.cuda.Stream.{k}": id(getattr(torch.cuda.Stream, k, None))
                 for k in ("synchronize", "query", "wait_stream", "wait_event", "record_event")})
    return snap


def _patched(before: dict[str, int], after: dict[str, int]) -> list[str]:
    return sorted(k for k, v in before.items() if after.get(k) != v)


def _as_outputs(torch, out) -> list:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)) and all(isinstance(o, torch.Tensor) for o in out):
        return list(out)
    raise TypeError(f"forward returned {type(out).__name__}; it must return a tensor or a tuple of tensors")


def _save(torch, np, path: Path, t) -> dict:
    """Write one tensor as .npy (never pickle) and describe it."""
    t = t.detach()
    meta = {"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""), "device": str(t.device)}
    arr = t.to("cpu")
    if arr.dtype in (torch.bfloat16, torch.float16):
        arr = arr.float()
    np.save(path, arr.contiguous().numpy(), allow_pickle=False)
    meta["file"] = path.name
    return meta


def _exec_module(name: str, path: str, source: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__file__ = path
    code = compile(source, path, "exec")
    sys.modules[name] = module
    exec(code, module.__dict__)
    return module


def _top_ops(prof, limit: int = 15) -> list[dict]:
    rows = []
    for evt in prof.key_averages():
        self_us = getattr(evt, "self_device_time_total", 0) or 0
        self_us = max(self_us, getattr(evt, "self_cpu_time_total", 0) or 0)
        on_device = str(getattr(evt, "device_type", "")).endswith(("CUDA", "PrivateUse1"))
        rows.append({"name": evt.key, "self_ms": self_us / 1000.0, "calls": int(evt.count), "device_kernel": on_device})
    rows.sort(key=lambda r: r["self_ms"], reverse=True)
    return rows[:limit]


def _profiler(torch, device: str):
    """Kineto for GPU kernel times; on the CPU the legacy profiler, which skips kineto's ~1.5 s start-up."""
    if device == "cuda":
        from torch.profiler import ProfilerActivity, profile

        return profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    return torch.autograd.profiler.profile(use_kineto=False)


def _device_ms(prof) -> float:
    """GPU time of every kernel one forward launched, on any stream (what CUDA events may not see)."""
    total_us = 0.0
    for evt in prof.key_averages():
        if str(getattr(evt, "device_type", "")).endswith("CUDA"):
            total_us += getattr(evt, "self_device_time_total", 0) or 0
    return total_us / 1000.0


def _work_split(prof) -> dict:
    """CPU self time inside the custom kernel versus torch compute ops around it (allocation and views
    excluded): torch arithmetic beside a do-nothing kernel shows up here."""
    kernel_us = torch_us = 0.0
    torch_ops: list[tuple[str, float]] = []
    for evt in prof.key_averages():
        us = float(getattr(evt, "self_cpu_time_total", 0) or 0)
        if evt.key.startswith("kernel::"):
            kernel_us += us
        elif evt.key.startswith("aten::") and evt.key not in IGNORED_OPS:
            torch_us += us
            torch_ops.append((evt.key, us / 1000.0))
    torch_ops.sort(key=lambda r: r[1], reverse=True)
    return {"kernel_ms": kernel_us / 1000.0, "torch_ms": torch_us / 1000.0, "torch_ops": torch_ops[:5]}


def _sync(torch, device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _time_calls(torch, fn, args, device: str, warmup: int, min_reps: int, max_reps: int, min_time_s: float,
                progress: Progress, flush=None) -> list[float]:
    """Per-call milliseconds on clocks captured before any candidate code ran."""
    for _ in range(warmup):
        fn(*args)
    _sync(torch, device)
    times: list[float] = []
    progress.mark("timing_start")
    budget_end = _perf_ns() + int(min_time_s * 1e9)
    while len(times) < max_reps and (len(times) < min_reps or _perf_ns() < budget_end):
        if flush is not None:
            flush()
        _sync(torch, device)
        t0 = _perf_ns()
        fn(*args)
        _sync(torch, device)
        times.append((_perf_ns() - t0) / 1e6)
    progress.mark("timing_end", total_ms=sum(times))
    return times


def run(job_dir: Path, report: dict) -> dict:
    """Fill `report` as phases complete, so a failure still tells the parent how far the run got."""
    job = json.loads((job_dir / "job.json").read_text())
    out_dir = job_dir / "out"
    out_dir.mkdir(exist_ok=True)
    progress = Progress(int(os.environ["EVK_PROGRESS_FD"]) if os.environ.get("EVK_PROGRESS_FD") else None)
    report.update({"mode": job["mode"], "phase": "start"})

    import numpy as np
    import torch

    torch.set_num_threads(max(1, int(job.get("threads") or torch.get_num_threads())))
    device = job.get("device", "cpu")
    before = _snapshot(torch)
    report["torch"] = torch.__version__
    gpu_clock = None
    if device == "cuda":
        report["device_name"] = torch.cuda.get_device_name()
        if not job.get("profile_once"):
            from verifier.gpu_timing import L2_FLUSH_BYTES, CudaClock

            gpu_clock = CudaClock(torch, int(job.get("l2_flush_bytes", L2_FLUSH_BYTES)))
    else:
        import platform

        report["device_name"] = f"cpu ({platform.machine()}, {torch.get_num_threads()} threads)"

    ref_source = Path(job["reference_path"]).read_text()
    counter = {"calls": 0}
    if job["mode"] == "reference":
        ref = _exec_module("evk_reference", job["reference_path"], ref_source)
        model_cls = ref.Model
        get_inputs, get_init_inputs = ref.get_inputs, ref.get_init_inputs
    else:
        ns: dict = {"__name__": "evk_task_inputs"}
        exec(compile(ref_source, "<task>", "exec"), ns)
        get_inputs, get_init_inputs = ns["get_inputs"], ns["get_init_inputs"]
        ns["Model"] = ReferenceTripwire
        progress.mark("build")
        report["phase"] = "build"
        _install_builder(job, torch, counter, report)
        t0 = _monotonic()
        cand = _exec_module("evk_candidate", job["candidate_path"], Path(job["candidate_path"]).read_text())
        report["import_seconds"] = _monotonic() - t0
        model_cls = getattr(cand, "ModelNew", None)
        if model_cls is None:
            raise LookupError("the candidate defines no ModelNew class")
        report["patched"] = _patched(before, _snapshot(torch))
    report["phase"] = "construct"
    progress.mark("correctness")
    seeds = job["seeds"]
    torch.manual_seed(seeds[0])
    init = get_init_inputs()
    torch.manual_seed(seeds[0])
    model = model_cls(*init)
    if hasattr(model, "to"):
        model = model.to(device)
    if hasattr(model, "eval"):
        model.eval()
    if job.get("profile_once"):
        return _forward_once(torch, model, get_inputs, seeds[0], device, report)

    report["phase"] = "correctness"
    trials = []
    persistent = None
    threads_before = threading.active_count()
    calls_per_trial = []
    gpu_probes = []
    with torch.no_grad():
        for i, seed in enumerate(seeds):
            torch.manual_seed(seed)
            fresh = [x.to(device) if isinstance(x, torch.Tensor) else x for x in get_inputs()]
            if persistent is None:
                persistent = fresh
            elif all(
                not isinstance(a, torch.Tensor) or (isinstance(b, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype)
                for a, b in zip(persistent, fresh, strict=True)
            ):
                for a, b in zip(persistent, fresh, strict=True):
                    if isinstance(a, torch.Tensor):
                        a.copy_(b)
            else:
                persistent = fresh
            inputs = persistent
            before_calls = counter["calls"]
            out = model(*inputs)
            outs = _as_outputs(torch, out)
            if gpu_clock is not None:
                gpu_probes.append(gpu_clock.probe(outs))
            _sync(torch, device)
            calls_per_trial.append(counter["calls"] - before_calls)
            trial = {"seed": seed, "outputs": [], "inputs": []}
            for j, o in enumerate(outs if job.get("save_outputs", True) else []):
                trial["outputs"].append(_save(torch, np, out_dir / f"t{i}_out{j}.npy", o))
                trial["outputs"][-1]["aliases_input"] = any(
                    isinstance(x, torch.Tensor) and o.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
                    for x in inputs
                )
            for j, x in enumerate(inputs if job.get("save_outputs", True) else []):
                if isinstance(x, torch.Tensor):
                    trial["inputs"].append(_save(torch, np, out_dir / f"t{i}_in{j}.npy", x))
            trials.append(trial)
        report["trials"] = trials
        report["kernel_calls"] = calls_per_trial
        if gpu_clock is not None:
            report["gpu_probes"] = gpu_probes
        report["threads_after_forward"] = threading.active_count() - threads_before
        report["patched_after_forward"] = _patched(before, _snapshot(torch)) if job["mode"] == "candidate" else []
        report["reference_tripwire"] = ReferenceTripwire.hits

        report["phase"] = "profile"
        progress.mark("profile")
        with _profiler(torch, device) as prof:
            model(*inputs)
            _sync(torch, device)
        report["profile"] = _top_ops(prof)
        if device == "cuda":
            report["profile_device_ms"] = _device_ms(prof)
        report["ops_run"] = sorted({e.key for e in prof.key_averages()} - IGNORED_OPS)
        if device == "cpu":
            report["work_split"] = _work_split(prof)

        report["phase"] = "latency"
        progress.mark("latency")
        if job.get("time", True) and gpu_clock is not None:
            report.update(gpu_clock.time_calls(model, inputs, job.get("warmup", 3), job.get("gpu_min_reps", 50),
                                               job.get("gpu_max_reps", 1000), job.get("min_time_s", 0.3), progress))
            if job["mode"] == "reference" and job.get("compare_compile"):
                compiled = torch.compile(model)
                report["compiled_times_ms"] = gpu_clock.time_calls(compiled, inputs, 3, 20, 200, 0.3,
                                                                   progress)["times_ms"]
        elif job.get("time", True):
            times = _time_calls(torch, model, inputs, device, job.get("warmup", 3), job.get("min_reps", 5),
                                job.get("max_reps", 50), job.get("min_time_s", 0.3), progress)
            report["times_ms"] = times
            if job["mode"] == "reference" and job.get("compare_compile"):
                compiled = torch.compile(model)
                report["compiled_times_ms"] = _time_calls(torch, compiled, inputs, device, 3, 5, 30, 0.3, progress)
    report["phase"] = "done"
    return report


def _forward_once(torch, model, get_inputs, seed: int, device: str, report: dict) -> dict:
    """Profile-once mode (under ncu): one forward on the first trial's inputs and nothing else on the GPU,
    so the only kernels the profiler sees are the candidate's."""
    report["phase"] = "profile"
    torch.manual_seed(seed)
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in get_inputs()]
    with torch.no_grad():
        model(*inputs)
    _sync(torch, device)
    report["phase"] = "done"
    return report


def _install_builder(job: dict, torch, counter: dict, report: dict) -> None:
    """Let the backend hook the candidate's build calls (see `verifier.backends`)."""
    import importlib

    module_name, func = job["installer"].split(":")
    getattr(importlib.import_module(module_name), func)(job, counter, report)


def main() -> int:
    job_dir = Path(sys.argv[1])
    out_dir = job_dir / "out"
    out_dir.mkdir(exist_ok=True)
    report: dict = {}
    try:
        run(job_dir, report)
        status = 0
    except BaseException as exc:  # the child reports every failure as data for the parent
        from verifier.build import BuildError

        report.update({"failed_phase": report.get("phase", "start"), "phase": "error",
                       "error_type": type(exc).__name__, "error": str(exc)[:2000],
                       "traceback": traceback.format_exc()[-4000:]})
        if isinstance(exc, BuildError):
            diags = exc.diagnostics
            if getattr(exc, "source", ""):
                from verifier.diagnostics import locate_in_file

                job = json.loads((job_dir / "job.json").read_text())
                diags = locate_in_file(diags, exc.source, Path(job["candidate_path"]).read_text())
            from verifier.diagnostics import first_error

            report["build_error"] = {"message": first_error(diags, exc.log) if diags else str(exc), "diagnostics": diags,
                                     "log": exc.log[-6000:]}
        status = 3
    tmp = out_dir / "report.json.tmp"
    tmp.write_text(json.dumps(report, default=str))
    os.replace(tmp, out_dir / "report.json")
    sys.stdout.flush()
    return status


if __name__ == "__main__":
    os._exit(main())
