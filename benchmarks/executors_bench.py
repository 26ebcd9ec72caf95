"""Throughput of the bench executors: candidates verified per minute, in-process, pool x1, pool x2, Ray x2.

The candidates are the honest CPU kernels in tests/candidates/cpu (KernelBench ModelNew files, each
for the built-in task named by its file stem), verified with the real CPU verifier and
`VerifyConfig(use_cache=False)`, so every job runs the gates again (the C++ build cache stays on:
a warm-up pass builds each kernel once, as a bench's re-verification would find it). Each executor
verifies the whole set `--rounds` times; its start-up is timed apart. A second measure sends trivial
jobs to the pool and to Ray to put a number on the per-job overhead.

    python benchmarks/executors_bench.py [--rounds 2] [--write]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.executors import InProcessExecutor, ProcessPoolExecutor, verify_job  # noqa: E402
from core.tasks import load_task  # noqa: E402
from verifier.config import VerifyConfig  # noqa: E402

CANDIDATES = ROOT / "tests" / "candidates" / "cpu"
RESULTS = ROOT / "benchmarks" / "results" / "bench_executors.md"


def jobs() -> list[tuple[str, str, str]]:
    out = []
    for f in sorted(CANDIDATES.glob("*.py")):
        out.append((f.stem, load_task(f.stem).source, f.read_text()))
    return out


def noop(x: int) -> int:
    return x


def measure(name: str, make, work: list[tuple[str, str, str]], rounds: int, config: VerifyConfig) -> dict:
    t0 = time.monotonic()
    ex = make()
    ex.submit(noop, 0).result()
    startup = time.monotonic() - t0
    try:
        t1 = time.monotonic()
        futures = [ex.submit(verify_job, ref, cand, "cpu", config) for _ in range(rounds) for _, ref, cand in work]
        results = [f.result() for f in futures]
        seconds = time.monotonic() - t1
        bad = [r for r in results if not r.feasible]
        t2 = time.monotonic()
        n_noop = 200
        [f.result() for f in [ex.submit(noop, i) for i in range(n_noop)]]
        noop_ms = (time.monotonic() - t2) / n_noop * 1000
    finally:
        ex.shutdown()
    row = {"name": name, "jobs": len(results), "seconds": seconds, "per_min": len(results) / seconds * 60,
           "startup": startup, "noop_ms": noop_ms, "infeasible": len(bad),
           "median_job_s": statistics.median(r.seconds for r in results)}
    print(f"{name:<14} {row['jobs']:>3} jobs in {seconds:6.1f} s = {row['per_min']:6.1f} candidates/min "
          f"(start-up {startup:5.1f} s, median job {row['median_job_s']:.2f} s, trivial job {noop_ms:.2f} ms, "
          f"{len(bad)} infeasible)", flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2, help="Times each executor verifies the whole candidate set.")
    ap.add_argument("--write", action="store_true", help=f"Write {RESULTS.relative_to(ROOT)}.")
    args = ap.parse_args()
    config = VerifyConfig(use_cache=False)
    work = jobs()
    print(f"{len(work)} candidates: {', '.join(n for n, _, _ in work)}; {os.cpu_count()} CPUs", flush=True)
    t0 = time.monotonic()
    warm = [verify_job(ref, cand, "cpu", config) for _, ref, cand in work]
    print(f"warm-up (builds and reference runs): {time.monotonic() - t0:.1f} s, "
          f"{sum(r.feasible for r in warm)}/{len(warm)} feasible", flush=True)
    rows = [
        measure("in-process", InProcessExecutor, work, args.rounds, config),
        measure("pool x1", lambda: ProcessPoolExecutor(1), work, args.rounds, config),
        measure("pool x2", lambda: ProcessPoolExecutor(2), work, args.rounds, config),
    ]
    try:
        import ray  # noqa: F401

        from core.executors import RayExecutor

        rows.append(measure("ray x2 (local)", lambda: RayExecutor(2), work, args.rounds, config))
    except ImportError:
        print("ray is not installed: Ray row skipped (pip install 'evokernel-tui[ray]')")
    by = {r["name"]: r for r in rows}
    lines = [f"pool x2 / pool x1 throughput: {by['pool x2']['per_min'] / by['pool x1']['per_min']:.2f}x"]
    if "ray x2 (local)" in by:
        ray_row, pool = by["ray x2 (local)"], by["pool x2"]
        lines.append(f"Ray overhead over the pool (2 workers): throughput {pool['per_min'] / ray_row['per_min']:.2f}x "
                     f"lower on Ray ({(pool['per_min'] / ray_row['per_min'] - 1) * 100:+.1f}%), "
                     f"start-up {ray_row['startup']:.1f} s vs {pool['startup']:.1f} s, "
                     f"trivial job {ray_row['noop_ms']:.2f} ms vs {pool['noop_ms']:.2f} ms")
    for line in lines:
        print(line)
    if args.write:
        write(rows, lines, args.rounds, len(work))


def write(rows: list[dict], lines: list[str], rounds: int, n: int) -> None:
    import platform

    import torch

    load = os.getloadavg()[0]
    out = [
        "# Bench executors: verification throughput", "",
        "Command: `python benchmarks/executors_bench.py --write`  ",
        f"Date: {time.strftime('%Y-%m-%d %H:%M')}; {os.cpu_count()} CPUs, torch {torch.__version__}, "
        f"Python {platform.python_version()}, load average {load:.2f} at the end "
        "(the machine is shared: other work competes for the same cores, so read ratios rather than absolutes).", "",
        f"Each executor verified the {n} honest CPU candidates of `tests/candidates/cpu` {rounds} times with the real "
        "CPU verifier (`VerifyConfig(use_cache=False)`: every gate re-runs; kernels were built once in a warm-up). "
        "Start-up (pool spawn or `ray.init`, until a first trivial job returns) is not in the throughput. "
        "`trivial job` is the wall time of 200 no-op jobs submitted at once, divided by 200 (the per-job overhead).", "",
        "| executor | jobs | seconds | candidates / min | start-up s | median job s | trivial job ms |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        out.append(f"| {r['name']} | {r['jobs']} | {r['seconds']:.1f} | {r['per_min']:.1f} | {r['startup']:.1f} | "
                   f"{r['median_job_s']:.2f} | {r['noop_ms']:.2f} |")
    out += ["", *[f"- {line}" for line in lines], "",
            "Each verification already runs the candidate in a sandboxed child process and times it with the "
            "machine's threads, so on 2 CPUs two concurrent jobs compete for the same cores: the pool's gain "
            "comes from overlapping one job's process start-up, import and correctness trials with another's "
            "timing, not from twice the compute. Timings measured under concurrency are therefore noisier than "
            "with one worker; `--workers 1` remains the setting for publishable latencies on one machine, and "
            "Ray's value is spreading jobs over GPUs and hosts (one GPU per job on cuda/triton). Ray's per-job "
            "dispatch cost (the trivial-job column) is under a millisecond, so a larger throughput gap on "
            "multi-second jobs comes from Ray's own daemons (GCS, raylet, idle workers) sharing the two cores, "
            "and from load noise.", ""]
    RESULTS.write_text("\n".join(out))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
