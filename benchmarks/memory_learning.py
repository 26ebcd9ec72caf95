"""Does value-driven retrieval learn? Success rate against episodes for oracle, value, similarity, random.

Runs the simulated environment of `memory.simulation` (hidden per-item utilities, noisy-OR success,
rewards and credit through the real store) over several seeds, writes a PNG plot and a markdown
table to benchmarks/results/, and prints the ratio of value retrieval to the oracle (target >= 0.9)
and its margin over similarity-only retrieval. Ablations run value retrieval with the previous
defaults and without screening, to show what each change is worth.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from memory.simulation import SimConfig, build_world, run_mode

MODES = ("oracle", "value", "similarity", "random")
#: name -> (retrieval mode, RetrievalPolicy overrides, MemoryStore overrides)
RUNS: dict[str, tuple[str, dict, dict]] = {
    "oracle": ("oracle", {}, {}),
    "value": ("value", {}, {}),
    "similarity": ("similarity", {}, {}),
    "random": ("random", {}, {}),
    "value, previous defaults": (
        "value",
        {"exploration": "ucb", "value_weight": 0.7, "min_similarity": 0.3},
        {"schedule": "constant", "alpha": 0.15},
    ),
    "value, no screening": ("value", {"screen_visits": 0}, {}),
    "value, constant alpha 0.15": ("value", {}, {"schedule": "constant", "alpha": 0.15}),
    "value, similarity gate 0.3": ("value", {"min_similarity": 0.3}, {}),
}
RESULTS = Path(__file__).parent / "results"


def simulate(episodes: int, seeds: int) -> dict[str, np.ndarray]:
    """Expected success probability per episode, one row per seed, for every run in RUNS."""
    curves: dict[str, list[list[float]]] = {name: [] for name in RUNS}
    for seed in range(seeds):
        cfg = SimConfig(seed=seed, episodes=episodes)
        world = build_world(cfg)
        with tempfile.TemporaryDirectory(prefix="evokernel-sim-") as tmp:
            for name, (mode, policy, store) in RUNS.items():
                res = run_mode(world, cfg, mode, Path(tmp), seed, policy=policy, store=store)
                curves[name].append(res.probability)
    return {name: np.array(rows) for name, rows in curves.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--episodes", type=int, default=400)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--window", type=int, default=100, help="episodes at the end that are compared")
    args = ap.parse_args()
    curves = simulate(args.episodes, args.seeds)
    mean = {m: curves[m].mean(axis=0) for m in RUNS}
    tail = {m: float(mean[m][-args.window :].mean()) for m in RUNS}
    per_seed = {m: curves[m][:, -args.window :].mean(axis=1) for m in RUNS}
    ratio = tail["value"] / tail["oracle"]
    margin = tail["value"] - tail["similarity"]

    RESULTS.mkdir(exist_ok=True)
    block = 50
    lines = [
        "# Memory learning benchmark (simulated environment)",
        "",
        f"Episodes {args.episodes}, seeds {args.seeds}; figures are the expected success probability of",
        "the retrieved set (mean over seeds), in blocks of 50 episodes. Environment: "
        f"`memory.simulation.SimConfig()` defaults ({SimConfig()}). Value retrieval uses the shipped",
        "defaults of `RetrievalPolicy` and `MemoryStore`. Reproduce: `python benchmarks/memory_learning.py`.",
        "",
        "| episodes | " + " | ".join(MODES) + " |",
        "|---|" + "---|" * len(MODES),
    ]
    for start in range(0, args.episodes, block):
        cells = [f"{np.mean(mean[m][start : start + block]):.3f}" for m in MODES]
        lines.append(f"| {start + 1}-{min(start + block, args.episodes)} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"Last {args.window} episodes: " + ", ".join(f"{m} {tail[m]:.3f}" for m in MODES),
        "",
        f"- value / oracle = **{ratio:.3f}** (target >= 0.90: {'met' if ratio >= 0.9 else 'NOT met'})",
        f"- value - similarity = **{margin:+.3f}** success probability",
        "- per seed, value / oracle: "
        + ", ".join(f"{v / o:.2f}" for v, o in zip(per_seed["value"], per_seed["oracle"], strict=True)),
        "",
        f"## Ablations (last {args.window} episodes, ratio to the oracle, and the lowest per-seed ratio)",
        "",
        "| run | success | / oracle | lowest seed |",
        "|---|---|---|---|",
    ]
    for name in RUNS:
        if name == "oracle":
            continue
        worst = float(np.min(per_seed[name] / per_seed["oracle"]))
        lines.append(f"| {name} | {tail[name]:.3f} | {tail[name] / tail['oracle']:.3f} | {worst:.2f} |")
    lines += [
        "",
        "Notes:",
        "",
        "- The first blocks are the screening phase: value retrieval shows random slates of the relevant",
        "  items until they average 10 visits, and is no better than similarity there. The cost is paid",
        "  once per neighbourhood of tasks; afterwards value retrieval exploits k - 1 slots.",
        "- Why screening: every item in a context is credited with the same return, so under greedy",
        "  ranking a weak item next to strong ones inherits their return and the ranking locks in early.",
        "  Random companions make each item's mean return reflect its own contribution.",
        "- 'previous defaults' is UCB (c 0.1), value weight 0.7, constant alpha 0.15, similarity gate 0.3.",
        "  The gate was documented but not applied before this change; without it the same defaults",
        "  reached 0.795 of the oracle (earlier version of this report).",
        "",
    ]
    (RESULTS / "memory_learning.md").write_text("\n".join(lines))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    kernel = np.ones(25) / 25
    for m in (*MODES, "value, previous defaults"):
        ax.plot(np.convolve(mean[m], kernel, mode="valid"), label=m, linestyle="--" if "," in m else "-")
    ax.set_xlabel("episode")
    ax.set_ylabel("success probability (25-episode moving mean)")
    ax.set_title(f"Memory retrieval: value vs similarity vs random ({args.seeds} seeds)")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(RESULTS / "memory_learning.png", dpi=120)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
