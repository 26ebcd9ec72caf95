"""End-to-end learning check through the real `evokernel bench` command line.

A model on 127.0.0.1 (`tests.fakes.memory_model.MemoryAwareModel`, OpenAI-compatible, reached
through litellm with `--model openai/... --api-base`) replies with a good kernel with probability
p_good when its prompt shows one of two helpful seed memories and p_base otherwise. The helpful
seeds are in value retrieval's pool for every built-in CPU task but never in similarity's top 5, so
only a policy that learns from rewards shows them. Everything between the command line and the
model is the real path (option parsing, `run_bench`, sessions, retrieval, prompts, rewards, Q
updates in a fresh seeded bank, start points, lessons, insights); only the verifier is the fake
that reads the verdict a kernel carries (`tests.fakes.verdicts.fake_verify`), so a run takes
seconds.

Per retrieval mode it reports: the share of kernel prompts that showed a helpful memory (first and
second half of the run), the share of good replies, the bench's correct rate, the learned values of
the helpful seeds against the other seeds, and consistency checks of the learning path (what the
prompt showed is what was retrieved, what was retrieved is what was credited, and every credit
reached the bank).

    python benchmarks/bench_learning_e2e.py [--seeds 0,1,2] [--tasks relu,gelu,...] [--write]
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.fakes.memory_model import HELPFUL_IDS, MemoryAwareModel  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
MODES = ("value", "similarity", "random")
TASKS = ("relu", "gelu", "sigmoid", "scale_add", "sum_rows", "mean_cols", "argmax_rows", "cumsum_rows",
         "softmax_rows", "log_softmax_rows", "layernorm", "rmsnorm")


@dataclass
class Run:
    mode: str
    seed: int
    prompts: list[dict[str, Any]] = field(default_factory=list)  # per kernel step, in run order
    correct_rate: float = 0.0
    q: dict[str, dict[str, float]] = field(default_factory=dict)  # helpful and other seeds' q1, q2, visits
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0
    model_requests: int = 0
    model_good: int = 0
    lost: int = 0

    def share(self, key: str, part: slice = slice(None), stage: str | None = None) -> float | None:
        rows = [p for p in self.prompts if stage is None or p["stage"] == stage]
        rows = rows[part]
        return sum(1 for p in rows if p[key]) / len(rows) if rows else None

    def halves(self, key: str, stage: str | None = None) -> tuple[float | None, float | None]:
        n = len([p for p in self.prompts if stage is None or p["stage"] == stage])
        return self.share(key, slice(0, n // 2), stage), self.share(key, slice(n // 2, None), stage)


def run_bench_cli(mode: str, out: Path, tasks: list[str], seed: int, model: MemoryAwareModel, *, draft_steps: int,
                  refine_steps: int, extra: list[str] | None = None) -> int:
    """`evokernel bench` in this process, with the fake verifier in place of the real one."""
    from click.testing import CliRunner

    import evokernel_tui.commands.bench as bench_cmd
    from evokernel_tui.cli import cli
    from tests.fakes.verdicts import fake_verify

    job, shapes = bench_cmd.JOB, bench_cmd.task_shapes
    bench_cmd.JOB, bench_cmd.task_shapes = fake_verify, (lambda task: "")
    try:
        args = ["bench", "--tasks", ",".join(tasks), "--model", "openai/memory-aware", "--api-base", model.api_base,
                "--executor", "inprocess", "--fresh-memory", "--retrieval", mode, "--seed", str(seed),
                "--draft-steps", str(draft_steps), "--refine-steps", str(refine_steps), "--out", str(out),
                *(extra or [])]
        result = CliRunner().invoke(cli, args, catch_exceptions=False)
    finally:
        bench_cmd.JOB, bench_cmd.task_shapes = job, shapes
    if result.exit_code != 0:
        raise RuntimeError(f"bench {mode} exited {result.exit_code}: {result.output[-2000:]}")
    return result.exit_code


def analyse(mode: str, seed: int, out: Path, model: MemoryAwareModel) -> Run:
    """Read the sessions' events and the bank back: what each prompt showed, what was credited."""
    from core.events import read_events
    from memory import MemoryStore

    run = Run(mode, seed)
    data = json.loads((out / "bench.json").read_text())
    run.correct_rate = data["summary"][-1]["correct_rate"] if data["summary"] else 0.0
    updates: dict[str, int] = {}
    for session in sorted((out / "sessions").iterdir()):
        retrieved: dict[str, Any] | None = None
        prompt: dict[str, Any] | None = None
        sources: dict[int, str] = {}
        for ev in read_events(session):
            d = ev.data
            if ev.kind == "kernel":
                sources[int(d["version"])] = d["source"]
            elif ev.kind == "retrieved":
                retrieved = d
            elif ev.kind == "prompt":
                text = "\n".join(m["content"] for m in d["messages"])
                ranked = [i["id"] for i in retrieved["items"] if i.get("chosen_by") != "rule"] if retrieved else []
                start = (retrieved or {}).get("start_point") or {}
                prompt = {"task": session.name, "stage": d["stage"], "ranked": ranked,
                          "start": start.get("id"),
                          "shown": any(h in ranked for h in HELPFUL_IDS),
                          "in_text": any(f"### {_title(h)}\n" in text for h in HELPFUL_IDS)}
                if prompt["shown"] != prompt["in_text"]:
                    run.problems.append(f"{session.name}: retrieved and prompt disagree on the helpful items")
                if start and sources.get(int(start["version"]), "").strip() not in text:
                    run.problems.append(f"{session.name}: the credited start point v{start['version']} is not the "
                                        "kernel the prompt refines")
            elif ev.kind == "reward" and prompt is not None:
                want = list(dict.fromkeys(prompt["ranked"] + ([prompt["start"]] if prompt["start"] else [])))
                credited = d.get("credited") or d.get("deferred") or []
                if sorted(credited) != sorted(want):
                    run.problems.append(f"{session.name} v{d.get('version')}: credited {credited} but showed {want}")
                prompt["reward"] = d.get("value")
                prompt["good"] = (d.get("raw", d.get("value")) or 0) > 0
                run.prompts.append(prompt)
                prompt = None
            elif ev.kind == "q_update":
                for c in d.get("changes", []):
                    key = f"{c['item_id']}/{c['stage']}"
                    updates[key] = updates.get(key, 0) + 1
    store = MemoryStore(out / "memory.json")
    try:
        seeds = list(store.items("seed"))
        for stage in ("draft", "refine"):
            for item in store.items():
                logged = updates.get(f"{item.id}/{stage}", 0)
                if item.visits(stage) != logged:
                    run.problems.append(f"{item.id}: {item.visits(stage)} {stage} visits in the bank, {logged} logged")
        logged_ids = {key.rsplit("/", 1)[0] for key in updates}
        lost = sorted(i for i in logged_ids if i not in store)
        run.lost = len(lost)  # credited items no longer in the bank (capped trajectories are dropped by design)
        helpful = [store.get(i) for i in HELPFUL_IDS]
        others = [i for i in seeds if i.id not in HELPFUL_IDS and (i.visits1 or i.visits2)]
        run.q = {"helpful": _q(helpful), "others": _q(others)}
    finally:
        store.close()
    run.model_requests = len(model.requests)
    run.model_good = sum(1 for r in model.requests if r.good)
    return run


def _title(item_id: str) -> str:
    from tests.fakes.memory_model import HELPFUL_TITLES

    return HELPFUL_TITLES[HELPFUL_IDS.index(item_id)]


def _q(items: list[Any]) -> dict[str, float]:
    def mean(xs: list[float]) -> float:
        return round(statistics.fmean(xs), 3) if xs else float("nan")

    return {"q1": mean([i.q1 for i in items if i.visits1]), "q2": mean([i.q2 for i in items if i.visits2]),
            "visits1": mean([i.visits1 for i in items]), "visits2": mean([i.visits2 for i in items])}


def one(mode: str, seed: int, tasks: list[str], root: Path, *, draft_steps: int = 4, refine_steps: int = 4,
        p_good: float = 0.8, p_base: float = 0.15, extra: list[str] | None = None) -> Run:
    out = root / f"{mode}-{seed}"
    start = time.monotonic()
    with MemoryAwareModel(seed=seed, p_good=p_good, p_base=p_base) as model:
        run_bench_cli(mode, out, tasks, seed, model, draft_steps=draft_steps, refine_steps=refine_steps, extra=extra)
        run = analyse(mode, seed, out, model)
    run.seconds = time.monotonic() - start
    return run


def fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def report(runs: dict[str, list[Run]], args: argparse.Namespace) -> str:
    lines = [
        "| retrieval | helpful shown (1st half / 2nd half) | draft shown | refine shown | good replies "
        "(1st / 2nd half) | correct tasks | helpful seeds q1 / q2 (visits) | other tried seeds q1 / q2 | problems |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for mode, rs in runs.items():
        def avg(f: Any, rs: list[Run] = rs) -> float | None:
            xs = [x for x in (f(r) for r in rs) if x is not None]
            return statistics.fmean(xs) if xs else None

        h1, h2 = avg(lambda r: r.halves("shown")[0]), avg(lambda r: r.halves("shown")[1])
        g1, g2 = avg(lambda r: r.halves("good")[0]), avg(lambda r: r.halves("good")[1])
        hq1, hq2 = avg(lambda r: _num(r.q["helpful"]["q1"])), avg(lambda r: _num(r.q["helpful"]["q2"]))
        hv1, hv2 = avg(lambda r: r.q["helpful"]["visits1"]), avg(lambda r: r.q["helpful"]["visits2"])
        oq1, oq2 = avg(lambda r: _num(r.q["others"]["q1"])), avg(lambda r: _num(r.q["others"]["q2"]))
        lines.append(
            f"| {mode} | {fmt(avg(lambda r: r.share('shown')))} ({fmt(h1)} / {fmt(h2)}) "
            f"| {fmt(avg(lambda r: r.share('shown', stage='draft')))} | {fmt(avg(lambda r: r.share('shown', stage='refine')))} "
            f"| {fmt(avg(lambda r: r.share('good')))} ({fmt(g1)} / {fmt(g2)}) | {fmt(avg(lambda r: r.correct_rate))} "
            f"| {fmt(hq1)} / {fmt(hq2)} ({fmt(hv1)} / {fmt(hv2)}) | {fmt(oq1)} / {fmt(oq2)} "
            f"| {sum(len(r.problems) for r in rs)} |")
    per_seed = ["", f"Per seed, share of kernel prompts showing a helpful memory ({' / '.join(runs)}):", ""]
    for i, seed in enumerate(args.seed_list):
        per_seed.append(f"- seed {seed}: " + " / ".join(fmt(runs[m][i].share("shown")) for m in runs)
                        + "; good replies " + " / ".join(fmt(runs[m][i].share("good")) for m in runs))
    return "\n".join(lines + per_seed)


def _num(v: float) -> float | None:
    return None if v != v else v  # NaN (never visited) -> None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--draft-steps", type=int, default=4)
    ap.add_argument("--refine-steps", type=int, default=4)
    ap.add_argument("--p-good", type=float, default=0.8)
    ap.add_argument("--p-base", type=float, default=0.15)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--extra", default="", help="More bench options for every run, e.g. '--refine-norm'.")
    ap.add_argument("--write", action="store_true", help="Append the figures to benchmarks/results/memory_learning_e2e.md.")
    args = ap.parse_args(argv)
    args.seed_list = [int(s) for s in args.seeds.split(",")]
    tasks = args.tasks.split(",")
    start = time.monotonic()
    runs: dict[str, list[Run]] = {m: [] for m in args.modes.split(",")}
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seed_list:
            for mode in runs:
                r = one(mode, seed, tasks, Path(tmp), draft_steps=args.draft_steps, refine_steps=args.refine_steps,
                        p_good=args.p_good, p_base=args.p_base, extra=args.extra.split() if args.extra else None)
                runs[mode].append(r)
                print(f"seed {seed} {mode}: shown {fmt(r.share('shown'))} halves "
                      f"{'/'.join(fmt(x) for x in r.halves('shown'))}, good {fmt(r.share('good'))}, "
                      f"correct {fmt(r.correct_rate)}, {len(r.prompts)} kernel steps, {r.seconds:.1f}s, "
                      f"problems {len(r.problems)}, credited items since dropped from the bank {r.lost}", file=sys.stderr)
                for p in r.problems[:5]:
                    print("   ", p, file=sys.stderr)
    table = report(runs, args)
    head = (f"Tasks: {', '.join(tasks)} ({len(tasks)}, curriculum order), {args.draft_steps} draft + "
            f"{args.refine_steps} refine steps each, seeds {args.seeds}, p_good {args.p_good}, p_base {args.p_base}"
            f"{', extra ' + args.extra if args.extra else ''}; {time.monotonic() - start:.0f} s.")
    print(head)
    print()
    print(table)
    if args.write:
        path = RESULTS / "memory_learning_e2e.md"
        with path.open("a", encoding="utf-8") as f:
            command = " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
            f.write(f"\n### `python benchmarks/bench_learning_e2e.py {command}`\n\n{head}\n\n{table}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
