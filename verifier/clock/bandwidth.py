"""Speed of light (issue 35): the machine's memory-bandwidth peak, measured by the trusted side and cached
per machine, and each verdict's position against it.

The peak is measured in the trusted reference worker (`verifier.workers.reference_worker`, `prepare`), which
already runs torch with the verifier's thread count on the cores the candidate gets:

- CPU: a STREAM-style triad (`a = b + s*c`, float32, arrays several times the last-level cache, best of a few
  runs, STREAM's byte count: 3 arrays' bytes per triad), cached keyed by the CPU model and the thread count;
- GPU: a large device-to-device copy timed with CUDA events (read + write bytes), cached per device name.
  Measured on an H100 in session 13 (2.91-2.99 TB/s).
- FLOPs: for a task with FLOPs per call (torch's FLOP counter: matmuls, convolutions, attention), a float32
  matmul probe, cached per machine the same way (`peak_flops`); the bound then comes from the ridge point.

The cache is one JSON file (`cache_path`: `EVOKERNEL_PEAKS_CACHE`, else the user's cache dir), shared by
every worker of the machine; a key is measured on `PEAK_SAMPLES` occasions (its peak the best of them, so
one measurement on a busy machine does not stay the peak), then reused.

`speed_of_light` turns a verdict's bytes moved and times into the latency detail's fractions. A fraction
above 1 is flagged: either the figure is wrong or the model of the work (inputs read once, outputs written
once) is, e.g. sets small enough to stay in cache between calls.
"""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

PEAKS_VERSION = 1
#: below this many FLOPs per byte moved a task is memory-bound on any machine we run on (CPU ridge points
#: are ~5-20 FLOP/B, GPU ones 10-300): the bound is the bandwidth one
MEMORY_BOUND_INTENSITY = 1.0
#: a fraction of the peak above this is flagged (`over_peak`)
OVER_PEAK = 1.0
OVER_PEAK_NOTE = ("above the measured bandwidth peak: the figure or the model of its work (inputs read once, "
                  "outputs written once) is wrong, e.g. data that stays in cache between calls")
CPU_MIN_BYTES = 256 * 1024**2   # the triad's three arrays together, at least
CPU_MAX_BYTES = 1024**3
CPU_RUNS = 8            # at least this many triads...
CPU_BUDGET_S = 0.8      # ...and more while this budget lasts (best of them: a shared machine's quiet moment)
CPU_MAX_RUNS = 60
#: a key is measured on this many occasions (separate workers, minutes apart) before its peak, the best of
#: them, is reused as is: one measurement taken while the machine was busy must not become the peak for good
PEAK_SAMPLES = 3
GPU_COPY_BYTES = 1024**3
GPU_RUNS = 10
#: the FLOP peak's probe: a float32 matmul of this size (torch's default matmul precision, as the reference
#: runs), best of a few runs; measured only for a task with FLOPs (a matmul, a convolution, attention)
CPU_MATMUL_N = 1024
GPU_MATMUL_N = 8192
FLOP_RUNS = 5
FLOP_BUDGET_S = 0.6


def cache_path() -> Path:
    env = os.environ.get("EVOKERNEL_PEAKS_CACHE")
    if env:
        return Path(env)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("evokernel")) / "peaks.json"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown cpu"


def machine_key(device: str, threads: int, device_name: str = "") -> str:
    """The cache key: the CPU model and thread count, or the GPU's name."""
    if device == "cuda":
        return f"v{PEAKS_VERSION}|cuda|{device_name}"
    return f"v{PEAKS_VERSION}|cpu|{cpu_model()}|threads={int(threads)}"


def last_level_cache_bytes() -> int:
    best = 0
    for size in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        try:
            text = size.read_text().strip().upper()
            mult = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(text[-1:], 1)
            best = max(best, int(text.rstrip("KMG")) * mult)
        except (OSError, ValueError):
            continue
    return best


def cpu_triad_bytes() -> int:
    """The triad's three arrays together: four times the last-level cache, 256 MiB to 1 GiB."""
    return int(min(CPU_MAX_BYTES, max(CPU_MIN_BYTES, 4 * last_level_cache_bytes())))


def cpu_triad_gbps(torch, threads: int | None = None, total_bytes: int | None = None, runs: int = CPU_RUNS,
                   budget_s: float = CPU_BUDGET_S) -> float:
    """STREAM triad `a = b + s*c` in float32 with torch's threads (set to `threads` for the measurement), best of
    `runs` or more while `budget_s` lasts, counted as STREAM counts it (two arrays read, one written; no
    write-allocate)."""
    n = max(1, int(total_bytes or cpu_triad_bytes()) // (3 * 4))
    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(int(threads))
    try:
        b = torch.full((n,), 1.0, dtype=torch.float32)
        c = torch.full((n,), 2.0, dtype=torch.float32)
        a = torch.empty(n, dtype=torch.float32)
        torch.add(b, c, alpha=3.0, out=a)  # first touch of every page (not timed)
        best, done, end = float("inf"), 0, time.perf_counter() + budget_s
        while done < max(1, runs) or (time.perf_counter() < end and done < CPU_MAX_RUNS):
            t0 = time.perf_counter()
            torch.add(b, c, alpha=3.0, out=a)
            best = min(best, time.perf_counter() - t0)
            done += 1
        return 3 * 4 * n / best / 1e9
    finally:
        torch.set_num_threads(before)


def cuda_copy_gbps(torch, nbytes: int = GPU_COPY_BYTES, runs: int = GPU_RUNS) -> float:  # pragma: no cover - GPU
    """A device-to-device copy of `nbytes` (bounded by the free memory), timed with CUDA events, best of `runs`;
    read + write bytes. NOT YET MEASURED on a card."""
    free = int(torch.cuda.mem_get_info()[0])
    n = max(1 << 20, min(int(nbytes), free // 4)) // 4
    src = torch.empty(n, dtype=torch.float32, device="cuda").fill_(1.0)
    dst = torch.empty_like(src)
    dst.copy_(src)
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(max(1, runs)):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3)
    del src, dst
    torch.cuda.empty_cache()
    return 2 * 4 * n / best / 1e9


#: the floating dtypes a FLOP peak is measured for, and their short names in the cache key and the verdict;
#: "tf32" is float32 data through a GPU's tensor cores (`torch.backends.cuda.matmul.allow_tf32`), the roof a
#: float32 kernel that rounds its products to TF32 is held to (`speed_of_light`)
PEAK_DTYPES = {"float32": "fp32", "tf32": "tf32", "float16": "fp16", "bfloat16": "bf16"}


def compute_dtype(torch, tensors: list) -> str:
    """The dtype a task's arithmetic runs in, for its compute roof: that of its largest floating-point input
    (float32 when it has none, or one without a measured peak, e.g. float64). A bfloat16 GEMM's roof is the
    card's bfloat16 peak, many times its float32 one: a float32 roof would flag it above 100%."""
    best, size = "float32", -1
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel() > size:
            best, size = str(t.dtype).replace("torch.", ""), t.numel()
    return best if best in PEAK_DTYPES else "float32"


def cpu_matmul_gflops(torch, threads: int | None = None, n: int = CPU_MATMUL_N, runs: int = FLOP_RUNS,
                      budget_s: float = FLOP_BUDGET_S, dtype: str = "float32") -> float:
    """An `n`x`n` matmul in `dtype` with torch's threads (set to `threads` for it), best of `runs` or more
    while `budget_s` lasts: 2n^3 FLOPs per run."""
    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(int(threads))
    try:
        a = torch.randn(n, n, dtype=getattr(torch, dtype))
        b = torch.randn(n, n, dtype=getattr(torch, dtype))
        out = torch.mm(a, b)  # warm (not timed)
        best, done, end = float("inf"), 0, time.perf_counter() + budget_s
        while done < max(1, runs) or (time.perf_counter() < end and done < 4 * runs):
            t0 = time.perf_counter()
            torch.mm(a, b, out=out)
            best = min(best, time.perf_counter() - t0)
            done += 1
        return 2.0 * n**3 / best / 1e9
    finally:
        torch.set_num_threads(before)


def cuda_matmul_gflops(torch, n: int = GPU_MATMUL_N, runs: int = FLOP_RUNS,
                       dtype: str = "float32") -> float:  # pragma: no cover - GPU
    """An `n`x`n` matmul in `dtype` on the card (float32 under torch's current matmul precision; "tf32":
    float32 with TF32 tensor cores allowed for this probe only), timed with CUDA events, best of `runs`:
    2n^3 FLOPs per run."""
    tf32 = dtype == "tf32"
    data = torch.float32 if tf32 else getattr(torch, dtype)
    allowed = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True if tf32 else allowed
    try:
        a = torch.randn(n, n, dtype=data, device="cuda")
        b = torch.randn(n, n, dtype=data, device="cuda")
        out = torch.mm(a, b)
        torch.cuda.synchronize()
        best = float("inf")
        for _ in range(max(1, runs)):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            torch.mm(a, b, out=out)
            end.record()
            end.synchronize()
            best = min(best, start.elapsed_time(end) / 1e3)
        del a, b, out
    finally:
        torch.backends.cuda.matmul.allow_tf32 = allowed  # the reference's precision is not changed
    torch.cuda.empty_cache()
    return 2.0 * n**3 / best / 1e9


def _read_cache(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_cache(path: Path, key: str, entry: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = _read_cache(path)
        data[key] = entry
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache dir: measured again next time


def _cached_peak(path: Path, key: str, field: str, measure: bool, device: str, threads: int, device_name: str,
                 take: Callable[[], tuple[float, str]]) -> dict[str, Any] | None:
    """A peak `{field, "method", "key", "measured_at", "cached"}` from the cache when its key is there with
    `PEAK_SAMPLES` measurements (or with none listed: a peak written by hand is used as is), else `take()`n
    now (value, method) and added to the key's samples, the peak being their best (unless `measure` is off:
    then whatever the cache has, or None)."""
    hit = _read_cache(path).get(key)
    valid = isinstance(hit, dict) and isinstance(hit.get(field), (int, float)) and hit[field] > 0
    samples = [float(x) for x in hit.get("samples") or ()] if valid and isinstance(hit, dict) else []
    if valid and isinstance(hit, dict) and ("samples" not in hit or len(samples) >= PEAK_SAMPLES or not measure):
        return {**hit, "key": key, "cached": True}
    if not measure:
        return None
    value, method = take()
    samples.append(value)
    entry = {field: max(samples), "samples": samples, "method": method, "measured_at": time.time(),
             "threads": int(threads), "device": device, "model": device_name if device == "cuda" else cpu_model()}
    _write_cache(path, key, entry)
    return {**entry, "key": key, "cached": False}


def peak_bandwidth(torch, device: str, threads: int, device_name: str = "", measure: bool = True,
                   path: Path | None = None) -> dict[str, Any] | None:
    """The machine's bandwidth peak `{"gbps", "method", "key", "measured_at", "cached"}` (`_cached_peak`)."""
    def take() -> tuple[float, str]:
        if device == "cuda":  # pragma: no cover - GPU
            return cuda_copy_gbps(torch), "cuda device-to-device copy, CUDA events"
        total = cpu_triad_bytes()
        return (cpu_triad_gbps(torch, threads, total),
                f"STREAM triad, float32, {total // 1024**2} MiB, best of {CPU_RUNS}+ runs in {CPU_BUDGET_S} s")

    return _cached_peak(path or cache_path(), machine_key(device, threads, device_name), "gbps", measure, device,
                        threads, device_name, take)


def peak_flops(torch, device: str, threads: int, device_name: str = "", measure: bool = True,
               path: Path | None = None, dtype: str = "float32") -> dict[str, Any] | None:
    """The machine's FLOP peak in `dtype` (`PEAK_DTYPES`) `{"gflops", "method", "key", "measured_at",
    "cached", "dtype"}`, cached and sampled as the bandwidth peak is (`_cached_peak`; its own key: the
    machine's key and `|flops-fp32`, `|flops-bf16`, ...)."""
    dtype = dtype if dtype in PEAK_DTYPES else "float32"
    if dtype == "tf32" and device != "cuda":
        return None  # tensor cores: a GPU's

    def take() -> tuple[float, str]:
        if device == "cuda":  # pragma: no cover - GPU
            precision = ", torch's matmul precision" if dtype == "float32" else ""
            return (cuda_matmul_gflops(torch, dtype=dtype),
                    f"{dtype} matmul {GPU_MATMUL_N}x{GPU_MATMUL_N}{precision}, CUDA events")
        return (cpu_matmul_gflops(torch, threads, dtype=dtype),
                f"{dtype} matmul {CPU_MATMUL_N}x{CPU_MATMUL_N}, best of {FLOP_RUNS}+ runs")

    found = _cached_peak(path or cache_path(), machine_key(device, threads, device_name) + f"|flops-{PEAK_DTYPES[dtype]}",
                         "gflops", measure, device, threads, device_name, take)
    return {**found, "dtype": dtype} if found is not None else None


def speed_of_light(moved_bytes: float | None, gbps: float | None, reference_gbps: float | None,
                   peak_gbps: float | None, flops: float | None = None,
                   peak_gflops: float | None = None, tf32_peak_gflops: float | None = None) -> dict[str, Any]:
    """The latency detail's speed-of-light keys from the bytes a call moves, the kernel's and the reference's
    achieved GB/s, the machine's peak and (when known) the task's FLOPs per call:
    `bandwidth_peak_gbps`, `bandwidth_fraction`, `reference_bandwidth_fraction`, `arithmetic_intensity`,
    `bound` (memory-bound, or None when FLOPs are unknown or the intensity is high and no FLOP peak is
    known: then only the bandwidth fraction is said), and `bandwidth_over_peak`/`bandwidth_note` when a
    fraction is above 1.

    With a FLOP peak (`peak_gflops`) and FLOPs per call: `gflops` and `reference_gflops` achieved (FLOPs
    over the call's time, which is bytes over GB/s), `flops_peak_gflops`, `flops_fraction`,
    `reference_flops_fraction`, and the bound from the ridge point (peak FLOP/s over peak bytes/s): below
    it memory-bound, at or above it compute-bound.

    `tf32_peak_gflops` (a float32 task on a GPU: the card's TF32 tensor-core peak) is kept as
    `tf32_peak_gflops`; a kernel above the float32 roof but within this one is held to it instead
    (`flops_roof` "tf32": it rounds its products to TF32, which only a loose tolerance lets through), not
    flagged as a wrong figure."""
    def frac(x: float | None) -> float | None:
        if x is None or not peak_gbps or peak_gbps <= 0:
            return None
        return float(x) / float(peak_gbps)

    out: dict[str, Any] = {"bandwidth_peak_gbps": float(peak_gbps) if peak_gbps and peak_gbps > 0 else None,
                           "bandwidth_fraction": frac(gbps), "reference_bandwidth_fraction": frac(reference_gbps),
                           "arithmetic_intensity": None, "bound": None}
    if flops is not None and moved_bytes:
        intensity = float(flops) / float(moved_bytes)
        out["arithmetic_intensity"] = intensity
        if intensity < MEMORY_BOUND_INTENSITY:
            out["bound"] = "memory-bound"
        if flops > 0 and peak_gflops and peak_gflops > 0:
            def rate(x: float | None) -> float | None:
                return None if x is None else float(flops) * float(x) / float(moved_bytes)

            roof = float(peak_gflops)
            if tf32_peak_gflops and tf32_peak_gflops > roof:
                out["tf32_peak_gflops"] = float(tf32_peak_gflops)
                achieved = rate(gbps)
                if achieved is not None and achieved > OVER_PEAK * roof:
                    roof = float(tf32_peak_gflops)
                    out["flops_roof"] = "tf32"
            peak_gflops = roof
            out.update(gflops=rate(gbps), reference_gflops=rate(reference_gbps), flops_peak_gflops=float(peak_gflops))
            out["flops_fraction"] = None if out["gflops"] is None else out["gflops"] / float(peak_gflops)
            out["reference_flops_fraction"] = (None if out["reference_gflops"] is None
                                               else out["reference_gflops"] / float(peak_gflops))
            if peak_gbps and peak_gbps > 0:
                out["ridge_intensity"] = float(peak_gflops) / float(peak_gbps)
                out["bound"] = "memory-bound" if intensity < out["ridge_intensity"] else "compute-bound"
    over = [k for k in ("bandwidth_fraction", "reference_bandwidth_fraction", "flops_fraction",
                        "reference_flops_fraction")
            if out.get(k) is not None and out[k] > OVER_PEAK]
    if over:
        out["bandwidth_over_peak"] = over
        out["bandwidth_note"] = OVER_PEAK_NOTE
    return out

