"""Are speedups reproducible? The same honest kernels verified afresh, quiet and with one core busy.

Prints every reported speedup with its 95% interval, then per kernel max/min over all runs (target
<= 1.3), and two A/A checks that must come out at 1.00 within ±5%: a task whose reference *is* the
candidate's kernel (trusted worker vs sandbox), and the same kernel twice through `compare` (two
sandboxed copies on the same fresh sets).

    python benchmarks/timing_stability.py [--runs N] [--kernels relu,softmax_rows] [--json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

HONEST = ROOT / "tests" / "candidates" / "cpu"


def _busy(stop_at: float) -> None:
    x = 0
    while time.time() < stop_at:
        x += 1


def _aa_task(candidate: str, task_source: str) -> str:
    """The task's inputs with the candidate's own kernel as the reference `Model`."""
    body = candidate.replace("class ModelNew", "class Model")
    inputs = task_source[task_source.index("def get_inputs"):]
    return body + "\n\n" + inputs


def run(runs: int, kernels: list[str]) -> dict:
    from core.tasks import load_task
    from verifier import VerifyConfig, verify
    from verifier.api import compare

    root = Path(tempfile.mkdtemp(prefix="evk-stability-"))
    config = VerifyConfig(build_root=str(root), use_cache=False)
    out: dict = {"machine": f"{platform.machine()} {multiprocessing.cpu_count()} cores", "kernels": {}}
    for name in kernels:
        task = load_task(name).source
        source = (HONEST / f"{name}.py").read_text()
        verify(task, source, config=config)  # builds once; every later verdict is fresh
        rows = []
        for loaded in (False, True):
            for _ in range(runs):
                busy = None
                if loaded:
                    busy = multiprocessing.Process(target=_busy, args=(time.time() + 120,), daemon=True)
                    busy.start()
                try:
                    res = verify(task, source, config=config)
                finally:
                    if busy is not None:
                        busy.terminate()
                        busy.join()
                t = res.timing
                rows.append({"loaded": loaded, "speedup": res.speedup, "lo": t.get("lo"), "hi": t.get("hi"),
                             "noisy": bool(t.get("noisy")), "rounds": t.get("rounds")})
                print(f"{name:14s} {'busy ' if loaded else 'quiet'} speedup {res.speedup or 0:7.3f}x "
                      f"[{t.get('lo') or 0:.3f}, {t.get('hi') or 0:.3f}] rounds {t.get('rounds')}"
                      f"{'  noisy' if t.get('noisy') else ''}", flush=True)
        speeds = [r["speedup"] for r in rows if r["speedup"]]
        spread = max(speeds) / min(speeds) if speeds else None
        out["kernels"][name] = {"runs": rows, "max_over_min": spread}
        print(f"{name:14s} max/min of reported speedups: {spread:.3f} (target <= 1.3)", flush=True)
        aa = verify(_aa_task(source, task), source, config=config)
        out["kernels"][name]["aa"] = {"speedup": aa.speedup, "lo": aa.timing.get("lo"), "hi": aa.timing.get("hi"),
                                      "feasible": aa.feasible}
        print(f"{name:14s} A/A (reference = the same kernel): {aa.speedup or 0:.3f}x "
              f"[{aa.timing.get('lo') or 0:.3f}, {aa.timing.get('hi') or 0:.3f}] (target 1.00 ± 0.05)", flush=True)
        # The same kernel twice through `compare`: both copies built the same way, both sandboxed, so
        # only the pairing machinery differs between them (the line above also compares the trusted
        # worker's plain load_inline build with the sandbox's split build).
        pair = compare(task, source, source, config=config)
        out["kernels"][name]["aa_sandboxed"] = pair
        print(f"{name:14s} A/A (two sandboxed copies, compare): {pair.get('speedup') or 0:.3f}x "
              f"[{pair.get('lo') or 0:.3f}, {pair.get('hi') or 0:.3f}]{'  noisy' if pair.get('noisy') else ''}"
              f"{'  ' + pair['error'] if pair.get('error') else ''} (target 1.00 ± 0.05)", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--kernels", default="relu,softmax_rows")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.runs, args.kernels.split(","))
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
