"""Is a GPU round loop dearer inside the candidate's sandbox than in the trusted worker's process?

The verifier clocks both sides' rounds with the parent's clock and subtracts the trusted stub (run by the
unsandboxed reference worker). On an H100 (session 14) the candidate's loop cost ~0.056 ms per call more
than the trusted one for a 5 µs ReLU, which its CUDA events did not see. This runs the same loop shape
(synchronise, L2 flush, events around a small op, synchronise, a copy of the output) in a plain process,
under bubblewrap with the verifier's syscall filter, and under bubblewrap without it, in one run.

    python benchmarks/gpu_loop_overhead.py [--calls 2000]
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def loop(calls: int) -> dict:
    import os

    if os.environ.get("EVK_LOOP_PIN"):  # as the verifier pins both sides' processes during the window
        os.sched_setaffinity(0, {int(os.environ["EVK_LOOP_PIN"])})
    import torch

    x = torch.randn(16, 16384, device="cuda")
    flush = torch.empty(256 << 18, dtype=torch.int32, device="cuda")
    out = {}
    for name, op in (("relu", torch.relu), ("none", None)):
        for _ in range(50):
            y = torch.relu(x)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            flush.zero_()
            s.record()
            y = op(x) if op is not None else x
            e.record()
            torch.cuda.synchronize()
            y.clone()
        torch.cuda.synchronize()
        out[name] = (time.perf_counter() - t0) * 1e3 / calls
    t0 = time.perf_counter()
    for _ in range(calls):
        torch.cuda.synchronize()
    out["sync_only"] = (time.perf_counter() - t0) * 1e3 / calls
    return out


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        print(json.dumps(loop(int(sys.argv[2]))))
        return
    calls = int(sys.argv[sys.argv.index("--calls") + 1]) if "--calls" in sys.argv else 2000
    sys.path.insert(0, str(ROOT))
    import os
    import tempfile

    from verifier.sandbox.isolation import SandboxSpec, bwrap_argv, gpu_device_nodes, sandbox_command

    argv = [sys.executable, str(Path(__file__).resolve()), "--child", str(calls)]
    work = Path(tempfile.mkdtemp())
    spec = SandboxSpec(writable=[work], devices=gpu_device_nodes(), chdir=work)
    results = {}
    for label in ("plain", "bwrap+filter", "bwrap", "plain pinned", "bwrap+filter pinned", "plain again"):
        fds: list[int] = []
        if label.startswith("plain"):
            cmd = argv
        elif label.startswith("bwrap") and "filter" not in label:
            cmd = bwrap_argv(spec, argv)
        else:
            cmd, fds = sandbox_command(spec, argv)
        env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
        if label.endswith("pinned"):
            env["EVK_LOOP_PIN"] = str(min(os.sched_getaffinity(0)))
        p = subprocess.run(cmd, capture_output=True, text=True, pass_fds=fds, env=env, timeout=120)
        for fd in fds:
            os.close(fd)
        line = next((ln for ln in reversed(p.stdout.splitlines()) if ln.startswith("{")), None)
        results[label] = json.loads(line) if line else {"error": (p.stderr or "no output")[-400:]}
        print(label, results[label], flush=True)


if __name__ == "__main__":
    main()
