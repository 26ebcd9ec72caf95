"""A simulated environment to check that value-driven retrieval learns (no model, no compiler).

Each task has hidden per-item utilities: a few items of the task's op category truly help, the
rest of the category barely does, and how often an item repeats the category's words (its lexical
similarity) is drawn independently of its utility. An attempt succeeds with probability
``1 - (1 - base) * prod(1 - u_i)`` over the retrieved items (noisy-OR). The oracle retrieves the
k items of highest utility. Rewards and credit go through the real store and `values` module.
"""

from __future__ import annotations

import random
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory.items import MemoryItem, TaskSignature
from memory.retrieval import RetrievalPolicy
from memory.store import MemoryStore
from memory.values import draft_reward

CATEGORIES = ("softmax", "matmul", "conv", "layernorm", "reduction", "elementwise", "attention", "scan")
BACKENDS = ("cpu", "cuda", "triton")
FILLER = [
    "kernel",
    "loop",
    "thread",
    "block",
    "tile",
    "cache",
    "vector",
    "memory",
    "register",
    "launch",
    "buffer",
    "pointer",
    "stride",
    "index",
    "shape",
    "tensor",
    "output",
    "input",
    "float",
    "accumulate",
    "pass",
    "fuse",
    "bound",
    "latency",
]


@dataclass
class SimConfig:
    categories: int = 4
    items_per_category: int = 12
    good_per_category: int = 3
    tasks_per_category: int = 3
    good_utility: tuple[float, float] = (0.45, 0.7)
    poor_utility: tuple[float, float] = (0.0, 0.05)
    base: float = 0.05
    k: int = 4
    episodes: int = 400
    seed: int = 0


@dataclass
class World:
    items: list[MemoryItem]
    tasks: list[TaskSignature]
    utility: dict[str, dict[str, float]] = field(default_factory=dict)  # task -> item id -> utility

    def success_probability(self, task: str, item_ids: list[str], base: float) -> float:
        miss = 1.0 - base
        for item_id in item_ids:
            miss *= 1.0 - self.utility[task].get(item_id, 0.0)
        return 1.0 - miss

    def oracle(self, task: str, k: int) -> list[str]:
        ranked = sorted(self.utility[task].items(), key=lambda kv: -kv[1])
        return [item_id for item_id, _ in ranked[:k]]


def build_world(cfg: SimConfig) -> World:
    """Items and tasks with hidden utilities; lexical overlap is independent of utility."""
    rng = random.Random(cfg.seed)
    items: list[MemoryItem] = []
    tasks: list[TaskSignature] = []
    utility: dict[str, dict[str, float]] = {}
    for c in range(cfg.categories):
        cat = CATEGORIES[c % len(CATEGORIES)] + ("" if c < len(CATEGORIES) else str(c))
        good = set(rng.sample(range(cfg.items_per_category), cfg.good_per_category))
        quality: dict[str, float] = {}
        for j in range(cfg.items_per_category):
            backend = rng.choice(BACKENDS)
            words = [cat] * rng.randint(1, 4) + rng.sample(FILLER, 8)
            item = MemoryItem(
                id=f"sim-{cat}-{j:02d}",
                kind="seed",
                backends=[backend],
                category=cat,
                title=f"{cat} note {j}",
                text=" ".join(words),
                tags=[cat],
            )
            items.append(item)
            lo, hi = cfg.good_utility if j in good else cfg.poor_utility
            quality[item.id] = rng.uniform(lo, hi)
        for t in range(cfg.tasks_per_category):
            sig = TaskSignature(
                task=f"{cat}_task_{t}", category=cat, backend=rng.choice(BACKENDS), text=f"{cat} op"
            )
            tasks.append(sig)
            utility[sig.task] = {
                i: max(0.0, min(1.0, u + rng.uniform(-0.05, 0.05))) for i, u in quality.items()
            }
    return World(items=items, tasks=tasks, utility=utility)


@dataclass
class SimResult:
    mode: str
    probability: list[float]  # expected success probability of each episode's retrieval
    success: list[bool]

    def mean_probability(self, last: int | None = None) -> float:
        xs = self.probability[-last:] if last else self.probability
        return sum(xs) / len(xs)


def run_mode(
    world: World,
    cfg: SimConfig,
    mode: str,
    workdir: Path,
    policy_seed: int = 0,
    policy: dict[str, Any] | None = None,
    store: dict[str, Any] | None = None,
) -> SimResult:
    """Run `cfg.episodes` draft attempts with one retrieval mode ("oracle" uses hidden utilities).

    `policy` and `store` override RetrievalPolicy and MemoryStore settings, for ablations.
    """
    rng = random.Random(cfg.seed * 7919 + policy_seed)
    probability: list[float] = []
    success: list[bool] = []
    bank: MemoryStore | None = None
    retrieval: RetrievalPolicy | None = None
    if mode != "oracle":
        bank = MemoryStore(workdir / f"{mode}-{uuid.uuid4().hex[:8]}.json", seed=False, fsync=False, **(store or {}))
        bank.add_many(world.items)
        retrieval = RetrievalPolicy(mode=mode, k=cfg.k, seed=policy_seed, **(policy or {}))
    for _ in range(cfg.episodes):
        sig = rng.choice(world.tasks)
        if bank is None or retrieval is None:
            ids = world.oracle(sig.task, cfg.k)
        else:
            ids = [h.item.id for h in retrieval.retrieve(bank, sig, "draft")]
        p = world.success_probability(sig.task, ids, cfg.base)
        ok = rng.random() < p
        probability.append(p)
        success.append(ok)
        if bank is not None:
            outcome = "feasible" if ok else rng.choice(("compile_fail", "incorrect"))
            bank.credit(ids, "draft", draft_reward(outcome))
    if bank is not None:
        bank.close()
    return SimResult(mode=mode, probability=probability, success=success)


def run_all(
    cfg: SimConfig, modes: tuple[str, ...] = ("oracle", "value", "similarity", "random"), policy_seed: int = 0
) -> dict[str, SimResult]:
    world = build_world(cfg)
    with tempfile.TemporaryDirectory(prefix="evokernel-sim-") as tmp:
        return {mode: run_mode(world, cfg, mode, Path(tmp), policy_seed) for mode in modes}
