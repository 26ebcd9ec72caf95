"""Startup and first feedback in the app, the way a person meets them (manual mode, the real verifier).

One fresh process runs `evokernel tui relu` headless (checks before the full screen included), then:

  paint      process start → first screen (target 1 s)
  starter    launch → the starter kernel's verdict after pressing v (target ≤ 15 s on 2 cores); the
             starter is verified in the background from launch, so v usually finds its verdict cached
  compile    an edit with a C++ error in the same kernel → its verdict (target ≤ 5 s, headers warm)
  new sig    an edit with a C++ error and a new function signature (bindings not built yet) → its
             verdict: before the fix for issue 14 this waited for the bindings compiler (36–49 s)

Figures go to stdout (and `--json`); build caches are the machine's own unless `--cold` gives the
verifier a fresh build root. Runs for about a minute on 2 cores.

    python benchmarks/app_first_feedback.py [--cold | --after-setup] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r"""
import asyncio, json, sys, time
START = float(sys.argv[1])
import evokernel_tui.app as appmod
from evokernel_tui.widgets.kernel_pane import KernelPane

marks = {}

async def drive(app, pilot):
    while app.session is None:
        await asyncio.sleep(0.05)
    marks["session"] = time.time() - START
    async def verdict_after(action, count):
        t0 = time.time()
        action()
        while sum(1 for e in app.view.activity if e.kind == "verification") < count or app.running:
            await asyncio.sleep(0.05)
        return time.time() - t0, app.view.activity[-1].text
    s = app.session
    await pilot.press("escape")
    took, _ = await verdict_after(lambda: app.action_reverify(), 1)
    marks["starter"] = time.time() - START
    marks["starter_outcome"] = next(e.text for e in reversed(app.view.activity) if e.kind == "verification")
    broken = s.current_source.replace("const int64_t n = src.numel();", "const int64_t n = src.numel()")
    took, _ = await verdict_after(lambda: app.submit_edit(broken, "bench"), 2)
    marks["compile_error"] = took
    marks["compile_error_outcome"] = next(e.text for e in reversed(app.view.activity) if e.kind == "verification")
    salt = str(int(time.time() * 1000) % 100000)
    new_sig = broken.replace("torch::Tensor relu_forward(torch::Tensor x)",
                             "torch::Tensor relu_forward(torch::Tensor x, int64_t k" + salt + ")")
    took, _ = await verdict_after(lambda: app.submit_edit(new_sig, "bench"), 3)
    marks["new_signature_error"] = took
    marks["new_signature_outcome"] = next(e.text for e in reversed(app.view.activity) if e.kind == "verification")

orig_ready = appmod.EvoKernelApp.on_ready
def on_ready(self):
    marks["paint"] = time.time() - START
    orig_ready(self)
appmod.EvoKernelApp.on_ready = on_ready

def run(self, **kw):
    async def main():
        async with self.run_test(size=(120, 40)) as pilot:
            await asyncio.wait_for(drive(self, pilot), 600)
    asyncio.run(main())
appmod.EvoKernelApp.run = run

from evokernel_tui.cli import main
try:
    main(["tui", "relu", "--no-memory", "--sessions-dir", sys.argv[2]])
except SystemExit:
    pass
print("MARKS " + json.dumps(marks), flush=True)
"""


ROOT = Path(__file__).resolve().parent.parent
PREWARM = ("from verifier import VerifyConfig; from verifier.build import prewarm; "
           "r = VerifyConfig().root() / 'shared'; r.mkdir(parents=True, exist_ok=True); prewarm(r)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cold", action="store_true", help="a fresh verifier build root (cold headers and bindings)")
    parser.add_argument("--after-setup", action="store_true",
                        help="a fresh build root prewarmed the way scripts/setup.sh does it (not timed): "
                             "the first launch after the README's set-up")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "EVOKERNEL_CONFIG_DIR": str(Path(tmp) / "cfg"),
               "EVOKERNEL_CONFIG": str(Path(tmp) / "cfg" / "config.toml")}
        env.pop("EVOKERNEL_MODEL", None)
        if args.cold or args.after_setup:
            env["EVOKERNEL_BUILD_DIR"] = str(Path(tmp) / "build")
        if args.after_setup:
            subprocess.run([sys.executable, "-c", PREWARM], check=True, env=env, cwd=ROOT, timeout=900)
        start = time.time()
        out = subprocess.run([sys.executable, "-c", CHILD, str(start), str(Path(tmp) / "sessions")],
                             capture_output=True, text=True, timeout=900, env=env, cwd=tmp)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("MARKS ")), None)
    if line is None:
        raise SystemExit(f"no figures; stderr:\n{out.stderr[-3000:]}")
    marks = json.loads(line[len("MARKS "):])
    marks.update(cold=args.cold, after_setup=args.after_setup, cores=os.cpu_count())
    if args.json:
        print(json.dumps(marks))
        return
    print(f"first paint            {marks['paint']:6.2f} s   (target 1 s; checks before the screen included)")
    print(f"starter verdict (v)    {marks['starter']:6.2f} s after launch (target 15 s): {marks['starter_outcome']}")
    print(f"compile error          {marks['compile_error']:6.2f} s   (target 5 s): {marks['compile_error_outcome'][:90]}")
    print(f"new-signature error    {marks['new_signature_error']:6.2f} s   (was 36-49 s): "
          f"{marks['new_signature_outcome'][:90]}")
    kind = "fresh build root prewarmed as setup.sh does" if args.after_setup else "cold" if args.cold else "warm"
    print(f"({kind} build caches, {marks['cores']} cores)")


if __name__ == "__main__":
    main()
