"""How long does a big CPU problem take to a verdict? `evokernel verify` of the 256 MB ReLU
(`tests/candidates/kernelbench_head/relu_8192.py`, 8192x8192 randn, `--memory-gb 12`) with the honest OpenMP
candidate, each code version in turn (A/B alternating in one run, so both see the same load).

Prints, per verdict: wall seconds, the correctness phase, the CPU seconds of the whole process tree (user +
system, from the children's rusage: less sensitive to a loaded machine than wall time), the load average
before it, and the per-phase seconds. `--python` names one interpreter per code version (a venv whose editable
install points at that checkout); the first verdict of each is a warm-up (build and task checks cached) and is
reported but left out of the medians.

    python benchmarks/big_cpu_verify.py --python before=/tmp/venv_before/bin/python --python after=.venv/bin/python \
        [--reps 3] [--no-timing] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TASK = ROOT / "tests/candidates/kernelbench_head/relu_8192.py"
CANDIDATE = ROOT / "tests/candidates/cpu/relu.py"


def once(python: str, no_timing: bool, home: str, timeout: float) -> dict:
    """One verdict through the command line; its figures."""
    python = os.path.abspath(python) if os.sep in python else python  # the verdict runs with cwd /tmp
    argv = [python, "-m", "evokernel_tui.cli", "verify", str(TASK), str(CANDIDATE), "--memory-gb", "12", "--no-cache",
            "--json", *(["--no-timing"] if no_timing else [])]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd="/tmp",
                          env={**os.environ, "HOME": home})
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    row: dict = {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "sys_s": round(after.ru_stime - before.ru_stime, 2),
                 "load_before": round(load, 2), "rc": proc.returncode}
    try:
        res = json.loads(proc.stdout)
    except json.JSONDecodeError:
        row["error"] = (proc.stderr or proc.stdout)[-300:]
        return row
    row["phases"] = {k: round(float(v), 2) for k, v in (res.get("phases") or {}).items()}
    row["correctness_s"] = row["phases"].get("correctness")
    row["feasible"] = res.get("feasible")
    failed = [f"{g.get('name')}: {str(g.get('reason') or '')[:200]}" for g in res.get("gates") or [] if g.get("status") == "fail"]
    if failed:
        row["failed"] = failed
    timing = res.get("timing") or {}
    row["figure"] = ("no figure" if timing.get("no_figure") or timing.get("speedup") is None else
                     f"{timing['speedup']:.3f}x [{timing.get('lo') or 0:.3f}, {timing.get('hi') or 0:.3f}]"
                     f"{' noisy' if timing.get('noisy') else ''}, {timing.get('rounds')} rounds")
    row["probes"] = ", ".join(f"{p.get('shapes') or p.get('name')} {p.get('status')}" for p in res.get("probes") or [])
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--python", action="append", required=True, help="NAME=PATH of an interpreter (repeat)")
    parser.add_argument("--reps", type=int, default=3, help="measured verdicts per version (after one warm-up)")
    parser.add_argument("--no-timing", action="store_true", help="correctness only (no timed rounds)")
    parser.add_argument("--home", default=None, help="HOME for every run (default: a fresh one in /tmp)")
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    versions = [tuple(p.split("=", 1)) for p in args.python]
    home = args.home or f"/tmp/evk-big-cpu-{os.getpid()}"
    Path(home).mkdir(parents=True, exist_ok=True)
    rows: dict[str, list[dict]] = {name: [] for name, _ in versions}
    print(f"{os.cpu_count()} cores, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"{'--no-timing' if args.no_timing else 'full verdict'}", flush=True)
    for rep in range(args.reps + 1):
        for name, python in versions:
            row = once(python, args.no_timing, home, args.timeout)
            row["warmup"] = rep == 0
            rows[name].append(row)
            print(f"{name:8s} {'warm-up' if rep == 0 else f'rep {rep}':7s} wall {row['wall_s']:7.1f} s  correctness "
                  f"{row.get('correctness_s') or 0:6.1f} s  cpu {row['cpu_s']:6.1f} s (sys {row['sys_s']:5.1f})  "
                  f"load {row['load_before']:5.2f}  feasible {row.get('feasible')}  {row.get('error', '')}"
                  f"{row.get('failed', '')}  {row.get('figure', '')}", flush=True)
            print(f"         phases {row.get('phases')}", flush=True)
    print("\n| version | verdicts | median wall s | median correctness s | median CPU s (tree) | median load |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, got in rows.items():
        measured = [r for r in got if not r["warmup"] and "error" not in r]
        if not measured:
            continue
        def med(key: str, rows: list[dict] = measured) -> float:
            return statistics.median(float(r.get(key) or 0) for r in rows)

        print(f"| {name} | {len(measured)} | {med('wall_s'):.1f} | {med('correctness_s'):.1f} | {med('cpu_s'):.1f} | "
              f"{med('load_before'):.2f} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"cores": os.cpu_count(), "argv": sys.argv, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
