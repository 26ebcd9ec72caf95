"""GPU benchmark under the isolated verifier: honest CUDA and Triton kernels and hostile GPU candidates
verified on this machine's GPU (bubblewrap, device nodes bound, paired rounds with CUDA events and L2
flushes against the trusted reference worker), the split CUDA build's cold and changed-source times, an
A/A check (the reference against itself), the verifier's latencies against `triton.testing.do_bench`,
and the device memory before and after.

    python benchmarks/gpu_bench.py [--build-root DIR] [--results benchmarks/results] [--tag isolated]

Writes `gpu_<date>_<device>_<tag>.md` (and `.json`) under --results with the exact command and every
figure, rewritten after each section so a run cut short still leaves what it measured.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CANDIDATES = ROOT / "tests" / "candidates"
HONEST = [("cuda", "relu"), ("cuda", "softmax_rows"), ("cuda", "matmul"), ("cuda", "layernorm"),
          ("triton", "relu"), ("triton", "softmax_rows"), ("triton", "matmul")]
HOSTILE = [  # file, task, backend, rules that count as caught ("timed": not rejected but not faster either)
    ("cublas_at_matmul", "matmul", "cuda", {"cpp-torch-op"}),
    ("cublas_macro", "matmul", "cuda", {"reference-op-at-runtime", "binary-import", "vendor-kernel"}),
    ("cublas_ldflags", "matmul", "cuda", {"cpp-library"}),
    ("side_stream_python", "relu", "triton", {"gpu-stream"}),
    ("side_stream_macro", "relu", "cuda", {"unsynchronised-work", "timed"}),
    ("cpp_side_stream", "relu", "cuda", {"gpu-stream"}),
    ("cuda_graph_replay", "relu", "cuda", {"cuda-graph"}),
    ("cpp_graph_launch", "relu", "cuda", {"cuda-graph"}),
    ("event_timing_abuse", "relu", "cuda", {"gpu-stream"}),
]
AA_TASKS = ["relu", "softmax_rows", "layernorm", "matmul"]
TOLERANCE = 0.05
COLD_TARGET_S, CHANGED_TARGET_S = 25.0, 8.0


def _task_source(name: str) -> str:
    from core.tasks import load_task

    return load_task(name).source


def _verify(backend: str, task: str, source: str, config):
    from verifier import verify

    return verify(_task_source(task), source, backend=backend, config=config)


def _rules(res) -> list[str]:
    gate = next(g for g in res.gates if g.name == "anti_hacking")
    return [v["rule"] for v in gate.detail.get("violations", [])] or ([gate.detail["rule"]] if "rule" in gate.detail else [])


def _failed(res) -> str:
    return next((f"{g.name}: {g.reason}" for g in res.gates if g.status == "fail"), "")


def load_candidate(backend: str, task: str, build_root: str):
    """Import an honest candidate in this process (a build of its own under `build_root`) with its inputs."""
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
    """Median milliseconds from the verifier's own timed round (`runner.time_round`, CUDA events, L2
    flushed) and from triton's do_bench, same kernel, same process."""
    import torch
    from triton.testing import do_bench

    from verifier.clock.paired_calls import time_round

    with torch.no_grad():
        for _ in range(10):
            model(*inputs)
        ours, _ = time_round(torch, model, [inputs] * 300, "cuda", keep_outputs=False)
        theirs = do_bench(lambda: model(*inputs), warmup=25, rep=300, return_mode="median")
    ours_med = sorted(ours)[len(ours) // 2]
    return {"ours_ms": ours_med, "do_bench_ms": theirs, "ratio": ours_med / theirs, "reps": len(ours)}


def _fmt(x, spec=".4f") -> str:
    return "-" if x is None else format(x, spec)


class Report:
    """The markdown and JSON record, written out after every section."""

    def __init__(self, stem: Path, header: list[str], record: dict):
        self.stem, self.lines, self.record = stem, list(header), record

    def add(self, *lines: str, echo: bool = True) -> None:
        self.lines.extend(lines)
        if echo:
            for ln in lines:
                print(ln, flush=True)

    def write(self) -> None:
        self.stem.with_suffix(".md").write_text("\n".join(self.lines) + "\n")
        self.stem.with_suffix(".json").write_text(json.dumps(self.record, indent=1, default=str))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-root", default=None, help="build and reference cache (default: the verifier's)")
    ap.add_argument("--results", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--tag", default="isolated", help="suffix of the result files")
    ap.add_argument("--skip", default="", help="comma-separated sections to skip: honest,hostile,build,aa,dobench,memory")
    ap.add_argument("--honest", default="", help="only these honest kernels, e.g. cuda/relu,triton/relu (also for do_bench)")
    ap.add_argument("--aa", default=",".join(AA_TASKS), help="tasks for the A/A check")
    args = ap.parse_args(argv)
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    honest = [tuple(k.split("/", 1)) for k in args.honest.split(",") if "/" in k] or HONEST
    aa_tasks = [t for t in args.aa.split(",") if t]

    import torch

    from verifier import VerifyConfig
    from verifier.backends import BackendUnavailable, get_backend
    from verifier.backends.cuda import device_memory_mb, memory_left_behind

    try:
        get_backend("cuda").check_available()
    except BackendUnavailable as exc:
        print(f"gpu_bench: {exc}")
        return 2
    config = VerifyConfig(build_root=args.build_root, use_cache=False)
    build_root = str(config.root())
    device = torch.cuda.get_device_name()
    now = dt.datetime.now(dt.UTC)
    slug = re.sub(r"[^A-Za-z0-9]+", "-", device).strip("-").lower()
    out = Path(args.results)
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"gpu_{now.date().isoformat()}_{slug}_{args.tag}"
    header = [f"# GPU benchmark under the isolated verifier, {now.strftime('%Y-%m-%d %H:%M UTC')}, {device}", "",
              f"Command: `{' '.join(['python', *sys.argv])}`", "",
              f"torch {torch.__version__} (CUDA {torch.version.cuda}), python {platform.python_version()}, "
              f"build root `{build_root}`, isolation {'on' if config.isolate else 'OFF'}, timing budget "
              f"{config.timing_budget_s} s, rounds {config.min_rounds}-{config.max_rounds}, "
              f"gpu_memory_fraction {config.gpu_memory_fraction}", ""]
    record: dict = {"device": device, "date": now.isoformat(), "command": sys.argv, "honest": [], "hostile": [],
                    "build": [], "aa": [], "do_bench": []}
    rep = Report(stem, header, record)
    mem_start = device_memory_mb()

    if "build" not in skip:
        import time

        from verifier.build.shared_artefacts import COMMON_SIGNATURES, prewarm

        # What the app does at start (verifier.api.prewarm): the trusted side builds the commonest bindings.
        t0 = time.monotonic()
        (Path(build_root) / "shared").mkdir(parents=True, exist_ok=True)
        prewarm(Path(build_root) / "shared", flag_sets=(), signatures=COMMON_SIGNATURES)
        prewarm_s = time.monotonic() - t0
        rep.add("## Split CUDA build: cold and changed source (full verdicts)", "",
                f"Before the first row the trusted side built the bindings of the two commonest signatures, as "
                f"the app's start-up prewarm does: {prewarm_s:.1f} s. 'cold' is a kernel source never built before "
                "(nothing of it cached), in a fresh sandbox.", "",
                "| kernel | compile s | full verdict s | gates s | phases s | layout | steps | outcome | target |",
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        record["prewarm_s"] = prewarm_s
        src = (CANDIDATES / "cuda" / "relu.py").read_text()
        versions = [("cold (bindings prewarmed by the trusted side)", src, COLD_TARGET_S),
                    ("changed source", src.replace("const int threads = 256;", "const int threads = 128;"), CHANGED_TARGET_S),
                    ("changed again", src.replace("const int threads = 256;", "const int threads = 512;"), CHANGED_TARGET_S)]
        for label, text, target in versions:
            res = _verify("cuda", "relu", text, config)
            comp = res.gate("compile")
            build = (comp.detail.get("builds") or [{}])[0]
            ok = res.seconds <= target
            per_gate = ", ".join(f"{g.name[:4]} {g.seconds:.1f}" for g in res.gates if g.status != "skip")
            phases = ", ".join(f"{k} {v:.1f}" for k, v in res.phases.items())
            rep.add(f"| relu, {label} | {comp.seconds:.1f} | {res.seconds:.1f} | {per_gate} | {phases} | "
                    f"{build.get('layout', '-')} | "
                    f"{'; '.join(build.get('steps', []))} | {res.outcome} | ≤ {target:.0f} s: {'yes' if ok else 'NO'} |")
            record["build"].append({"label": label, "compile_s": comp.seconds, "verdict_s": res.seconds,
                                    "phases": res.phases,
                                    "gates_s": {g.name: g.seconds for g in res.gates},
                                    "build": build, "outcome": res.outcome, "failed": _failed(res)})
        rep.add("")
        rep.write()

    if "honest" not in skip:
        rep.add("## Honest kernels", "",
                "| backend | task | outcome | gates | build s | latency ms | reference ms | speedup [95% CI] | rounds × calls | "
                "sampled checks | verify s |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for backend, task in honest:
            res = _verify(backend, task, (CANDIDATES / backend / f"{task}.py").read_text(), config)
            gates = " ".join(f"{g.name[:4]}:{g.status}" for g in res.gates)
            lat = res.gate("latency")
            d = lat.detail if lat.passed else {}
            ci = f"{_fmt(res.speedup, '.2f')} [{_fmt(d.get('lo'), '.2f')}–{_fmt(d.get('hi'), '.2f')}]"
            if d.get("noisy"):
                ci += " noisy"
            rep.add(f"| {backend} | {task} | {res.outcome} | {gates} | {res.gate('compile').seconds:.1f} | "
                    f"{_fmt(res.latency_ms)} | {_fmt(res.reference_ms)} | {ci} | {d.get('rounds', '-')} × "
                    f"{d.get('calls_per_round', '-')} | {d.get('sampled_checks', '-')} | {res.seconds:.1f} |")
            if _failed(res):
                rep.add(f"  - failed: {_failed(res)[:300]}")
            record["honest"].append({"backend": backend, "task": task, "outcome": res.outcome, "isolated": res.isolated,
                                     "latency_ms": res.latency_ms, "reference_ms": res.reference_ms,
                                     "speedup": res.speedup, "timing": d, "failed": _failed(res), "notes": res.notes,
                                     "seconds": res.seconds, "top_ops": res.profile[:5]})
        rep.add("")
        rep.write()

    if "hostile" not in skip:
        rep.add("## Hostile GPU candidates", "", "| candidate | task | backend | outcome | expected | rules hit | caught |",
                "| --- | --- | --- | --- | --- | --- | --- |")
        for name, task, backend, wanted in HOSTILE:
            res = _verify(backend, task, (CANDIDATES / "hostile_gpu" / f"{name}.py").read_text(), config)
            rules = _rules(res)
            caught = res.outcome == "hack_fail" and bool(set(rules) & wanted)
            how = ""
            if not caught and "timed" in wanted and res.outcome == "feasible" and res.speedup is not None:
                caught = res.speedup < 1.0
                how = f" (timed with its hidden work: {res.speedup:.2f}×)"
            rep.add(f"| {name} | {task} | {backend} | {res.outcome} | {', '.join(sorted(wanted))} | "
                    f"{', '.join(sorted(set(rules)))} | {'yes' if caught else 'NO'}{how} |")
            if not caught:
                rep.add(f"  - {_failed(res)[:300] or res.notes}")
            reason = next((g.reason for g in res.gates if g.name == "anti_hacking"), "")
            record["hostile"].append({"name": name, "outcome": res.outcome, "expected": sorted(wanted), "rules": rules,
                                      "caught": caught, "reason": reason, "speedup": res.speedup})
        rep.add("")
        rep.write()

    if "aa" not in skip:
        from verifier.api import compare

        rep.add("## A/A: the reference against itself (verifier.api.compare, both copies sandboxed, paired rounds)", "",
                "| task | B/A speedup [95% CI] | A ms | B ms | trusted reference ms | A / trusted | within ±5% |",
                "| --- | --- | --- | --- | --- | --- | --- |")
        for task in aa_tasks:
            ref_src = _task_source(task).replace("class Model(", "class ModelNew(")
            got = compare(_task_source(task), ref_src, ref_src, backend="cuda", config=config)
            if "error" in got:
                rep.add(f"| {task} | error: {got['error'][:200]} | | | | | NO |")
                record["aa"].append({"task": task, **got})
                continue
            vs_trusted = got["a_ms"] / got["reference_ms"] if got.get("reference_ms") else None
            ok = abs(got["speedup"] - 1) <= TOLERANCE and (vs_trusted is None or abs(vs_trusted - 1) <= TOLERANCE)
            rep.add(f"| {task} | {got['speedup']:.3f} [{got['lo']:.3f}–{got['hi']:.3f}] | {got['a_ms']:.4f} | "
                    f"{got['b_ms']:.4f} | {_fmt(got.get('reference_ms'))} | {_fmt(vs_trusted, '.3f')} | "
                    f"{'yes' if ok else 'NO'} |")
            record["aa"].append({"task": task, **got, "a_over_trusted": vs_trusted, "within": ok})
        rep.add("")
        rep.write()

    if "dobench" not in skip:
        rep.add("## The verifier's timing against `triton.testing.do_bench` (medians)", "",
                "`time_round` (what both sides of a paired round run): L2 flushed (256 MB zeroed) before each call, "
                "CUDA events on the current stream, the host's clock for work off that stream. do_bench: warmup=25 ms, "
                f"rep=300 ms, return_mode=median. Tolerance {TOLERANCE:.0%}.", "",
                "| kernel | time_round ms | do_bench ms | ratio | within 5% | verify() latency ms | verify / do_bench |",
                "| --- | --- | --- | --- | --- | --- | --- |")
        dobench_root = str(Path(build_root) / "bench-inprocess")
        for backend, task in honest:
            try:
                model, ref, inputs = load_candidate(backend, task, dobench_root)
            except Exception as exc:  # noqa: BLE001 - reported as a row
                rep.add(f"| {backend}/{task} | could not load: {str(exc)[:200]} | | | NO | | |")
                continue
            verified = next((h for h in record["honest"] if h["backend"] == backend and h["task"] == task), None)
            for label, m in ((f"{backend}/{task}", model), (f"torch/{task}", ref)):
                if label.startswith("torch/") and backend != "cuda":
                    continue
                cmp = compare_with_do_bench(m, inputs)
                ok = abs(cmp["ratio"] - 1.0) <= TOLERANCE
                v_ms = (verified or {}).get("latency_ms") if not label.startswith("torch/") else \
                    (verified or {}).get("reference_ms")
                v_ratio = v_ms / cmp["do_bench_ms"] if v_ms else None
                rep.add(f"| {label} | {cmp['ours_ms']:.4f} | {cmp['do_bench_ms']:.4f} | {cmp['ratio']:.3f} | "
                        f"{'yes' if ok else 'NO'} | {_fmt(v_ms)} | {_fmt(v_ratio, '.3f')} |")
                record["do_bench"].append({"kernel": label, **cmp, "within": ok, "verify_ms": v_ms,
                                           "verify_over_do_bench": v_ratio})
            del model, ref, inputs
            torch.cuda.empty_cache()
        rep.add("")
        rep.write()

    if "memory" not in skip:
        mem_end = device_memory_mb()
        torch.cuda.empty_cache()
        mem_after = device_memory_mb()
        left = memory_left_behind(mem_start[0], mem_after[0], slack_mb=2048) if mem_start and mem_after else None
        rep.add("## Device memory (nvidia-smi)", "",
                f"At the start: {mem_start} MiB (used, total); at the end: {mem_end}; after this process freed its "
                f"cache: {mem_after} (the warm reference workers still hold theirs). Left behind beyond 2 GiB: "
                f"{left or 'none'}.", "")
        record["memory"] = {"start": mem_start, "end": mem_end, "after_empty_cache": mem_after, "left": left}
        rep.write()

    print(f"wrote {stem}.md", flush=True)
    bad = [h for h in record["hostile"] if not h["caught"]] + [h for h in record["honest"] if h["outcome"] != "feasible"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
