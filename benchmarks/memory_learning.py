"""Does value-driven retrieval learn in real use? The simulated bench of `benchmarks/memory_simulation.py`.

The bank grows by one item per attempt, both stages run (refine start points included), and the
hidden utility of an item is correlated with its lexical similarity at a set rho. Methods: oracle,
value (the shipped `RetrievalPolicy` and `MemoryStore` defaults), similarity, random and a plain
count-based bandit (UCB1). Each method's score is its mean expected success per attempt over the
whole run (drafts: feasible; refinements: faster than the best), as a fraction of the oracle's.

Seeds: the policy's free parameters (alpha, epsilon, pool factor lambda) were chosen with `--tune`
on TUNING_SEEDS only; results are reported on REPORT_SEEDS, which were never used for tuning.

Interface (scripts depend on it):
    python benchmarks/memory_learning.py --seeds 1,2,3 --json
prints {"growth": true, "results": {"value": v, "similarity": s, "random": r, "bandit": b, "oracle": 1.0}}.
Without --json it prints a table and, with --write, writes benchmarks/results/memory_learning.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, run as a script
from benchmarks.memory_simulation import (  # noqa: E402
    METHODS,
    RegressionProbe,
    SimConfig,
    build_world,
    known_seed_world,
    run_method,
)

TUNING_SEEDS = (101, 102, 103)
REPORT_SEEDS = (1, 2, 3, 4, 5)
TUNE_GRID = [
    {"epsilon": eps, "pool_factor": pf, "schedule": sch, "alpha": a}
    for eps in (0.05, 0.1, 0.25)
    for pf in (3, 5)
    for sch, a in (("mean", 0.1), ("constant", 0.2))
]
RESULTS = Path(__file__).parent / "results"
NOTES = """## How to read this

- The oracle knows every item's hidden utility for the task (the bank's growing trajectories included)
  and the start point of highest hidden potential; it is an upper bound no learner reaches early.
- Value retrieval is the shipped default (the paper's policy): pool K = 5N most similar,
  epsilon-greedy (0.1) over the stage Q, equal Q to the less-visited seed item before similarity
  (`retrieval.tie_rank`, added this session), alpha max(0.1, 1/visits), rewards +1/-1 (draft) and
  tanh(log ratio) (refine), start points by Q2, near-duplicate trajectories merged or capped.
  Before the seed tie-break (equal Q to similarity alone) the same seeds 1-5 gave value 0.553,
  similarity 0.446, random 0.385, bandit 0.478 (second half 0.551, drafts 0.613, refinements
  0.538, value-beyond-similarity share 0.605). The bandit is UCB1 (c 0.5) over the sample means of the same pool and picks start points
  like value; similarity refines from the best kernel (as sessions did before), random from a random
  start point.
- Tuning: `--tune` grid (epsilon 0.05/0.1/0.25, lambda 3/5, mean alpha 0.1 or constant 0.2) on the
  tuning seeds 101-103 picked the defaults above (0.598 of the oracle there); `SimConfig()` was fixed
  before any report-seed run. The variants tried this session were compared on tuning seeds 101-106
  only. The bandit keeps ties by similarity (`seed_ties=False`), so its figures are unchanged.

## Broader check: the result does not hold beyond seeds 1-5

Seeds 6-20, 1000, 4242 and 99991 (18 seeds, never used for tuning), same command with `--seeds`,
measured before the seed tie-break (not rerun since):

| method | / oracle | second half / oracle | drafts / oracle | refinements / oracle |
|---|---|---|---|---|
| value | 0.534 | 0.567 | 0.548 | 0.530 |
| similarity | 0.491 | 0.483 | 0.575 | 0.467 |
| random | 0.399 | 0.399 | 0.441 | 0.380 |
| bandit | 0.501 | 0.481 | 0.537 | 0.487 |

Per seed, value minus similarity ranges from -0.09 to +0.17 (at least +0.10 on 3 of the 18) and
value minus bandit from -0.09 to +0.15; value lies between 0.47 and 0.60 of the oracle on every seed.
So, stated for seeds in general: value >= 0.75 of the oracle is **not met** (about 0.53-0.55),
value >= similarity + 0.10 is **not met** (+0.04 on the 18 seeds; the +0.11 on seeds 1-5 is a
favourable draw), and value not below the bandit by more than 0.05 is met (+0.03).

## What any learner could reach in this world (`--probes`, analysis only)

| probe | tuning 101-103 | report 1-5 | extra 6-13 |
|---|---|---|---|
| value policy before the seed tie-break (for comparison) | 0.598 | 0.553 | 0.529 |
| shipped policy given the seeds' values in advance (`known_seed_world`) | 0.823 | 0.774 | 0.809 |
| joint Bayesian-regression credit, Thompson sampling, refine only (`RegressionProbe`) | 0.648 | 0.649 | 0.600 |
| the same for both stages | 0.595 | 0.574 | 0.585 |

Even told every seed's value, the policy stays near 0.8 of the oracle (trajectories, start-point
potentials and exploration still cost). The best learner we could build, which assigns credit
jointly over which items shared each context, gains 0.05-0.10 over the per-item Monte-Carlo values
in refining but stays near 0.6-0.65. Per category a run offers about 12 drafts and 68 refinements
to find the 2-3 of 14 seeds that help, from rewards shared by the 5 items of each context (refine
rewards are -1 for 40% of failures, and the start point's hidden potential scales every outcome).
On this evidence 0.75 of the oracle is out of reach for context-level learning in this world, not
only for the shipped policy; closing it would need more signal per item, not a better schedule.

## Variants tried this session (tuning seeds 101-106; default 0.593 there before the seed tie-break, 0.585 with it)

None of the others beat the default:
- residual (additive) credit, each item moved towards q_i + (G - mean q of its context), with the
  start point credited plainly: 0.535 (mean alpha), 0.547 (constant 0.3); with clipping to [-1, 1]
  and the start point included: 0.55 on 101-103;
- little-visited values shrunk to their family's mean (seeds, or trajectories of one stage and
  outcome), weight 3 / 8 pseudo-visits in refine: 0.563 / 0.479; with UCB on top: 0.52-0.53;
- near-duplicate groups ranked by their pooled (visit-weighted) value: 0.516;
- Thompson sampling over Q (sd 0.3 / 0.6 per sqrt(visits + 1)): 0.540 / 0.460; UCB (c 0.1) instead of
  epsilon: 0.573; similarity blended into the score (value weight 0.8 / 0.6): 0.575 / 0.570;
- a start point's refine value kept apart from its value as a context item: 0.532;
- z-normalised refine rewards (`refine_norm`, now an option in sessions): per session 0.535, over
  the whole run 0.574;
- a shippable form of the probe's joint credit (in refine, a ridge regression of the rewards of the
  bank's last 1000 contexts on which pool items they held, slots by Thompson sampling): 0.579
  (noise 0.2), 0.564 (0.35), 0.578 (prior weight 3), 0.560 with start points kept out of the
  contexts, 0.572 with every item of each context as a column (not only the pool's). None kept the
  probe's gain (the probe itself: 0.618 there; draft figures alone move by +-0.05 between runs of
  one policy, so 6 seeds resolve little below 0.03), so it was not shipped.
- equal value broken towards the less-visited item before similarity (an untried item ranks at the
  mean of the tried ones, which after a failed first context is exactly their -1, so similarity kept
  showing the same five): 0.501 for every item (fresh trajectories win every tie); 0.515 with only
  the seeds reordered among themselves, other kinds keeping their places; 0.585 with seed items
  first, the less visited ahead, other kinds after them (an earlier, uncommitted form measured
  0.590). The last is **shipped** (`tie_rank`, `RetrievalPolicy(seed_ties=True)`): within noise of
  the default here (6 seeds resolve little below 0.03), and through `bench_learning_e2e.py` it
  raised the share of prompts showing the helpful seeds from 0.36 to 0.70 and tasks solved from
  76% to 88% (that world was built for the check, not for tuning).
- Diagnosis that guided these: late in a run refine contexts hold about 0.9 truly useful seeds (the
  oracle's hold 2.7) and 2.8 trajectories of almost no refine utility; similarity's hold 1.0 useful
  seed. A useful seed whose first one or two contexts fail (likely when -1 is 40% of refine failures)
  drops below the pool's mean and is rarely tried again, and items that ride along with a useful
  one earn its value.

## Other settings (report seeds 1-5, before the seed tie-break)

- Budget: the paper's T = 30 shared by both stages (`--budget 30`) is more faithful per session,
  but it lowers every learner's share of the oracle, which refines its best start point with its
  best context for 29 steps: value 0.489, similarity 0.317, random 0.338, bandit 0.426 (per seed
  value 0.40-0.55). At T = 30 value is well clear of similarity (+0.17) and the bandit (+0.06) but
  further from 0.75 of the oracle. `SimConfig()` keeps T = 10 so the figures stay comparable with
  the issue's baseline and the tuning.
- Other correlations (`--rho R --json`): rho 0.0: value 0.489, similarity 0.374, random 0.386,
  bandit 0.482; rho 0.7: value 0.588, similarity 0.566, random 0.413, bandit 0.521. The more
  similarity says about utility, the less the learned values add over it.
"""
TARGETS = {"value_vs_oracle": 0.75, "value_minus_similarity": 0.10, "bandit_minus_value_at_most": 0.05}


def parse_seeds(text: str) -> list[int]:
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise SystemExit(f"--seeds takes comma-separated integers, e.g. 1,2,3; got {text!r}") from None
    if not seeds:
        raise SystemExit("--seeds needs at least one seed, e.g. --seeds 1,2,3")
    return seeds


def evaluate(seeds: list[int], rho: float, params: dict | None = None, methods: tuple[str, ...] = METHODS,
             budget: int = SimConfig.budget) -> dict:
    """Per method: the mean over seeds of (method success / oracle success), and per-stage detail."""
    per: dict[str, list[float]] = {m: [] for m in methods}
    late: dict[str, list[float]] = {m: [] for m in methods}
    stages: dict[str, dict[str, list[float]]] = {m: {"draft": [], "refine": []} for m in methods}
    share: list[float] = []
    with tempfile.TemporaryDirectory(prefix="evokernel-sim-") as tmp:
        for seed in seeds:
            cfg = SimConfig(seed=seed, rho=rho, budget=budget)
            world = build_world(cfg)
            runs = {m: run_method(world, m, Path(tmp), seed, params if m == "value" else None) for m in methods}
            oracle = runs["oracle"]
            for m, res in runs.items():
                per[m].append(res.success() / oracle.success())
                late[m].append(res.success(0.5) / oracle.success(0.5))
                for st in ("draft", "refine"):
                    mine, best = getattr(res, st), getattr(oracle, st)
                    if mine and best:
                        stages[m][st].append((sum(mine) / len(mine)) / (sum(best) / len(best)))
            v = runs.get("value")
            if v is not None and v.slots:
                share.append(v.value_slots / v.slots)
    mean = {m: sum(xs) / len(xs) for m, xs in per.items()}
    return {
        "results": {m: round(mean[m], 4) for m in methods},
        "per_seed": {m: [round(x, 3) for x in xs] for m, xs in per.items()},
        "second_half": {m: round(sum(xs) / len(xs), 3) for m, xs in late.items()},
        "stages": {m: {st: round(sum(xs) / len(xs), 3) if xs else None for st, xs in d.items()} for m, d in stages.items()},
        "value_beyond_similarity_share": round(sum(share) / len(share), 3) if share else None,
    }


def probes(seeds: list[int], rho: float, budget: int = SimConfig.budget) -> dict[str, float]:
    """Analysis only: value / oracle for the shipped policy given the seeds' values in advance, and for
    an idealised credit-assigning learner (`RegressionProbe`, refine only and both stages)."""
    out: dict[str, list[float]] = {"known seed values": [], "regression (refine)": [], "regression (both)": []}
    with tempfile.TemporaryDirectory(prefix="evokernel-sim-") as tmp:
        for seed in seeds:
            world = build_world(SimConfig(seed=seed, rho=rho, budget=budget))
            oracle = run_method(world, "oracle", Path(tmp), seed).success()
            out["known seed values"].append(run_method(known_seed_world(world), "value", Path(tmp), seed).success() / oracle)
            for name, stages in (("regression (refine)", ("refine",)), ("regression (both)", ("draft", "refine"))):
                probe = RegressionProbe(seed=seed, stages=stages)
                out[name].append(run_method(world, "value", Path(tmp), seed, probe=probe).success() / oracle)
    return {k: round(sum(v) / len(v), 3) for k, v in out.items()}


def tune(rho: float) -> list[tuple[dict, float]]:
    """Value / oracle for every setting of TUNE_GRID on TUNING_SEEDS, best first."""
    rows = []
    for params in TUNE_GRID:
        r = evaluate(list(TUNING_SEEDS), rho, params, methods=("oracle", "value"))
        rows.append((params, r["results"]["value"]))
        print(json.dumps(params), f"{r['results']['value']:.3f}", file=sys.stderr, flush=True)
    return sorted(rows, key=lambda kv: -kv[1])


def verdict(res: dict[str, float]) -> dict[str, bool]:
    return {
        "value >= 0.75 of oracle": res["value"] >= TARGETS["value_vs_oracle"],
        "value >= similarity + 0.10": res["value"] >= res["similarity"] + TARGETS["value_minus_similarity"],
        "value not below bandit by more than 0.05": res["value"] >= res["bandit"] - TARGETS["bandit_minus_value_at_most"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default=",".join(map(str, REPORT_SEEDS)), help="comma-separated world seeds")
    ap.add_argument("--json", action="store_true", help="print only the JSON result")
    ap.add_argument("--rho", type=float, default=SimConfig.rho, help="similarity-utility correlation of the world")
    ap.add_argument("--budget", type=int, default=SimConfig.budget,
                    help="T: attempts per session, draft and refine together (the paper uses 30)")
    ap.add_argument("--tune", action="store_true", help="grid-search the value policy on the tuning seeds")
    ap.add_argument("--write", action="store_true", help="write benchmarks/results/memory_learning.md")
    ap.add_argument("--probes", action="store_true",
                    help="analysis only: what a learner could reach here (known seed values, joint regression)")
    args = ap.parse_args(argv)
    if not -1.0 <= args.rho <= 1.0:
        raise SystemExit(f"--rho must be within -1..1, got {args.rho}")
    if args.budget < 1:
        raise SystemExit(f"--budget must be at least 1, got {args.budget}")
    if args.tune:
        for params, score in tune(args.rho):
            print(f"{score:.3f}  {json.dumps(params)}")
        return 0
    seeds = parse_seeds(args.seeds)
    if args.probes:
        print(json.dumps({"seeds": seeds, "probes": probes(seeds, args.rho, args.budget)}))
        return 0
    overlap = sorted(set(seeds) & set(TUNING_SEEDS))
    start = time.monotonic()
    out = evaluate(seeds, args.rho, budget=args.budget)
    res = out["results"]
    if args.json:
        print(json.dumps({"growth": True, "results": res}))
        return 0
    corr = sum(build_world(SimConfig(seed=s, rho=args.rho)).similarity_utility_correlation() for s in seeds) / len(seeds)
    lines = [
        "# Memory learning benchmark (simulated, growing bank, both stages)",
        "",
        f"Seeds {','.join(map(str, seeds))} (tuning seeds {','.join(map(str, TUNING_SEEDS))} are disjoint"
        + (f"; WARNING: {overlap} overlap" if overlap else "") + f"), rho {args.rho} "
        f"(measured correlation of lexical overlap and draft utility within a category: {corr:.2f}).",
        f"World: `SimConfig()` = {SimConfig(rho=args.rho, budget=args.budget)}.",
        "Score: mean expected success per attempt over the whole run, as a fraction of the oracle's.",
        f"Reproduce: `python benchmarks/memory_learning.py --seeds {','.join(map(str, seeds))}"
        + (f" --budget {args.budget}" if args.budget != SimConfig.budget else "")
        + f" --write` ({time.monotonic() - start:.0f} s).",
        "",
        "| method | / oracle | second half / oracle | drafts / oracle | refinements / oracle | per seed |",
        "|---|---|---|---|---|---|",
    ]
    for m in METHODS:
        st = out["stages"][m]
        lines.append(f"| {m} | {res[m]:.3f} | {out['second_half'][m]} | {st['draft']} | {st['refine']} | "
                     f"{', '.join(map(str, out['per_seed'][m]))} |")
    lines += ["", f"Share of value-method slots that similarity's top-k would not have chosen: {out['value_beyond_similarity_share']}", ""]
    lines += [f"- {name}: {'met' if ok else 'NOT met'}" for name, ok in verdict(res).items()]
    lines += ["", "These verdicts are for the seeds above only; the broader check below says which hold in general."]
    lines += ["", NOTES]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "memory_learning.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
