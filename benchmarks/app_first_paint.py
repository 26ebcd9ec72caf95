"""First paint of the app: time from process start to the first screen, against the 1 s target.

Each trial starts a fresh Python process that imports the CLI and the app the way `evokernel tui relu`
does, runs the app headless, and reports when Textual says the first screen is ready. It also
reports whether torch, litellm or the verifier were imported by then (they must load lazily).

    python benchmarks/app_first_paint.py [--trials 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 1.0
HEAVY = ("torch", "litellm", "verifier.api")

CHILD = r"""
import asyncio, sys, time
import evokernel_tui.cli  # the entry point's own import cost counts
from evokernel_tui.app import EvoKernelApp
from evokernel_tui.commands.tui import session_opener

class Probe(EvoKernelApp):
    def on_ready(self):
        super().on_ready()
        heavy = [m for m in {heavy!r} if m in sys.modules]
        print("PAINTED", time.time(), ",".join(heavy), flush=True)
        self.exit()

app = Probe(open_session=session_opener("cpu", None, None, {sessions!r}, 4, 4), task="relu", watch_file=False)
asyncio.run(app.run_async(headless=True, size=(120, 40)))
"""


def trial(workdir: Path) -> tuple[float, list[str]]:
    code = CHILD.format(heavy=HEAVY, sessions=str(workdir / "sessions"))
    env_cfg = {"EVOKERNEL_CONFIG_DIR": str(workdir / "cfg"), "EVOKERNEL_MEMORY": str(workdir / "memory.json")}
    import os

    start = time.time()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, **env_cfg}, cwd=workdir)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("PAINTED")), None)
    if line is None:
        raise SystemExit(f"the app did not paint; stderr:\n{out.stderr[-2000:]}")
    _, painted, heavy = (line.split(" ") + [""])[:3]
    return float(painted) - start, [h for h in heavy.split(",") if h]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = [trial(Path(tmp)) for _ in range(args.trials)]
    times = [t for t, _ in results]
    heavy = sorted({h for _, loaded in results for h in loaded})
    report = {
        "trials": args.trials,
        "median_s": round(statistics.median(times), 3),
        "max_s": round(max(times), 3),
        "target_s": TARGET_S,
        "meets_target": statistics.median(times) <= TARGET_S,
        "heavy_imports_before_paint": heavy,
    }
    if args.json:
        print(json.dumps(report))
        return
    verdict = "meets" if report["meets_target"] else "MISSES"
    print(f"first paint: median {report['median_s']:.3f} s, max {report['max_s']:.3f} s over {args.trials} "
          f"trials; {verdict} the {TARGET_S:.1f} s target")
    print("heavy imports before paint: " + (", ".join(heavy) if heavy else "none (torch, litellm, verifier.api are lazy)"))


if __name__ == "__main__":
    main()
