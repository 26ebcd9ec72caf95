"""Is a GPU round loop dearer inside the candidate's sandbox than in the trusted worker's process?

The verifier clocks both sides' rounds with the parent's clock and subtracts the trusted stub (run by the
unsandboxed reference worker). On an H100 (session 14) the candidate's loop cost ~0.056 ms per call more
than the trusted one for a 5 µs ReLU, which its CUDA events did not see. This runs the same loop shape
(synchronise, L2 flush, events around a small op, synchronise, a copy of the output) in a plain process,
under bubblewrap with the verifier's syscall filter, and under bubblewrap without it, in one run.

    python benchmarks/gpu_loop_overhead.py [--calls 2000] [--cpu]   (--cpu: the CPU loop, no GPU needed)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def status() -> dict:
    """The process's seccomp and speculation-mitigation state: a seccomp filter can switch on SSBD (and
    STIBP) for the process on kernels whose `spec_store_bypass_disable` is `seccomp`, slowing its code."""
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(("Seccomp", "Speculation", "Cpus_allowed_list", "NoNewPrivs")):
            key, _, value = line.partition(":")
            out[key] = value.strip()
    return out


def cpu_loop(calls: int) -> dict:
    """The same question on the CPU: a torch op and a pure-Python loop, per call."""
    import torch

    x = torch.randn(512, 1024)
    for _ in range(50):
        torch.relu(x).clone()
    t0 = time.perf_counter()
    for _ in range(calls):
        torch.relu(x).clone()
    op_ms = (time.perf_counter() - t0) * 1e3 / calls
    t0 = time.perf_counter()
    acc = 0
    for i in range(calls * 1000):
        acc += i & 7
    py_ms = (time.perf_counter() - t0) * 1e3 / calls
    t0 = time.perf_counter()
    for _ in range(calls * 10):
        os.getppid()
    sys_us = (time.perf_counter() - t0) * 1e6 / (calls * 10)
    return {"cpu_relu_clone_ms": op_ms, "python_1000_adds_ms": py_ms, "getppid_us": sys_us}


def loop(calls: int) -> dict:
    if os.environ.get("EVK_LOOP_PIN"):  # as the verifier pins both sides' processes during the window
        os.sched_setaffinity(0, {int(os.environ["EVK_LOOP_PIN"])})
    if os.environ.get("EVK_LOOP_CPU"):
        return {**cpu_loop(calls), "status": status()}
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
    out.update(verifier_rounds(torch))
    out["status"] = status()
    return out


def verifier_rounds(torch) -> dict:
    """The verifier's own round loop (`time_round`) with the stub's ready model and with a real op, at a µs
    size (64 calls a round) and at 0.4 and 1.6 GB (one call a round), as both sides of the clock run it:
    median ms of a round over 15 rounds after 3 warm-ups, and the allocator's driver allocations."""
    from verifier.clock.paired_calls import ready_model, time_round

    out: dict = {}
    for label, shape, count in (("v0", (16, 16384), 64), ("400MB", (100, 1 << 20), 1), ("1.6GB", (400, 1 << 20), 1)):
        x = torch.randn(*shape, device="cuda")
        ready = [[torch.relu(x)] for _ in range(min(count, 4))]
        for kind in ("stub", "relu"):
            model = ready_model(ready) if kind == "stub" else torch.relu
            walls = []
            for _ in range(18):
                sets = [[torch.randn(*shape, device="cuda")] for _ in range(count)]
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                time_round(torch, model, sets, "cuda")
                walls.append((time.perf_counter() - t0) * 1e3)
                del sets
            walls = sorted(walls[3:])
            out[f"round_{label}_{kind}_ms"] = round(walls[len(walls) // 2], 4)
        del x, ready
        torch.cuda.empty_cache()
    stats = torch.cuda.memory_stats()
    out["device_alloc"] = int(stats.get("num_device_alloc", 0))
    r, w = os.pipe()
    r2, w2 = os.pipe()
    if os.fork() == 0:
        for _ in range(2000):
            os.read(r, 1)
            os.write(w2, b"x")
        os._exit(0)
    t0 = time.perf_counter()
    for _ in range(2000):
        os.write(w, b"x")
        os.read(r2, 1)
    out["pipe_pingpong_us"] = round((time.perf_counter() - t0) * 1e6 / 2000, 2)
    return out


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        print(json.dumps(loop(int(sys.argv[2]))))
        return
    calls = int(sys.argv[sys.argv.index("--calls") + 1]) if "--calls" in sys.argv else 2000
    sys.path.insert(0, str(ROOT))
    import tempfile

    from verifier.sandbox.isolation import SandboxSpec, bwrap_argv, gpu_device_nodes, sandbox_command

    argv = [sys.executable, str(Path(__file__).resolve()), "--child", str(calls)]
    work = Path(tempfile.mkdtemp())
    spec = SandboxSpec(writable=[work], devices=gpu_device_nodes(), chdir=work)
    results: dict = {"host": {p: Path(f"/sys/devices/system/cpu/vulnerabilities/{p}").read_text().strip()
                              for p in ("spec_store_bypass", "spectre_v2")
                              if Path(f"/sys/devices/system/cpu/vulnerabilities/{p}").exists()}}
    print("host", results["host"], flush=True)
    for label in ("plain", "bwrap+filter", "bwrap", "plain pinned", "bwrap+filter pinned", "plain again"):
        fds: list[int] = []
        if label.startswith("plain"):
            cmd = argv
        elif label.startswith("bwrap") and "filter" not in label:
            cmd = bwrap_argv(spec, argv)
        else:
            cmd, fds = sandbox_command(spec, argv)
        env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
        if "--cpu" in sys.argv:
            env["EVK_LOOP_CPU"] = "1"
        if label.endswith("pinned"):
            env["EVK_LOOP_PIN"] = str(min(os.sched_getaffinity(0)))
        p = subprocess.run(cmd, capture_output=True, text=True, pass_fds=fds, env=env, timeout=120)
        for fd in fds:
            os.close(fd)
        line = next((ln for ln in reversed(p.stdout.splitlines()) if ln.startswith("{")), None)
        results[label] = json.loads(line) if line else {"error": (p.stderr or "no output")[-400:]}
        print(label, results[label], flush=True)
    if "--out" in sys.argv:
        Path(sys.argv[sys.argv.index("--out") + 1]).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
