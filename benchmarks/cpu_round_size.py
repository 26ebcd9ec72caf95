"""How many calls should a CPU timed round hold? Changed sources verified with each round target in turn
(alternating, in one run), printing the latency phase's seconds, rounds, calls per round, the interval
and whether the verdict made a claim. The default (`verifier.clock.rounds.CPU_ROUND_TARGET_MS`) is chosen from
these figures.

    python benchmarks/cpu_round_size.py [--targets 5,15] [--reps 6]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--targets", default="5,15", help="round targets in ms, comma-separated")
    parser.add_argument("--reps", type=int, default=6)
    args = parser.parse_args()

    import verify_speed as vs

    from verifier import VerifyConfig
    from verifier.api import verify

    targets = [float(x) for x in args.targets.split(",")]
    rows: dict[float, list[tuple[float, float, bool]]] = {t: [] for t in targets}
    with tempfile.TemporaryDirectory() as root:
        verify(vs.TASK, vs.kernel(0), "cpu", VerifyConfig(build_root=root, use_cache=False))
        n = 1000
        for _ in range(args.reps):
            for target in targets:
                n += 1
                cfg = VerifyConfig(build_root=root, use_cache=False, round_target_ms=target)
                t = time.perf_counter()
                res = verify(vs.TASK, vs.kernel(n), "cpu", cfg)
                total = time.perf_counter() - t
                d = res.gate("latency").detail
                claim = not d.get("noisy")
                rows[target].append((total, res.phases.get("latency", 0.0), claim))
                print(f"target {target:4.1f} ms: total {total:5.2f} s, latency {res.phases.get('latency', 0):4.2f} s, "
                      f"{d['rounds']:2d} rounds of {d['calls_per_round']:2d} calls, {d['speedup']:.3f}x "
                      f"[{d['lo']:.3f}, {d['hi']:.3f}] ±{d['halfwidth']:.2f} {'claim' if claim else 'noisy'}"
                      f"{' (out of reach)' if d.get('out_of_reach') else ''}", flush=True)
    print("\n| round target | verdicts | claims | median total s | median latency s |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for target, got in rows.items():
        print(f"| {target:g} ms | {len(got)} | {sum(c for *_, c in got)} | {statistics.median(g[0] for g in got):.2f} | "
              f"{statistics.median(g[1] for g in got):.2f} |")


if __name__ == "__main__":
    main()
