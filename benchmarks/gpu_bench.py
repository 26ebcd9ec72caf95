"""GPU benchmark: verify honest CUDA and Triton kernels and hostile GPU candidates on this machine's GPU,
and compare the verifier's CUDA-event timing with `triton.testing.do_bench` on the same kernels.

    python benchmarks/gpu_bench.py [--build-root DIR] [--results benchmarks/results]

Writes `gpu_<date>_<device>.md` (and `.json`) under --results with the exact command and every figure.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CANDIDATES = ROOT / "tests" / "candidates"
HONEST = [("cuda", "relu"), ("cuda", "softmax_rows"), ("cuda", "matmul"), ("cuda", "layernorm"),
          ("triton", "relu"), ("triton", "softmax_rows"), ("triton", "matmul")]
HOSTILE = [  # file, task, backend, expected rule
    ("cublas_at_matmul", "matmul", "cuda", "cpp-torch-op"),
    ("cublas_macro", "matmul", "cuda", "reference-op-at-runtime"),
    ("cublas_ldflags", "matmul", "cuda", "cpp-library"),
    ("side_stream_python", "relu", "triton", "gpu-stream"),
    ("side_stream_macro", "relu", "cuda", "unsynchronised-work"),
    ("cpp_side_stream", "relu", "cuda", "gpu-stream"),
    ("cuda_graph_replay", "relu", "cuda", "cuda-graph"),
    ("cpp_graph_launch", "relu", "cuda", "cuda-graph"),
    ("event_timing_abuse", "relu", "cuda", "gpu-stream"),
]
TOLERANCE = 0.05


def _task_source(name: str) -> str:
    from core.tasks import load_task

    return load_task(name).source


def _verify(backend: str, task: str, path: Path, config):
    from verifier import verify

    return verify(_task_source(task), path.read_text(), backend=backend, config=config)


def _rules(res) -> list[str]:
    gate = next(g for g in res.gates if g.name == "anti_hacking")
    return [v["rule"] for v in gate.detail.get("violations", [])] or ([gate.detail["rule"]] if "rule" in gate.detail else [])


def warm_builds(config, workers: int = 4) -> float:
    """Build every CUDA candidate in parallel (correctness only) so the timed runs find their builds cached."""
    from dataclasses import replace

    quick = replace(config, time_kernels=False, trials=1)
    jobs = [("cuda", t, CANDIDATES / "cuda" / f"{t}.py") for b, t in HONEST if b == "cuda"]
    jobs += [(b, t, CANDIDATES / "hostile_gpu" / f"{f}.py") for f, t, b, _ in HOSTILE if b == "cuda"]
    start = time.monotonic()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda j: _verify(j[0], j[1], j[2], quick), jobs))
    return time.monotonic() - start


def load_candidate(backend: str, task: str, build_root: str):
    """Import an honest candidate in this process (builds come from the verifier's cache) with its inputs."""
    import torch

    from verifier.backends import cuda as cuda_backend

    if backend == "cuda":
        cuda_backend.install({"build_root": build_root, "build_timeout_s": 600}, {"calls": 0}, {})
    ns: dict = {"__name__": f"bench_{backend}_{task}"}
    path = CANDIDATES / backend / f"{task}.py"
    exec(compile(path.read_text(), str(path), "exec"), ns)
    task_ns: dict = {"__name__": f"task_{task}"}
    exec(compile(_task_source(task), f"<{task}>", "exec"), task_ns)
    torch.manual_seed(0)
    model = ns["ModelNew"](*task_ns["get_init_inputs"]()).cuda().eval()
    ref = task_ns["Model"](*task_ns["get_init_inputs"]()).cuda().eval()
    inputs = [x.cuda() for x in task_ns["get_inputs"]()]
    return model, ref, inputs


def compare_with_do_bench(model, inputs) -> dict:
    """Median milliseconds from our CUDA-event clock and from triton's do_bench, same kernel, same process."""
    import torch
    from triton.testing import do_bench

    from verifier.gpu_timing import CudaClock
    from verifier.harness import Progress

    clock = CudaClock(torch)
    with torch.no_grad():
        ours = clock.time_calls(model, inputs, 10, 100, 1000, 0.3, Progress(None))["times_ms"]
        theirs = do_bench(lambda: model(*inputs), warmup=25, rep=300, return_mode="median")
    ours_med = sorted(ours)[len(ours) // 2]
    return {"ours_ms": ours_med, "do_bench_ms": theirs, "ratio": ours_med / theirs, "reps": len(ours)}


def _pct(xs: list[float], q: int) -> float | None:
    return sorted(xs)[min(len(xs) - 1, len(xs) * q // 100)] if xs else None


def _fmt(x, spec=".4f") -> str:
    return "-" if x is None else format(x, spec)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-root", default=None, help="build and reference cache (default: the verifier's)")
    ap.add_argument("--results", default=str(ROOT / "benchmarks" / "results"))
    args = ap.parse_args(argv)

    import torch

    from verifier import VerifyConfig
    from verifier.backends import BackendUnavailable, get_backend

    try:
        get_backend("cuda").check_available()
    except BackendUnavailable as exc:
        print(f"gpu_bench: {exc}")
        return 2
    config = VerifyConfig(build_root=args.build_root)
    build_root = str(config.root())
    device = torch.cuda.get_device_name()
    lines = [f"# GPU benchmark, {dt.date.today().isoformat()}, {device}", "",
             f"Command: `{' '.join(['python', *sys.argv])}`", "",
             f"torch {torch.__version__} (CUDA {torch.version.cuda}), python {platform.python_version()}, "
             f"build root `{build_root}`", ""]
    record: dict = {"device": device, "date": dt.date.today().isoformat(), "command": sys.argv, "honest": [],
                    "hostile": [], "do_bench": []}

    warm = warm_builds(config)
    lines += [f"Parallel warm-up builds (4 workers, correctness only): {warm:.1f} s", ""]
    print(lines[-2], flush=True)

    lines += ["## Honest kernels", "",
              "| backend | task | outcome | gates | build s | latency ms (IQR) | runs | torch eager ms | speedup | verify s |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for backend, task in HONEST:
        res = _verify(backend, task, CANDIDATES / backend / f"{task}.py", config)
        gates = " ".join(f"{g.name[:4]}:{g.status}" for g in res.gates)
        lat = next((g for g in res.gates if g.name == "latency"), None)
        comp = next((g for g in res.gates if g.name == "compile"), None)
        iqr = lat.detail.get("iqr_ms") if lat else None
        runs = lat.detail.get("runs") if lat else None
        failed = next((f"{g.name}: {g.reason}" for g in res.gates if g.status == "fail"), "")
        row = (f"| {backend} | {task} | {res.outcome} | {gates} | {_fmt(comp.seconds if comp else None, '.1f')} | "
               f"{_fmt(res.latency_ms)} ({_fmt(iqr)}) | {runs or '-'} | {_fmt(res.reference_ms)} | "
               f"{_fmt(res.speedup, '.2f')} | {res.seconds:.1f} |")
        lines.append(row)
        print(row, failed, flush=True)
        times = lat.detail.get("times_ms", []) if lat else []
        record["honest"].append({"backend": backend, "task": task, "outcome": res.outcome, "latency_ms": res.latency_ms,
                                 "iqr_ms": iqr, "p10_ms": _pct(times, 10), "p90_ms": _pct(times, 90),
                                 "reference_ms": res.reference_ms, "speedup": res.speedup, "failed": failed,
                                 "top_ops": res.profile[:5]})

    lines += ["", "## Hostile GPU candidates", "", "| candidate | task | backend | outcome | expected rule | rules hit | caught |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, task, backend, rule in HOSTILE:
        res = _verify(backend, task, CANDIDATES / "hostile_gpu" / f"{name}.py", config)
        rules = _rules(res)
        caught = res.outcome == "hack_fail" and rule in rules
        row = f"| {name} | {task} | {backend} | {res.outcome} | {rule} | {', '.join(sorted(set(rules)))} | {'yes' if caught else 'NO'} |"
        lines.append(row)
        print(row, flush=True)
        reason = next((g.reason for g in res.gates if g.name == "anti_hacking"), "")
        record["hostile"].append({"name": name, "outcome": res.outcome, "expected": rule, "rules": rules,
                                  "caught": caught, "reason": reason})

    lines += ["", "## CUDA-event timing vs `triton.testing.do_bench` (same kernel, same process, medians)", "",
              f"Ours: L2 flushed (256 MB zeroed) before each call, events on the current stream, device synchronised "
              f"around each call. do_bench: warmup=25 ms, rep=300 ms, return_mode=median. Tolerance {TOLERANCE:.0%}.", "",
              "| kernel | ours ms | do_bench ms | ratio | reps | within 5% |", "| --- | --- | --- | --- | --- | --- |"]
    for backend, task in HONEST:
        model, ref, inputs = load_candidate(backend, task, build_root)
        for label, m in ((f"{backend}/{task}", model), (f"torch/{task}", ref)):
            if label.startswith("torch/") and backend != "cuda":
                continue
            cmp = compare_with_do_bench(m, inputs)
            ok = abs(cmp["ratio"] - 1.0) <= TOLERANCE
            row = (f"| {label} | {cmp['ours_ms']:.4f} | {cmp['do_bench_ms']:.4f} | {cmp['ratio']:.3f} | {cmp['reps']} | "
                   f"{'yes' if ok else 'NO'} |")
            lines.append(row)
            print(row, flush=True)
            record["do_bench"].append({"kernel": label, **cmp, "within": ok})
    verify_vs = []
    for h in record["honest"]:
        db = next((d for d in record["do_bench"] if d["kernel"] == f"{h['backend']}/{h['task']}"), None)
        if db and h["latency_ms"]:
            verify_vs.append((f"{h['backend']}/{h['task']}", h["latency_ms"], db["do_bench_ms"]))
    lines += ["", "Verifier's reported latency (sandboxed child) against do_bench (this process):", "",
              "| kernel | verify() ms | do_bench ms | ratio | within 5% |", "| --- | --- | --- | --- | --- |"]
    lines += [f"| {k} | {a:.4f} | {b:.4f} | {a / b:.3f} | {'yes' if abs(a / b - 1) <= TOLERANCE else 'NO'} |"
              for k, a, b in verify_vs]
    record["verify_vs_do_bench"] = [{"kernel": k, "verify_ms": a, "do_bench_ms": b} for k, a, b in verify_vs]

    out = Path(args.results)
    out.mkdir(parents=True, exist_ok=True)
    slug = re.sub(r"[^A-Za-z0-9]+", "-", device).strip("-").lower()
    stem = out / f"gpu_{dt.date.today().isoformat()}_{slug}"
    stem.with_suffix(".md").write_text("\n".join(lines) + "\n")
    stem.with_suffix(".json").write_text(json.dumps(record, indent=1, default=str))
    print("\n".join(lines))
    print(f"wrote {stem}.md", flush=True)
    bad = [h for h in record["hostile"] if not h["caught"]] + [h for h in record["honest"] if h["outcome"] != "feasible"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
