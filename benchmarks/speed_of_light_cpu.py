"""Speed of light on the CPU (issue 35): is the verifier's cached bandwidth peak the machine's?

Compares the peak the trusted reference worker measures and caches (`verifier.clock.bandwidth`: a torch
STREAM triad, float32, with the verifier's thread count on the worker cores) with an independent
STREAM-style measurement: numpy Copy and Add kernels (float64, as STREAM), one pass each (`np.copyto`,
`np.add(..., out=)`: no temporaries), in separate processes, one per verifier thread, each pinned to one of
the worker cores and started together; best of several runs, STREAM's byte counts. Add has the triad's
traffic (two arrays read, one written), so it is the one to agree with; the issue asks for 10 %.

The independent measurement runs before and after the verifier's (a shared machine's load moves between
them), and the verifier's peak is taken both ways: as `evokernel verify relu` has its reference worker
measure it into a fresh cache (one sample per fresh worker: relu, gemm_bias_relu and softmax_rows; a second
relu then reuses the cached peak), and again in fresh pinned processes. The verdicts are read against it.

Then `--pairs` alternating measurements (a fresh pinned process each: the verifier's triad, then numpy), as a
shared machine's load moves by 2x within a minute; the comparison is best against best.

    python benchmarks/speed_of_light_cpu.py [--runs 10] [--pairs 8] [--tag NAME] [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import multiprocessing as mp
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# three verifications, three fresh reference workers: the peak's `PEAK_SAMPLES` occasions (the third reads it)
TASKS = (("relu", "tests/candidates/cpu/relu.py"), ("gemm_bias_relu", "tests/candidates/cpu/gemm_bias_relu.py"),
         ("softmax_rows", "tests/candidates/cpu/softmax_rows.py"), ("relu", "tests/candidates/cpu/relu.py"))


def _numpy_stream(cpu: int | None, n: int, runs: int, barrier, queue) -> None:
    """One STREAM-style process: Copy (2 arrays of traffic) and Add (3), float64, best of `runs`."""
    import numpy as np

    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    a, b, c = np.ones(n), np.full(n, 2.0), np.zeros(n)
    np.copyto(c, a)
    np.add(a, b, out=c)  # every page touched before timing
    barrier.wait()
    best_copy = best_add = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        np.copyto(c, a)
        best_copy = min(best_copy, time.perf_counter() - t0)
        t0 = time.perf_counter()
        np.add(a, b, out=c)
        best_add = min(best_add, time.perf_counter() - t0)
    queue.put({"cpu": cpu, "copy_gbps": 2 * 8 * n / best_copy / 1e9, "add_gbps": 3 * 8 * n / best_add / 1e9})


def numpy_stream(cpus: list[int | None], total_bytes: int, runs: int) -> dict:
    """The independent figure: one process per core in `cpus`, their bandwidths summed."""
    ctx = mp.get_context("spawn")
    barrier, queue = ctx.Barrier(len(cpus)), ctx.Queue()
    n = max(1, total_bytes // (3 * 8))
    procs = [ctx.Process(target=_numpy_stream, args=(cpu, n, runs, barrier, queue)) for cpu in cpus]
    for p in procs:
        p.start()
    rows = [queue.get(timeout=300) for _ in procs]
    for p in procs:
        p.join()
    return {"processes": rows, "copy_gbps": sum(r["copy_gbps"] for r in rows),
            "add_gbps": sum(r["add_gbps"] for r in rows), "array_bytes_each": 8 * n}


def _triad_in_process(cpus: list[int], threads: int, queue) -> None:
    import torch

    from verifier.clock.bandwidth import cpu_triad_bytes, cpu_triad_gbps

    if cpus:
        os.sched_setaffinity(0, set(cpus))
    queue.put(cpu_triad_gbps(torch, threads, cpu_triad_bytes()))


def verifier_triad_fresh(cpus: list[int], threads: int) -> float:
    """`verifier.clock.bandwidth.cpu_triad_gbps` as the reference worker runs it, in a fresh pinned process."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    p = ctx.Process(target=_triad_in_process, args=(cpus, threads, queue))
    p.start()
    value = queue.get(timeout=300)
    p.join()
    return float(value)


def verify_json(task: str, candidate: str, env: dict) -> dict:
    proc = subprocess.run([sys.executable, "-m", "evokernel_tui.cli", "verify", task, str(ROOT / candidate), "--json",
                           "--no-cache"], capture_output=True, text=True, timeout=900, env=env, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"verify {task} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--pairs", type=int, default=8, help="alternating verifier-triad / numpy measurements")
    parser.add_argument("--tag", default="")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = parser.parse_args()

    from verifier.clock.bandwidth import cpu_model, cpu_triad_bytes, last_level_cache_bytes, machine_key
    from verifier.clock.cpu_accounting import worker_cpus
    from verifier.config import VerifyConfig
    from verifier.workers.pools import _threads

    threads = _threads(VerifyConfig())
    cpus = sorted(worker_cpus() or ())
    pinned: list[int | None] = list(cpus[:threads]) if len(cpus) >= threads else [None] * threads
    total = cpu_triad_bytes()
    started = dt.datetime.now(dt.UTC)
    print(f"machine: {cpu_model()}, {os.cpu_count()} cores, LLC {last_level_cache_bytes() // 1024**2} MiB; "
          f"verifier threads {threads} on cores {cpus}; arrays {total // 1024**2} MiB in all", flush=True)

    before = numpy_stream(pinned, total, args.runs)
    print(f"numpy STREAM before: copy {before['copy_gbps']:.2f} GB/s, add {before['add_gbps']:.2f} GB/s", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        peaks = Path(tmp) / "peaks.json"
        env = {**os.environ, "EVOKERNEL_PEAKS_CACHE": str(peaks), "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
        verdicts: dict[str, dict] = {}
        for i, (task, cand) in enumerate(TASKS):
            data = verify_json(task, cand, env)
            lat = next((g for g in data["gates"] if g["name"] == "latency"), {"detail": {}})["detail"]
            verdicts[f"{i + 1}. {task}"] = {k: lat.get(k) for k in (
                "gbps", "reference_gbps", "bandwidth_peak_gbps", "bandwidth_fraction", "reference_bandwidth_fraction",
                "arithmetic_intensity", "bound", "bandwidth_over_peak", "bandwidth_peak_source", "noisy", "no_figure",
                "speedup", "median_ms", "reference_ms")}
            print(f"verify {task}: {json.dumps(verdicts[f'{i + 1}. {task}'])}", flush=True)
        cache = json.loads(peaks.read_text())
    key = machine_key("cpu", threads)
    worker_peak = float(cache[key]["gbps"])
    # on a shared machine the load moves by 2x within a minute: alternate the two, fresh processes each time
    pairs = []
    for _ in range(args.pairs):
        triad = verifier_triad_fresh(cpus, threads)
        ind = numpy_stream(pinned, total, args.runs)
        pairs.append({"verifier_triad_gbps": triad, "numpy_add_gbps": ind["add_gbps"], "numpy_copy_gbps": ind["copy_gbps"]})
        print(f"pair: verifier triad {triad:.2f} GB/s, numpy add {ind['add_gbps']:.2f}, copy {ind['copy_gbps']:.2f}",
              flush=True)
    after = numpy_stream(pinned, total, args.runs)
    print(f"numpy STREAM after: copy {after['copy_gbps']:.2f} GB/s, add {after['add_gbps']:.2f} GB/s", flush=True)

    fresh = [p["verifier_triad_gbps"] for p in pairs]
    independent_add = max([before["add_gbps"], after["add_gbps"], *(p["numpy_add_gbps"] for p in pairs)])
    ratio_worker = worker_peak / independent_add
    ratio_fresh = max(fresh) / independent_add
    pair_ratios = sorted(p["verifier_triad_gbps"] / p["numpy_add_gbps"] for p in pairs)
    record = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "date_utc": started.isoformat(timespec="seconds"),
        "machine": {"cpu_model": cpu_model(), "cores": os.cpu_count(), "llc_bytes": last_level_cache_bytes(),
                    "platform": platform.platform(), "verifier_threads": threads, "worker_cpus": cpus,
                    "load_avg_at_start": os.getloadavg()},
        "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                 cwd=ROOT).stdout.strip(),
        "cache_key": key, "cache_entry": cache[key],
        "verifier_peak_gbps_reference_worker": worker_peak, "verifier_triad_fresh_gbps": fresh,
        "numpy_stream_before": before, "numpy_stream_after": after,
        "pairs": pairs, "pair_ratios_sorted": pair_ratios,
        "numpy_add_best_gbps": independent_add,
        "ratio_worker_peak_to_numpy_add_best": ratio_worker, "ratio_fresh_triad_best_to_numpy_add_best": ratio_fresh,
        "within_10_percent": abs(1 - ratio_worker) <= 0.10,
        "fresh_best_within_10_percent": abs(1 - ratio_fresh) <= 0.10,
        "verdicts": verdicts,
    }
    print(f"verifier peak (reference worker, cached, best of {len(cache[key].get('samples', []))}) {worker_peak:.2f} GB/s; "
          f"best fresh triad {max(fresh):.2f}; best numpy add {independent_add:.2f} GB/s -> ratios {ratio_worker:.3f} "
          f"(cached, {'within' if record['within_10_percent'] else 'NOT within'} 10%), {ratio_fresh:.3f} (fresh best); "
          f"pair ratios median {pair_ratios[len(pair_ratios) // 2]:.3f} [{pair_ratios[0]:.3f}-{pair_ratios[-1]:.3f}]",
          flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"speed_of_light_cpu_{started:%Y-%m-%d}" + (f"_{args.tag}" if args.tag else "")
    (out / f"{stem}.json").write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {out / (stem + '.json')}")


if __name__ == "__main__":
    main()
