"""Issue 36: `evokernel bench` over a fixed suite of GPU problems on 1 GPU and on N GPUs of one machine.

The suite is `benchmarks/multi_gpu_suite/level1/` (17 KernelBench level-1 problems at medium sizes, one
verification takes seconds) with an honest CUDA kernel for each in `benchmarks/multi_gpu_suite/kernels/`. The
model is `tests.fakes.kernel_model.KernelModel`, an OpenAI-compatible server on 127.0.0.1 that replies to each
task with its kernel, reached through litellm (`--model openai/... --api-base`); where litellm is not
installed the same replies go through a `scripted:` file (`--model-mode scripted`; nothing else changes: the
verification being measured is the same). Every run is the real `evokernel bench` command line in its own
process: one draft step per task, no refinement, a fresh memory bank, the pool executor (and Ray if asked and
importable), `--gpus K` GPUs and the same number of task threads on every run.

Runs, in order, each only while the time budget allows: a cold pass on all N GPUs (it builds the shared
bindings and every kernel once, so the runs after it start equal), then 1 GPU, then N GPUs again, then the
same for Ray. Reported per run: verdicts, seconds, verdicts per minute, the card of every verdict; then the
N-GPU over 1-GPU throughput (target 1.8x on 2) and "timed beside another vs alone": each task's speedup in
the N-GPU run over its speedup in the 1-GPU run (the same kernel; target within 5%).

    python benchmarks/multi_gpu_bench.py [--results DIR] [--gpus all|N|0,1] [--executors pool[,ray]]
        [--tasks NAME,...] [--limit N] [--budget-s 530] [--model-mode auto|server|scripted] [--no-warmup]

Writes `multi_gpu_<date>_<device>[_<tag>].md`, `.json` and `.log` under --results after every run, with
the exact command, so a run cut short still leaves what it measured. Without a GPU it prints one line and
exits 0.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SUITE = ROOT / "benchmarks" / "multi_gpu_suite"
PROBLEMS = SUITE / "level1"
KERNELS = SUITE / "kernels"
EXECUTORS = ("pool", "ray")
MODEL_MODES = ("auto", "server", "scripted")
#: the issue's targets
THROUGHPUT_TARGET = 1.8
AGREEMENT = 0.05


class Skip(Exception):
    """Nothing to measure on this machine (no GPU): one line, exit 0."""


@dataclass
class RunPlan:
    label: str
    executor: str
    gpus: int
    warmup: bool = False

    @property
    def weight(self) -> float:
        """Its expected share of the time, relative to the others (1 GPU: the most; the cold pass builds)."""
        return (1.5 if self.warmup else 1.0) * (2.0 if self.gpus == 1 else 1.0)


def time_limit(plans: list[RunPlan], left: float) -> float:
    """The first of the remaining `plans` gets its weight's share of the time `left` (what it does not use
    goes to the ones after it), less 10 s to stop and write."""
    return max(1.0, left * plans[0].weight / sum(p.weight for p in plans) - 10.0)


@dataclass
class RunRecord:
    label: str
    executor: str
    gpus: int
    workers: int
    command: str
    out: str
    warmup: bool = False
    exit_code: int | None = None
    timed_out: bool = False
    timeout_s: float | None = None
    seconds: float = 0.0
    bench_seconds: float | None = None
    #: the seconds its verdicts per minute are over (its limit when it was stopped there)
    span_s: float = 0.0
    tasks: int = 0
    verdicts: int = 0
    no_verdict: int = 0
    feasible: int = 0
    errors: int = 0
    verdicts_per_min: float | None = None
    devices: dict[str, int] = field(default_factory=dict)
    outcomes: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""


# --------------------------------------------------------------------------- arguments


def suite_names() -> list[str]:
    """The suite's problems, in KernelBench order (problem number)."""
    def number(p: Path) -> int:
        m = re.match(r"(\d+)_", p.name)
        return int(m.group(1)) if m else 10**6

    return [p.stem for p in sorted(PROBLEMS.glob("*.py"), key=lambda p: (number(p), p.name))]


def kernels_for(names: list[str]) -> dict[str, str]:
    missing = [n for n in names if not (KERNELS / f"{n}.py").is_file()]
    if missing:
        raise SystemExit(f"multi_gpu_bench: no kernel for {', '.join(missing)} in {KERNELS}")
    return {n: (KERNELS / f"{n}.py").read_text(encoding="utf-8") for n in names}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results", help="where the .md/.json/.log go")
    ap.add_argument("--work", type=Path, default=None, help="bench output folders (default: a new folder in /tmp)")
    ap.add_argument("--gpus", default="all", help="GPUs of the widest run: all, a count N, or ids such as 0,1")
    ap.add_argument("--counts", default=None, help="GPU counts to run, e.g. 1,2 (default: 1 and all of --gpus)")
    ap.add_argument("--executors", default="pool", help="pool, ray or pool,ray (Ray only where it is importable)")
    ap.add_argument("--tasks", default=None, help="suite problems to run (names or numbers, comma separated)")
    ap.add_argument("--limit", type=int, default=None, help="the first N problems of the suite")
    ap.add_argument("--budget-s", type=float, default=500.0, help="wall-clock budget for all runs (seconds)")
    ap.add_argument("--model-mode", choices=MODEL_MODES, default="auto",
                    help="server (litellm to 127.0.0.1), scripted (no socket), auto: server if litellm imports")
    ap.add_argument("--threads-per-gpu", type=int, default=2,
                    help="task threads per GPU of the widest run, the same on every run (model and host work overlap)")
    ap.add_argument("--no-warmup", action="store_true", help="skip the cold pass that builds every kernel first")
    ap.add_argument("--tag", default="", help="suffix of the result files")
    args = ap.parse_args(argv)
    names = suite_names()
    if args.tasks:
        wanted = [t.strip() for t in args.tasks.split(",") if t.strip()]
        picked = []
        for w in wanted:
            hits = [n for n in names if n == w or n.split("_", 1)[0] == w]
            if not hits:
                ap.error(f"--tasks: {w} is not in the suite ({', '.join(names)})")
            picked += [h for h in hits if h not in picked]
        names = [n for n in names if n in picked]
    if args.limit is not None:
        if args.limit < 1:
            ap.error("--limit must be 1 or more")
        names = names[: args.limit]
    args.names = names
    executors = [e.strip() for e in args.executors.split(",") if e.strip()]
    bad = [e for e in executors if e not in EXECUTORS]
    if bad or not executors:
        ap.error(f"--executors takes pool, ray or pool,ray, not {args.executors!r}")
    args.executor_list = executors
    if args.counts is not None:
        try:
            counts = sorted({int(c) for c in args.counts.split(",") if c.strip()})
        except ValueError:
            ap.error(f"--counts takes numbers such as 1,2, not {args.counts!r}")
        if not counts or counts[0] < 1:
            ap.error("--counts must be 1 or more")
        args.count_list = counts
    else:
        args.count_list = None
    if args.budget_s <= 0:
        ap.error("--budget-s must be positive")
    if args.threads_per_gpu < 1:
        ap.error("--threads-per-gpu must be 1 or more")
    return args


# --------------------------------------------------------------------------- the machine


def machine_gpus(spec: str, detect: Callable[[], list[str]] | None = None,
                 cuda_ok: Callable[[], tuple[bool, str]] | None = None) -> list[str]:
    """The GPUs of the widest run, or Skip (one line) when this machine has none torch can use."""
    from core.executors import ExecutorError, choose_gpus, detect_gpus

    visible = (detect or detect_gpus)()
    if not visible:
        raise Skip("no GPU visible (CUDA_VISIBLE_DEVICES, nvidia-smi and torch see none)")
    ok, why = (cuda_ok or torch_cuda)()
    if not ok:
        raise Skip(f"{len(visible)} GPU(s) listed but torch cannot use CUDA here ({why})")
    try:
        return choose_gpus(spec, visible)
    except ExecutorError as exc:
        raise SystemExit(f"multi_gpu_bench: {exc}") from None


def torch_cuda() -> tuple[bool, str]:
    try:
        import torch
    except ImportError:
        return False, "torch is not installed"
    if not torch.cuda.is_available():
        return False, f"torch {torch.__version__} sees no CUDA device"
    return True, f"torch {torch.__version__}, CUDA {torch.version.cuda}"


def device_name() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20).stdout.strip().splitlines()
        return out[0].strip() if out else "unknown GPU"
    except (OSError, subprocess.SubprocessError):
        return "unknown GPU"


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "device"


def ray_importable() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def litellm_importable() -> bool:
    try:
        import litellm  # noqa: F401
    except ImportError:
        return False
    return True


def plan_runs(widest: int, executors: list[str], counts: list[int] | None, warmup: bool,
              have_ray: bool) -> tuple[list[RunPlan], list[str]]:
    """The runs in order, and a note for each executor left out."""
    counts = sorted(set(counts or [1, widest]))
    notes = []
    plans: list[RunPlan] = []
    for ex in executors:
        if ex == "ray" and not have_ray:
            notes.append("ray: not run (Ray is not importable here; carry its wheel or run on a machine with it)")
            continue
        if warmup and not plans:
            plans.append(RunPlan(f"{ex} {widest} GPU{'s' if widest != 1 else ''} (cold: builds)", ex, widest, True))
        for c in counts:
            if c > widest:
                notes.append(f"{ex} on {c} GPUs: not run (only {widest} chosen)")
                continue
            plans.append(RunPlan(f"{ex} {c} GPU{'s' if c != 1 else ''}", ex, c))
    return plans, notes


# --------------------------------------------------------------------------- one run


def bench_command(plan: RunPlan, gpus: list[str], names: list[str], out: Path, model_args: list[str],
                  workers: int) -> list[str]:
    chosen = ",".join(gpus[: plan.gpus]) + ("," if plan.gpus == 1 else "")
    return [sys.executable, "-m", "evokernel_tui.cli", "bench", "--kernelbench", str(SUITE), "--levels", "1",
            "--tasks", ",".join(names), "--backend", "cuda", "--executor", plan.executor, "--gpus", chosen,
            "--workers", str(workers), "--draft-steps", "1", "--refine-steps", "0", "--fresh-memory",
            "--out", str(out), *model_args]


def run_command(cmd: list[str], timeout_s: float, log: Path) -> tuple[int | None, bool, float]:
    """Run one bench in its own process group; (exit code, timed out, seconds). Its output goes to `log`."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "EVOKERNEL_MODEL_LESSONS": "0"}
    start = time.monotonic()
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(f"\n== {dt.datetime.now(dt.UTC):%H:%M:%S} {shlex.join(cmd)}\n")
        fh.flush()
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            code: int | None = proc.wait(timeout=max(1.0, timeout_s))
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGINT)  # bench stops starting tasks and leaves the rest resumable
            try:
                code = proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                code = proc.wait()
        seconds = time.monotonic() - start
        fh.write(f"== exit {code}{' (stopped at its time limit)' if timed_out else ''} after {seconds:.1f} s\n")
    return code, timed_out, seconds


def read_run(record: RunRecord) -> RunRecord:
    """Fill a record's figures from its bench.json (what finished, even when the run was cut short)."""
    path = Path(record.out) / "bench.json"
    if not path.exists():
        record.note = record.note or "no bench.json"
        return record
    data = json.loads(path.read_text(encoding="utf-8"))
    outcomes = [o for o in data.get("outcomes", []) if not o.get("skipped")]
    record.outcomes = [{k: o.get(k) for k in ("task", "feasible", "speedup", "best_ms", "noisy", "kernels",
                                               "devices", "best_device", "seconds", "error", "compiled")}
                       for o in outcomes]
    record.tasks = len(outcomes)
    record.errors = sum(1 for o in outcomes if o.get("error"))
    # a verdict is a kernel the verifier judged (a crashed verification has a kernel and no verdict, no card)
    record.verdicts = sum(sum(1 for d in o.get("devices") or [] if d) if o.get("devices") is not None
                          else int(o.get("kernels") or 0) for o in outcomes if not o.get("error"))
    record.no_verdict = sum(int(o.get("kernels") or 0) for o in outcomes if not o.get("error")) - record.verdicts
    record.feasible = sum(1 for o in outcomes if o.get("feasible"))
    counts: dict[str, int] = {}
    for o in outcomes:
        for d in o.get("devices") or []:
            if d:
                counts[d] = counts.get(d, 0) + 1
    record.devices = dict(sorted(counts.items()))
    if data.get("started") and data.get("updated"):
        record.bench_seconds = round(float(data["updated"]) - float(data["started"]), 1)
    # a run stopped at its limit is counted up to the limit (not the seconds it took to stop)
    span = min(record.seconds, record.timeout_s) if record.timed_out and record.timeout_s else record.seconds
    record.span_s = span
    if span > 0:
        record.verdicts_per_min = round(record.verdicts / (span / 60.0), 2)
    return record


# --------------------------------------------------------------------------- analysis and report


def throughput(records: list[RunRecord]) -> list[dict[str, Any]]:
    """Per executor: each measured run's verdicts per minute over the 1-GPU run's."""
    rows = []
    for ex in sorted({r.executor for r in records}):
        measured = [r for r in records if r.executor == ex and not r.warmup and r.verdicts_per_min]
        one = next((r for r in measured if r.gpus == 1), None)
        for r in measured:
            if r.gpus == 1 or one is None or not one.verdicts_per_min:
                continue
            ratio = (r.verdicts / r.span_s) / (one.verdicts / one.span_s)
            rows.append({"executor": ex, "gpus": r.gpus, "per_min": r.verdicts_per_min, "one_gpu_per_min": one.verdicts_per_min,
                         "ratio": round(ratio, 3), "target": THROUGHPUT_TARGET if r.gpus == 2 else None,
                         "met": ratio >= THROUGHPUT_TARGET if r.gpus == 2 else None,
                         "complete": not r.timed_out and not one.timed_out})
    return rows


def beside_vs_alone(records: list[RunRecord]) -> list[dict[str, Any]]:
    """Each task's speedup in the widest measured run (timed beside others) over the 1-GPU run's (alone)."""
    rows = []
    for ex in sorted({r.executor for r in records}):
        measured = [r for r in records if r.executor == ex and not r.warmup]
        alone = next((r for r in measured if r.gpus == 1), None)
        beside = max((r for r in measured if r.gpus > 1), key=lambda r: r.gpus, default=None)
        if alone is None or beside is None:
            continue
        b_by = {o["task"]: o for o in beside.outcomes}
        for a in alone.outcomes:
            b = b_by.get(a["task"])
            if b is None or not (a.get("feasible") and b.get("feasible") and a.get("speedup") and b.get("speedup")):
                continue
            ratio = b["speedup"] / a["speedup"]
            noisy = bool(a.get("noisy") or b.get("noisy"))
            ms = b["best_ms"] / a["best_ms"] if a.get("best_ms") and b.get("best_ms") else None
            rows.append({"executor": ex, "task": a["task"], "alone": a["speedup"], "beside": b["speedup"],
                         "ratio": round(ratio, 4), "latency_ratio": round(ms, 4) if ms else None, "noisy": noisy,
                         "within": abs(ratio - 1.0) <= AGREEMENT, "alone_on": a.get("best_device", ""),
                         "beside_on": b.get("best_device", ""), "beside_gpus": beside.gpus})
    return rows


def short(label: str) -> str:
    card = (label or "").rsplit(" · ", 1)[-1]
    return card.split(" (", 1)[0] if card.startswith("GPU ") else (card or "-")


def render(report: dict[str, Any]) -> str:
    lines = [f"# bench on 1 and {report['widest']} GPUs ({report['device']}, {report['date']})", "",
             f"Command: `{report['command']}`", "",
             f"{report['environment']}; model: {report['model_mode']}; suite: {len(report['tasks'])} problems of "
             f"`benchmarks/multi_gpu_suite` ({', '.join(report['tasks'])}); one draft step per task, no refinement; "
             f"{report['workers']} task threads on every run; GPUs {','.join(report['gpus'])}.", ""]
    lines += ["## Runs", "", "| run | exit | s | verdicts | feasible | errors | verdicts/min | verdicts per card |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    lost = [f"{r['label']}: {r['no_verdict']} kernel(s) with no verdict (the verification crashed; see the log)"
            for r in report["runs"] if r.get("no_verdict")]
    for r in report["runs"]:
        cards = ", ".join(f"{short(d)} ×{n}" for d, n in r["devices"].items()) or "-"
        code = "timeout" if r["timed_out"] else str(r["exit_code"])
        lines.append(f"| {r['label']} | {code} | {r['seconds']:.1f} | {r['verdicts']} | {r['feasible']} | {r['errors']} | "
                     f"{r['verdicts_per_min'] if r['verdicts_per_min'] is not None else '-'} | {cards} |")
    notes = report["notes"] + lost
    lines += [""] + [f"- {n}" for n in notes] + ([""] if notes else [])
    lines += ["## Throughput (measured runs, not the cold pass)", ""]
    if report["throughput"]:
        lines += ["| executor | GPUs | verdicts/min | 1 GPU | ratio | target | met |", "| --- | --- | --- | --- | --- | --- | --- |"]
        for t in report["throughput"]:
            met = "-" if t["met"] is None else ("yes" if t["met"] else "NO")
            lines.append(f"| {t['executor']} | {t['gpus']} | {t['per_min']} | {t['one_gpu_per_min']} | {t['ratio']:.2f}x | "
                         f"{t['target'] or '-'} | {met}{'' if t['complete'] else ' (a run was cut short)'} |")
    else:
        lines.append("No pair of measured runs to compare.")
    lines += ["", f"## Timed beside another vs alone (the same kernel's speedup; target within {AGREEMENT:.0%})", ""]
    rows = report["beside_vs_alone"]
    if rows:
        lines += ["| executor | task | alone | beside | ratio | latency ratio | noisy | within 5% | alone on | beside on |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for b in rows:
            lat = f"{b['latency_ratio']:.3f}" if b["latency_ratio"] else "-"
            lines.append(f"| {b['executor']} | {b['task']} | {b['alone']:.3f} | {b['beside']:.3f} | {b['ratio']:.3f} | "
                         f"{lat} | {'yes' if b['noisy'] else ''} | {'yes' if b['within'] else 'NO'} | "
                         f"{short(b['alone_on'])} | {short(b['beside_on'])} |")
        a = report["agreement"]
        lines += ["", f"Within 5%: {a['within']} of {a['pairs']} pairs; {a['within_clean']} of {a['clean']} where "
                      "neither speedup is noisy."]
    else:
        lines.append("No task was feasible in both a 1-GPU and a wider run.")
    return "\n".join(lines) + "\n"


def build_report(args: argparse.Namespace, records: list[RunRecord], *, gpus: list[str], device: str, env: str,
                 model_mode: str, command: str, notes: list[str], workers: int, date: str) -> dict[str, Any]:
    pairs = beside_vs_alone(records)
    clean = [p for p in pairs if not p["noisy"]]
    return {"kind": "evokernel-multi-gpu-bench", "date": date, "device": device, "command": command,
            "environment": env, "gpus": gpus, "widest": len(gpus), "workers": workers, "model_mode": model_mode,
            "tasks": args.names, "notes": notes, "runs": [asdict(r) for r in records],
            "throughput": throughput(records), "beside_vs_alone": pairs,
            "agreement": {"pairs": len(pairs), "within": sum(p["within"] for p in pairs), "clean": len(clean),
                          "within_clean": sum(p["within"] for p in clean)}}


def result_paths(results: Path, date: str, device: str, tag: str) -> tuple[Path, Path, Path]:
    stem = f"multi_gpu_{date}_{slug(device)}" + (f"_{slug(tag)}" if tag else "")
    return results / f"{stem}.md", results / f"{stem}.json", results / f"{stem}.log"


def write_report(report: dict[str, Any], md: Path, js: Path) -> None:
    md.parent.mkdir(parents=True, exist_ok=True)
    js.write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")
    md.write_text(render(report), encoding="utf-8")


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None, *, detect: Callable[[], list[str]] | None = None,
         cuda_ok: Callable[[], tuple[bool, str]] | None = None,
         runner: Callable[[list[str], float, Path], tuple[int | None, bool, float]] = run_command) -> int:
    args = parse_args(argv)
    command = "python benchmarks/multi_gpu_bench.py " + shlex.join(sys.argv[1:] if argv is None else argv)
    try:
        gpus = machine_gpus(args.gpus, detect, cuda_ok)
    except Skip as why:
        print(f"multi_gpu_bench: skipped: {why}")
        return 0
    started = time.monotonic()
    device = device_name()
    date = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
    md, js, log = result_paths(args.results, date, device, args.tag)
    log.parent.mkdir(parents=True, exist_ok=True)
    work = args.work or Path(f"/tmp/evk-multi-gpu-{int(time.time())}")
    work.mkdir(parents=True, exist_ok=True)
    mode = args.model_mode if args.model_mode != "auto" else ("server" if litellm_importable() else "scripted")
    if mode == "server" and not litellm_importable():
        raise SystemExit("multi_gpu_bench: --model-mode server needs litellm; use --model-mode scripted")
    plans, notes = plan_runs(len(gpus), args.executor_list, args.count_list, not args.no_warmup, ray_importable())
    if mode == "scripted":
        notes.append("model: per-task scripted replies (litellm is not installed here); the kernels and the "
                     "verification are the same as with the 127.0.0.1 server")
    workers = args.threads_per_gpu * len(gpus)
    kernels = kernels_for(args.names)
    _, env = (cuda_ok or torch_cuda)()
    records: list[RunRecord] = []

    def flush() -> dict[str, Any]:
        report = build_report(args, records, gpus=gpus, device=device, env=env, model_mode=mode, command=command,
                              notes=notes, workers=workers, date=date)
        write_report(report, md, js)
        return report

    from tests.fakes.kernel_model import KernelModel, scripted_replies

    server = KernelModel(kernels) if mode == "server" else None
    if server is not None:
        server.__enter__()
        model_args = ["--model", "openai/multi-gpu-kernels", "--api-base", server.api_base]
    else:
        script = work / "replies.json"
        script.write_text(json.dumps(scripted_replies(kernels)), encoding="utf-8")
        model_args = ["--model", f"scripted:{script}"]
    try:
        spent = 0.0  # the runs' own seconds (the wall clock since the start, where that is more)
        for i, plan in enumerate(plans):
            left = args.budget_s - max(spent, time.monotonic() - started)
            if left < 45:
                notes.append(f"{plan.label}: not run ({left:.0f} s of the {args.budget_s:.0f} s budget left)")
                continue
            out = work / f"run{i}-{plan.executor}-{plan.gpus}gpu"
            cmd = bench_command(plan, gpus, args.names, out, model_args, workers)
            limit = time_limit(plans[i:], left)
            print(f"multi_gpu_bench: {plan.label} (at most {limit:.0f} s)", flush=True)
            code, timed_out, seconds = runner(cmd, limit, log)
            spent += seconds
            record = read_run(RunRecord(plan.label, plan.executor, plan.gpus, workers, shlex.join(cmd), str(out),
                                        plan.warmup, code, timed_out, round(limit, 1), round(seconds, 1)))
            records.append(record)
            if plan.warmup and timed_out:
                notes.append(f"{plan.label} was cut short: the runs after it may build kernels it did not reach "
                             "(the 1-GPU run first, which favours the wider runs); raise --budget-s or lower --limit")
            print(f"multi_gpu_bench: {plan.label}: {record.verdicts} verdicts in {seconds:.1f} s "
                  f"({record.verdicts_per_min} per min){' — cut short' if timed_out else ''}", flush=True)
            flush()
    finally:
        if server is not None:
            server.__exit__(None, None, None)
    report = flush()
    for t in report["throughput"]:
        print(f"multi_gpu_bench: {t['executor']} on {t['gpus']} GPUs: {t['ratio']:.2f}x the verdicts per minute of 1 GPU")
    a = report["agreement"]
    print(f"multi_gpu_bench: beside vs alone within 5%: {a['within']} of {a['pairs']} ({a['within_clean']} of "
          f"{a['clean']} not noisy); wrote {md} and {js}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
