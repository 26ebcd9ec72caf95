"""A simulated environment to check that value-driven retrieval learns as it would in real use.

No model and no compiler, but the shape of a real run:

- Tasks fall in op categories. Each category has seed items whose lexical overlap with the
  category's tasks is set by a latent z (how many of the category's words an item repeats), and
  whose hidden utility for drafting and for refining is ``rho * z + sqrt(1 - rho^2) * noise``
  thresholded: similarity is informative about utility, but imperfect, at a set correlation rho.
- Each task is one session with a budget of T attempts shared by both stages: drafting until a
  kernel is feasible, then refining. Refining keeps the session's start points (the first feasible
  draft and every later feasible variant), each with a hidden potential, and picks one per attempt.
- The bank grows by one trajectory per attempt, as real sessions do: a failed attempt is a
  near-duplicate of the task's words with almost no utility, a feasible one is useful for its
  task. Trajectories therefore crowd the similarity ranking exactly as they do in real banks.
- An attempt succeeds with probability ``1 - (1 - base) * prod(1 - u_i)`` over the items in its
  context (noisy-OR), times the start point's potential when refining. Rewards are the real ones
  (`memory.values`) and credit goes through the real store and `RetrievalPolicy`.

Methods: "oracle" (the k items of highest hidden utility in the whole bank and the start point of
highest potential), "value" (the shipped policy), "similarity", "random", and "bandit" (a plain
count-based UCB1 over the pool: sample-mean values and a visit-count bonus, no epsilon).

Probes (analysis only, never used by sessions) bound what any learner could reach in this world:
`known_seed_world` gives the shipped policy the seeds' hidden utilities as settled values before the
run; `RegressionProbe` replaces the per-item Monte-Carlo values by a Bayesian linear regression over
which items were in each context (Thompson sampling), i.e. credit assignment done jointly.
"""

from __future__ import annotations

import copy
import math
import random
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from memory.items import MemoryItem, TaskSignature
from memory.retrieval import RetrievalPolicy
from memory.store import MemoryStore
from memory.values import RunningNorm, draft_reward, refine_reward

CATEGORIES = ("softmax", "matmul", "conv", "layernorm", "reduction", "elementwise", "attention", "scan")
FILLER = ["kernel", "loop", "thread", "block", "tile", "cache", "vector", "memory", "register", "launch", "buffer", "pointer", "stride", "index", "shape", "tensor", "output", "input", "float", "accumulate", "pass", "fuse", "bound", "latency"]
METHODS = ("oracle", "value", "similarity", "random", "bandit")


@dataclass
class SimConfig:
    categories: int = 6
    tasks_per_category: int = 4
    items_per_category: int = 14
    words_per_category: int = 8
    rho: float = 0.4  # correlation of lexical overlap (z) with the utility latent
    good_share: float = 0.2  # share of seed items that truly help, per stage
    good_utility: tuple[float, float] = (0.35, 0.6)
    poor_utility: tuple[float, float] = (0.0, 0.04)
    base_draft: float = 0.05
    base_refine: float = 0.05
    budget: int = 10  # T: attempts per session, draft and refine together
    rounds: int = 2  # how often each task is run (a fresh session each time)
    k: int = 5
    seed: int = 0


@dataclass
class SimItem:
    """What the simulator knows about an item besides the store: its hidden utilities."""

    item: MemoryItem
    draft: dict[str, float]  # task -> utility when drafting
    refine: dict[str, float]  # task -> utility when refining
    potential: float = 0.0  # start points only: how fertile refining from it is
    task: str = ""


@dataclass
class World:
    cfg: SimConfig
    tasks: list[TaskSignature]
    items: dict[str, SimItem] = field(default_factory=dict)
    z: dict[str, float] = field(default_factory=dict)

    def utility(self, task: str, stage: str, item_id: str) -> float:
        s = self.items.get(item_id)
        if s is None:
            return 0.0
        return (s.draft if stage == "draft" else s.refine).get(task, 0.0)

    def success_probability(self, task: str, stage: str, ids: list[str], potential: float = 1.0) -> float:
        base = self.cfg.base_draft if stage == "draft" else self.cfg.base_refine
        miss = 1.0 - base
        for item_id in ids:
            miss *= 1.0 - self.utility(task, stage, item_id)
        return min(0.97, (1.0 - miss) * potential)

    def oracle(self, task: str, stage: str, k: int) -> list[str]:
        ranked = sorted(self.items, key=lambda i: -self.utility(task, stage, i))
        return ranked[:k]

    def similarity_utility_correlation(self, stage: str = "draft") -> float:
        """Pearson correlation, over seed items and their own category's tasks, of z and utility."""
        xs, ys = [], []
        for sig in self.tasks:
            for item_id, z in self.z.items():
                if self.items[item_id].item.category == sig.category:
                    xs.append(z)
                    ys.append(self.utility(sig.task, stage, item_id))
        return _pearson(xs, ys)


def _pearson(xs: list[float], ys: list[float]) -> float:
    n = len(xs)
    if n < 2:
        return 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    return sxy / math.sqrt(sxx * syy) if sxx and syy else 0.0


def _words(cat: str, cfg: SimConfig) -> list[str]:
    return [f"{cat}v{j}" for j in range(cfg.words_per_category)]


def build_world(cfg: SimConfig) -> World:
    """Seed items and tasks with hidden utilities correlated with lexical overlap at `cfg.rho`."""
    rng = random.Random(cfg.seed)
    tasks: list[TaskSignature] = []
    world = World(cfg=cfg, tasks=tasks)
    threshold = _normal_quantile(1.0 - cfg.good_share)
    noise = math.sqrt(max(0.0, 1.0 - cfg.rho**2))
    for c in range(cfg.categories):
        cat = CATEGORIES[c % len(CATEGORIES)] + ("" if c < len(CATEGORIES) else str(c))
        vocab = _words(cat, cfg)
        cat_tasks = [
            TaskSignature(task=f"{cat}t{t}", category=cat, backend="cpu", text=f"{cat} {' '.join(vocab)}")
            for t in range(cfg.tasks_per_category)
        ]
        tasks.extend(cat_tasks)
        for j in range(cfg.items_per_category):
            z = rng.gauss(0.0, 1.0)
            m = max(1, min(len(vocab), round(len(vocab) / 2 + 2 * z)))
            words = [cat] + rng.sample(vocab, m) + rng.sample(FILLER, 6)
            item = MemoryItem(
                id=f"sim-{cat}-{j:02d}", kind="seed", backends=["cpu"], category=cat,
                title=f"{cat} note {j}", text=" ".join(words), tags=[cat],
            )
            per_stage = []
            for _stage in ("draft", "refine"):
                latent = cfg.rho * z + noise * rng.gauss(0.0, 1.0)
                lo, hi = cfg.good_utility if latent > threshold else cfg.poor_utility
                u = rng.uniform(lo, hi)
                per_stage.append({s.task: max(0.0, min(1.0, u + rng.uniform(-0.03, 0.03))) for s in cat_tasks})
            world.items[item.id] = SimItem(item, per_stage[0], per_stage[1])
            world.z[item.id] = z
    return world


def _normal_quantile(p: float) -> float:
    """Inverse of the standard normal CDF by bisection (enough precision for a threshold)."""
    lo, hi = -8.0, 8.0
    for _ in range(80):
        mid = (lo + hi) / 2
        if 0.5 * (1 + math.erf(mid / math.sqrt(2))) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def trajectory(world: World, sig: TaskSignature, stage: str, ok: bool, rng: random.Random, potential: float = 0.0) -> SimItem:
    """The trajectory one attempt leaves: a near-duplicate of its task's words."""
    siblings = [s.task for s in world.tasks if s.category == sig.category]
    words = [sig.category] + _words(sig.category, world.cfg) + [sig.task, stage, "ok" if ok else "fail"]
    item = MemoryItem(
        id=f"traj-{uuid.UUID(int=rng.getrandbits(128)).hex[:12]}", kind="trajectory", backends=["cpu"],
        category=sig.category, title=f"{stage} {'feasible' if ok else 'failed'}: {sig.task}", text=" ".join(words),
        tags=[sig.category, stage], provenance="model",
        data={"task": sig.task, "stage": stage, "outcome": "feasible" if ok else "failed"},
    )
    if ok and stage == "draft":
        draft = {t: (0.5 if t == sig.task else 0.12) for t in siblings}
        refine = {t: (0.05 if t == sig.task else 0.0) for t in siblings}
    elif ok:
        draft = {t: (0.1 if t == sig.task else 0.03) for t in siblings}
        refine = {t: (0.1 if t == sig.task else 0.03) for t in siblings}
    else:
        draft = {t: (0.02 if t == sig.task else 0.0) for t in siblings}
        refine = {t: 0.0 for t in siblings}
    return SimItem(item, draft, refine, potential=potential, task=sig.task)


@dataclass
class SimResult:
    method: str
    draft: list[float] = field(default_factory=list)  # expected success probability per draft attempt
    refine: list[float] = field(default_factory=list)  # expected improvement probability per refine attempt
    attempts: list[float] = field(default_factory=list)  # both, in order
    value_slots: int = 0  # ranked slots chosen by value that similarity's top-k would not have chosen
    slots: int = 0
    trajectory_slots: int = 0

    def success(self, last: float = 1.0) -> float:
        """Mean expected success per attempt over the last `last` share of the run."""
        xs = self.attempts[int(len(self.attempts) * (1 - last)) :]
        return sum(xs) / len(xs) if xs else 0.0


def schedule(world: World, rng: random.Random) -> list[TaskSignature]:
    """Sessions in mixed order: every task `rounds` times, shuffled within each round."""
    out: list[TaskSignature] = []
    for _ in range(world.cfg.rounds):
        order = list(world.tasks)
        rng.shuffle(order)
        out += order
    return out


def method_policy(method: str, seed: int, params: dict[str, Any] | None = None) -> tuple[RetrievalPolicy, dict[str, Any]]:
    """RetrievalPolicy and MemoryStore settings of one method (`params` override the value method's)."""
    params = {k: v for k, v in (params or {}).items() if not k.startswith("_")}
    store_keys = {"alpha", "schedule"}
    store = {k: params.pop(k) for k in list(params) if k in store_keys}
    if method == "value":
        return RetrievalPolicy(mode="value", seed=seed, rules=False, **params), store
    # Baselines see the same pool (K items) as the value method.
    if method == "bandit":
        ucb = {"ucb_c": params.pop("ucb_c", 0.5)}
        return RetrievalPolicy(mode="value", seed=seed, rules=False, exploration="ucb", seed_ties=False, **ucb, **{
            k: v for k, v in params.items() if k in ("k", "pool_factor", "pool_size")}), {"schedule": "mean", "alpha": 0.01}
    if method in ("similarity", "random"):
        return RetrievalPolicy(mode=method, seed=seed, rules=False, **{
            k: v for k, v in params.items() if k in ("k", "pool_factor", "pool_size")}), {}
    raise ValueError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")


class RegressionProbe:
    """An idealised credit-assigning learner (analysis only): per stage, a Bayesian linear regression of
    the reward on which pool items were in the context (r = b + sum of item effects, prior variance
    `1 / lam` per item, noise `sigma`), and Thompson sampling of the k items from the pool. Unlike the
    per-item Monte-Carlo values it separates items that were always seen together only as far as the
    contexts differ, which is the most any learner can get from context-level rewards."""

    def __init__(self, lam: float = 1.0, sigma: float = 0.2, seed: int = 0,
                 stages: tuple[str, ...] = ("draft", "refine")) -> None:
        self.lam, self.sigma, self.stages = lam, sigma, stages
        self.rng = np.random.default_rng(seed)
        self.idx: dict[str, dict[str, int]] = {st: {} for st in ("draft", "refine")}
        self.cov: dict[str, np.ndarray] = {st: np.zeros((0, 0)) for st in ("draft", "refine")}
        self.b: dict[str, np.ndarray] = {st: np.zeros(0) for st in ("draft", "refine")}
        for st in ("draft", "refine"):
            self._ensure(st, ["\x00bias"], prior=100.0)

    def _ensure(self, stage: str, ids: list[str], prior: float | None = None) -> None:
        idx = self.idx[stage]
        new = [i for i in dict.fromkeys(ids) if i not in idx]
        if not new:
            return
        n, m = len(idx), len(new)
        cov = np.zeros((n + m, n + m))
        cov[:n, :n] = self.cov[stage]
        for j, item_id in enumerate(new):
            idx[item_id] = n + j
            cov[n + j, n + j] = prior if prior is not None else 1.0 / self.lam
        self.cov[stage], self.b[stage] = cov, np.concatenate([self.b[stage], np.zeros(m)])

    def pick(self, stage: str, pool: list[str], k: int) -> list[str] | None:
        """The k pool ids of highest sampled effect, or None to leave this stage to the policy."""
        if stage not in self.stages or not pool:
            return None
        self._ensure(stage, pool)
        ix = [self.idx[stage][i] for i in pool]
        mean = (self.cov[stage] @ self.b[stage])[ix]
        sub = self.cov[stage][np.ix_(ix, ix)] * self.sigma**2
        try:
            draw = mean + np.linalg.cholesky(sub + 1e-9 * np.eye(len(ix))) @ self.rng.standard_normal(len(ix))
        except np.linalg.LinAlgError:
            draw = mean + np.sqrt(np.clip(np.diag(sub), 0, None)) * self.rng.standard_normal(len(ix))
        return [pool[i] for i in np.argsort(-draw, kind="stable")[:k]]

    def update(self, stage: str, ids: list[str], reward: float) -> None:
        """Sherman-Morrison update of the posterior with one context and its reward."""
        self._ensure(stage, ids)
        x = np.zeros(len(self.idx[stage]))
        x[self.idx[stage]["\x00bias"]] = 1.0
        for item_id in ids:
            x[self.idx[stage][item_id]] = 1.0
        cx = self.cov[stage] @ x
        self.cov[stage] -= np.outer(cx, cx) / (1.0 + x @ cx)
        self.b[stage] += reward * x


def known_seed_world(world: World) -> World:
    """A copy of `world` whose seed items start with settled values that rank them by their hidden
    utility (analysis only: the shipped policy then only has trajectories and start points to learn)."""
    out = copy.deepcopy(world)
    for s in out.items.values():
        if s.item.kind != "seed":
            continue
        u1, u2 = sum(s.draft.values()) / len(s.draft), sum(s.refine.values()) / len(s.refine)
        s.item.q1, s.item.q2 = 2 * u1 - 0.5, 2 * u2 - 0.5
        s.item.visits1 = s.item.visits2 = 1000
    return out


def run_method(world: World, method: str, workdir: Path, policy_seed: int = 0,
               params: dict[str, Any] | None = None, probe: RegressionProbe | None = None) -> SimResult:
    """Run every session of the schedule with one method; the bank grows by one item per attempt.

    `probe` (analysis only, value method): picks the context from the policy's pool instead of the
    values, and learns from the same rewards."""
    cfg = world.cfg
    rng = random.Random(cfg.seed * 7919 + policy_seed)
    env = random.Random(cfg.seed * 104729 + policy_seed)  # outcomes, the same stream for every method
    sessions = schedule(world, random.Random(cfg.seed + 17))
    local = World(cfg=cfg, tasks=world.tasks, items=dict(world.items), z=world.z)
    result = SimResult(method)
    bank: MemoryStore | None = None
    policy: RetrievalPolicy | None = None
    k = int((params or {}).get("k", cfg.k))
    if method != "oracle":
        policy, store_kw = method_policy(method, policy_seed, {"k": cfg.k, **(params or {})})
        bank = MemoryStore(workdir / f"{method}-{uuid.uuid4().hex[:8]}.json", seed=False, fsync=False, **store_kw)
        bank.add_many([s.item for s in world.items.values()])
    for sig in sessions:
        session_norm = RunningNorm()  # running statistics of this session's refine rewards (optional)
        start_points: list[SimItem] = []
        best_ms: float | None = None
        for _ in range(cfg.budget):
            stage = "draft" if not start_points else "refine"
            start: SimItem | None = None
            if stage == "refine":
                if bank is None or policy is None or (params or {}).get("_oracle_start"):
                    start = max(start_points, key=lambda s: s.potential)
                elif method in ("value", "bandit"):
                    points = [(s, bank.get(s.item.id).q2 if s.item.id in bank else 0.0) for s in start_points]
                    start, _ = policy.choose_start(points)
                elif method == "similarity":
                    start = min(start_points, key=lambda s: s.item.data["latency_ms"])  # refine the best
                else:
                    start = rng.choice(start_points)
            if bank is None or policy is None:
                ids = local.oracle(sig.task, stage, k)
            else:
                sel = policy.select(bank, sig, stage)
                ids = sel.credited_ids
                if probe is not None:
                    ids = probe.pick(stage, [p["id"] for p in sel.pool], k) or ids
                result.value_slots += sel.value_chosen_beyond_similarity()
                result.slots += len(ids)
                result.trajectory_slots += sum(1 for h in sel.ranked if h.item.kind == "trajectory")
            potential = start.potential if start is not None else 1.0
            p = local.success_probability(sig.task, stage, ids, potential)
            ok = env.random() < p
            (result.draft if stage == "draft" else result.refine).append(p)
            result.attempts.append(p)
            if stage == "draft":
                reward = draft_reward("feasible" if ok else env.choice(("compile_fail", "incorrect")))
                feasible, latency = ok, 1.0 if ok else None
                new_potential = env.uniform(0.6, 1.4)
            else:
                assert start is not None and best_ms is not None
                parent_ms = float(start.item.data.get("latency_ms", best_ms))
                if ok:
                    latency = min(best_ms, parent_ms) / env.uniform(1.1, 1.6)
                    feasible = True
                elif env.random() < 0.4:
                    latency, feasible = None, False
                else:
                    latency, feasible = parent_ms * env.uniform(1.0, 1.3), True
                reward = refine_reward(latency, best_ms, feasible)
                if policy is not None and policy.refine_norm:
                    reward = session_norm.normalise(reward)
                new_potential = start.potential * env.uniform(0.75, 1.05)
            if probe is not None:
                probe.update(stage, list(ids), reward)
            credit = list(ids) + ([start.item.id] if start is not None else [])
            if bank is not None and credit:
                bank.credit(credit, stage, reward, rule=policy.credit if policy is not None else "mc")
            traj = trajectory(local, sig, stage, feasible, env, potential=new_potential if feasible else 0.0)
            if feasible:
                traj.item.data["latency_ms"] = latency
                start_points.append(traj)
                assert latency is not None  # a feasible step has a latency
                best_ms = latency if best_ms is None else min(best_ms, latency)
            if bank is not None:
                stored, how = bank.add_trajectory(traj.item)
                if how == "merged":
                    traj = SimItem(stored, traj.draft, traj.refine, traj.potential, traj.task)
            else:
                merged = next((s for s in local.items.values() if s.item.kind == "trajectory" and not feasible
                               and s.item.duplicate_key() == traj.item.duplicate_key()), None)
                if merged is not None:
                    traj = SimItem(merged.item, traj.draft, traj.refine, traj.potential, traj.task)
            local.items[traj.item.id] = traj
    if bank is not None:
        bank.close()
    return result


def run_all(cfg: SimConfig, methods: tuple[str, ...] = METHODS, policy_seed: int = 0,
            params: dict[str, Any] | None = None) -> dict[str, SimResult]:
    world = build_world(cfg)
    with tempfile.TemporaryDirectory(prefix="evokernel-sim-") as tmp:
        return {m: run_method(world, m, Path(tmp), policy_seed, params if m == "value" else None) for m in methods}
