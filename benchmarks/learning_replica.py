"""The drafting loop's learning step without sessions, model server or verifier: seconds, not minutes.

Per task (in bench order), up to `drafts` drafts until one is feasible, twice over one bank per
retrieval mode (two passes, as `bench_learning_real.py`): value or similarity retrieval
(`RetrievalPolicy.select`, the policy seeded per task as `evokernel bench` seeds it), a draw of the
share model (p = base + strength x share of the hidden helpful seeds among the ranked items, the draw
keyed by seed, pass, task and attempt), the paper's draft reward credited to the ranked items
(`MemoryStore.credit`), and the attempt's trajectory stored as a session stores it
(`core.rewards.store_trajectory`: the honest kernel's code when the draw succeeded, a broken copy with a
lesson when it failed). What it leaves out (prompts, events, the fold, the verifier) is what
`bench_learning_real.py` checks; what it keeps is everything value retrieval learns from, so a change
to retrieval or credit shows here first.

    python benchmarks/learning_replica.py [--seeds 1,2,3] [--strength 0.8] [--set KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "benchmarks"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import bench_learning_real as real  # noqa: E402

LESSON = ("The kernel did not pass the checks because its indexing and loop bounds were not verified; "
          "next time check every index against the tensor shape before replying.")


@dataclass
class PassStats:
    prompts: int = 0
    shown: int = 0  # prompts showing at least one helpful item
    p: list[float] = field(default_factory=list)
    good: int = 0
    q: dict[str, float] = field(default_factory=dict)

    def row(self) -> dict[str, float]:
        return {"shown": self.shown / max(1, self.prompts), "p": statistics.fmean(self.p) if self.p else 0.0,
                "good": self.good / max(1, self.prompts), **self.q}


def tasks_of(names: list[str]) -> list[Any]:
    """The tasks as `evokernel bench` would load them: built-in ones by name, the KernelBench ones from the
    benchmark's shrunk suite (`bench_learning_real.kb_suite`)."""
    from core.bench.selection import select_tasks

    kb = {*real.KERNELBENCH, *real.KB_ELEMENTWISE}
    out = select_tasks("builtin", names=[n for n in names if n not in kb]) if any(n not in kb for n in names) else []
    if any(n in kb for n in names):
        root = real.kb_suite(Path(tempfile.mkdtemp(prefix="evk-replica-kb-")))
        out += select_tasks(kernelbench=root, levels=[1], names=[n for n in names if n in kb])
    return out


def shapes_of(tasks: list[Any], cache: Path) -> dict[str, str]:
    """Each task's shapes text as `evokernel bench` puts it in the retrieval query (`task_shapes`: the
    reference runs once in a child), kept in `cache` by task source: tasks with the same shapes share those
    query words with each other's trajectories, which decides what stays in the pool."""
    import hashlib as _h

    from evokernel_tui.commands.draft import task_shapes

    known = json.loads(cache.read_text()) if cache.is_file() else {}
    out = {}
    for task in tasks:
        key = _h.sha256(task.source.encode()).hexdigest()[:16]
        if key not in known:
            known[key] = task_shapes(task)
        out[task.name] = known[key]
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(known))
    return out


def run(mode: str, seed: int, tasks: list[Any], sources: dict[str, str], helpful: tuple[str, ...], *,
        base: float = 0.1, strength: float = 0.8, drafts: int = 6, passes: int = 2,
        policy: dict[str, Any] | None = None, shapes: dict[str, str] | None = None) -> list[dict[str, float]]:
    """Per pass: share of prompts showing a helpful item, mean p, good rate, Q1 of helpful / other tried seeds."""
    from core.rewards import store_trajectory
    from memory import MemoryStore, RetrievalPolicy, TaskSignature
    from memory.values import draft_reward
    from tests.fakes.verdicts import fake_verify

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        store = MemoryStore(Path(tmp) / "memory.json", fsync=False)
        try:
            for number in range(1, passes + 1):
                stats = PassStats()
                for index, task in enumerate(tasks):
                    pol = RetrievalPolicy(mode=mode, seed=seed + index, **(policy or {}) if mode == "value" else {})
                    sig = TaskSignature(task=task.name, category=task.category, backend="cpu", shapes=(shapes or {}).get(task.name, ""),
                                        text=task.description)
                    for n in range(drafts):
                        ranked = pol.select(store, sig, "draft").ranked
                        ids = [h.item.id for h in ranked]
                        share = sum(1 for i in ids if i in helpful) / len(ids) if ids else 0.0
                        p = base + strength * share
                        key = hashlib.sha256(f"{seed}/pass{number}/{task.name}/{n}".encode()).digest()
                        rng = random.Random(int.from_bytes(key[:8], "big"))
                        good = rng.random() < p
                        kind = "compile" if rng.random() < 0.5 else "wrong"
                        outcome = "feasible" if good else "compile_fail" if kind == "compile" else "incorrect"
                        stats.prompts += 1
                        stats.shown += share > 0
                        stats.p.append(p)
                        stats.good += good
                        store.credit(ids, "draft", draft_reward(outcome), rule=pol.credit)
                        code = sources.get(task.name, "")
                        code = code if good else real.broken(code, kind)
                        result = fake_verify("", f"# verdict: {outcome} 2.0")  # the verdict a real run maps to
                        attempt = _Attempt(code)
                        store_trajectory(store, sig, "draft", attempt, result, {"session": f"{task.name}-{number}"},
                                         "" if good else LESSON)
                        if good:
                            break
                stats.q = _q(store, helpful)
                rows.append(stats.row())
        finally:
            store.close()
    return rows


@dataclass
class _Attempt:
    source: str
    author: str = "model"


def _q(store: Any, helpful: tuple[str, ...]) -> dict[str, float]:
    seeds = [i for i in store.items("seed") if i.visits1]
    h = [i.q1 for i in seeds if i.id in helpful]
    o = [i.q1 for i in seeds if i.id not in helpful]
    return {"q_helpful": statistics.fmean(h) if h else float("nan"), "q_others": statistics.fmean(o) if o else float("nan")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="1,2,3,4,5,6")
    ap.add_argument("--tasks", default=",".join([*real.BUILTIN, *real.KERNELBENCH, *real.KB_ELEMENTWISE]))
    ap.add_argument("--helpful", choices=tuple(real.HELPFUL_SETS), default="hidden")
    ap.add_argument("--base", type=float, default=0.1)
    ap.add_argument("--strength", type=float, default=0.8)
    ap.add_argument("--drafts", type=int, default=6)
    ap.add_argument("--shapes", action=argparse.BooleanOptionalAction, default=True,
                    help="Put each task's input shapes in its query, as bench does (runs each reference once).")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                    help="A RetrievalPolicy field for value mode, e.g. prior_visits=5.")
    args = ap.parse_args(argv)
    policy = {k: json.loads(v) for k, v in (s.split("=", 1) for s in args.set)}
    tasks = tasks_of(args.tasks.split(","))
    sources = real.candidate_sources()
    shapes = shapes_of(tasks, Path(tempfile.gettempdir()) / "evk-replica-shapes.json") if args.shapes else {}
    helpful = real.HELPFUL_SETS[args.helpful]
    out: dict[str, list[list[dict[str, float]]]] = {"value": [], "similarity": []}
    for seed in (int(s) for s in args.seeds.split(",")):
        for mode in out:
            rows = run(mode, seed, tasks, sources, helpful, base=args.base, strength=args.strength,
                       drafts=args.drafts, policy=policy, shapes=shapes)
            out[mode].append(rows)
            print(f"seed {seed} {mode}: " + " | ".join(
                f"pass {n + 1} shown {r['shown']:.2f} p {r['p']:.2f} Q1 helpful {r['q_helpful']:+.2f} "
                f"others {r['q_others']:+.2f}" for n, r in enumerate(rows)), file=sys.stderr)
    print(f"policy {policy or 'default'}; helpful {args.helpful}; strength {args.strength}; seeds {args.seeds}")
    for mode, runs in out.items():
        for n in range(len(runs[0])):
            def m(key: str, n: int = n, runs: list[list[dict[str, float]]] = runs) -> float:
                xs = [r[n][key] for r in runs if r[n][key] == r[n][key]]
                return statistics.fmean(xs) if xs else float("nan")
            print(f"{mode:10s} pass {n + 1}: shown {m('shown'):.2f}  p {m('p'):.3f}  good {m('good'):.2f}  "
                  f"Q1 helpful {m('q_helpful'):+.2f} others {m('q_others'):+.2f} sep {m('q_helpful') - m('q_others'):+.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
