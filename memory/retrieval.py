"""Stage-aware retrieval: a pool of similar candidates, then a choice by the stage's learned value.

The default follows the EvoKernel paper: the pool is the K = lambda * N items most similar to the
task (BM25 plus a backend boost; when drafting, an untried trajectory, lesson or insight less than half
as similar as the best match gives its place to the next candidate, see `fresh_floor`), and N of them are picked epsilon-greedily by the stage's Q (each
slot is the pool's best remaining Q, or with probability epsilon a random remaining candidate; equal
Q goes to the less-visited seed item, then to similarity, see `tie_rank`). Every item put in the
context is then credited with the attempt's reward (`store.credit`; option `credit` "advantage" moves each
by the context's surprise instead), and refining picks its start point epsilon-greedily by Q2 (`choose_start`).
A tried item ranks at its Q shrunk toward the pool's mean by its evidence (`prior_visits`), and one with
fewer than `try_visits` (2) visits no lower than an untried one.
API/contract knowledge (seed items of category "contract" for the task's backend) is fetched by
rule, outside the N ranked slots, and is not credited.

Options kept for comparison: exploration "screen" (random slates until the pool averages
`screen_visits` visits, then the best k - `explore_slots` plus random others), "ucb" and "none";
`value_weight` < 1 mixes similarity into the score; `min_similarity` drops weak matches;
`seed_ties=False` leaves equal Q to similarity alone; modes
`similarity` and `random` rank the same pool by BM25 alone or draw from it at random (ablations).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any, Protocol

from memory.items import MemoryItem, TaskSignature, check_stage
from memory.values import check_credit_rule, check_scheme, normalised_value

MODES = ("value", "similarity", "random")
EXPLORATION = ("epsilon", "screen", "ucb", "none")
#: Seed categories fetched by rule instead of being ranked.
RULE_CATEGORIES = ("contract",)


class Recaller(Protocol):
    def recall(
        self, query: str, n: int, backend: str | None = None, backend_boost: float = 0.0
    ) -> list[tuple[MemoryItem, float]]: ...


@dataclass
class Retrieved:
    """One chosen item with the parts of its score, so the app can show why it was chosen."""

    item: MemoryItem
    similarity: float
    value: float
    exploration: float
    score: float
    #: how the slot was filled: "value" (the learned value), "similarity" alone, "random" (random mode),
    #: "explore" (exploration) or "rule" (contract knowledge)
    chosen_by: str = "value"

    def to_dict(self) -> dict[str, Any]:
        return {
            "item": self.item.to_dict(),
            "similarity": self.similarity,
            "value": self.value,
            "exploration": self.exploration,
            "score": self.score,
            "chosen_by": self.chosen_by,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Retrieved:
        return cls(
            item=MemoryItem.from_dict(d["item"]),
            similarity=float(d["similarity"]),
            value=float(d["value"]),
            exploration=float(d["exploration"]),
            score=float(d["score"]),
            chosen_by=str(d.get("chosen_by", "value")),
        )


@dataclass
class Selection:
    """One retrieval: the chosen hits (ranked slots, then rule items) and the pool they came from."""

    stage: str
    hits: list[Retrieved]
    pool: list[dict[str, Any]]  # {"id", "similarity", "q"} of every candidate, most similar first
    similarity_top: list[str]  # the ids similarity alone would have put in the ranked slots

    @property
    def ranked(self) -> list[Retrieved]:
        return [h for h in self.hits if h.chosen_by != "rule"]

    @property
    def credited_ids(self) -> list[str]:
        """The ids the attempt's reward is credited to: every ranked slot (rule items are not)."""
        return [h.item.id for h in self.ranked]

    def value_chosen_beyond_similarity(self) -> int:
        """Slots chosen by value (not exploration) that similarity's top-k would not have chosen."""
        top = set(self.similarity_top)
        return sum(1 for h in self.hits if h.chosen_by == "value" and h.item.id not in top)

    def explored_slots(self) -> list[int]:
        return [i for i, h in enumerate(self.hits) if h.chosen_by == "explore"]

    def event(self) -> dict[str, Any]:
        """What the `retrieved` event records besides the items: the pool and why each slot was chosen."""
        return {
            "pool": [dict(p) for p in self.pool],
            "similarity_top": list(self.similarity_top),
            "explored": self.explored_slots(),
            "value_beyond_similarity": self.value_chosen_beyond_similarity(),
            "slots": len(self.ranked),
        }


def tie_rank(item: MemoryItem, stage: str) -> tuple[int, int]:
    """Order among candidates of equal score, before similarity: seed items first, the less visited
    in `stage` ahead; every other kind after them, in similarity order.

    Why: an untried item ranks at the mean value of the pool's tried items, so after a first context
    that failed (every shown item at Q = -1) the untried items tie with the failed ones, and with ties
    going to similarity alone the same five were shown again until epsilon picked something else.
    Seeds (curated knowledge, a fixed set) are worth trying in turn. Trajectories, lessons and
    insights are not favoured: a fresh one appears after every attempt, and favouring the less
    visited of every kind let them win every such tie (0.501 of the oracle on the simulator's tuning
    seeds, against 0.585 for this order and 0.593 for similarity alone; through
    `benchmarks/bench_learning_e2e.py` this order doubled the prompts showing the helpful seeds).
    """
    return (0, item.visits(stage)) if item.kind == "seed" else (1, 0)


def dedup_pool(pool: list[tuple[MemoryItem, float]], stage: str) -> list[tuple[MemoryItem, float]]:
    """Keep one item per near-duplicate group (highest stage Q, then most similar), in pool order."""
    best: dict[tuple[str, str, str], tuple[MemoryItem, float]] = {}
    for item, sim in pool:
        key = item.duplicate_key()
        if key is None:
            continue
        held = best.get(key)
        if held is None or (item.q(stage), sim) > (held[0].q(stage), held[1]):
            best[key] = (item, sim)
    keep = {id(v[0]) for v in best.values()}
    return [(item, sim) for item, sim in pool if item.duplicate_key() is None or id(item) in keep]


def drop_loose_fresh(candidates: list[tuple[MemoryItem, float]], stage: str, floor: float) -> list[tuple[MemoryItem, float]]:
    """The candidates without the untried fresh items (trajectories, lessons, insights never visited
    in `stage`) whose similarity is under `floor` times the best match's. Seeds and every visited item
    stay whatever their similarity; so do fresh items that match the task well (its own trajectories).

    Why (issue 38): every attempt writes a trajectory or lesson, and one written for another task still
    shares the boilerplate words of kernel code and task text with this one, so after one pass over a
    set of tasks the K most similar places were mostly loosely similar fresh items with no evidence,
    the notes whose contexts had succeeded fell out of the pool, and untried items (ranked at the
    pool's mean Q) took the slots: value's second pass showed the helpful seeds less often than its
    first. The next most similar candidates take the freed places, so the pool keeps K items.
    `RetrievalPolicy` applies it when drafting only: applied to refining too it cost the growing-bank
    simulator 0.06 of the oracle (0.587 -> 0.529, 12 seeds), drafting alone nothing measurable.
    """
    if floor <= 0 or not candidates:
        return candidates
    bar = floor * max(sim for _, sim in candidates)
    return [(item, sim) for item, sim in candidates if item.kind == "seed" or item.visits(stage) or sim >= bar]


def keep_evidence(candidates: list[tuple[MemoryItem, float]], size: int, stage: str) -> list[tuple[MemoryItem, float]]:
    """The `size` most similar candidates, except that an item with no evidence in `stage` (never
    visited) gives its place to a less similar item whose evidence says it helps (visited, Q above
    the mean Q of the visited candidates); the least similar untried items go first, the most
    similar proven ones come in first. The pool stays in similarity order.

    Why: every attempt adds a trajectory or a lesson that matches its task's query better than
    general seeds do, so after one pass over a set of tasks the K most similar were mostly fresh,
    unvisited items, and the seeds whose contexts had succeeded fell out of the pool: value could
    not choose them however high their Q (issue 38: value's second pass showed the helpful seeds in
    0.75 of its prompts against 0.95 in its first; `benchmarks/bench_learning_real.py`). Items with
    no evidence still fill every place no proven item needs, so new knowledge is still recalled.
    """
    head, tail = candidates[:size], candidates[size:]
    visited = [item.q(stage) for item, _ in candidates if item.visits(stage)]
    if not tail or not visited:
        return head
    mean = sum(visited) / len(visited)
    proven = [(item, sim) for item, sim in tail if item.visits(stage) and item.q(stage) > mean]
    untried = [n for n in range(len(head) - 1, -1, -1) if not head[n][0].visits(stage)]
    swaps = min(len(proven), len(untried))
    if not swaps:
        return head
    drop = set(untried[:swaps])
    kept = [c for n, c in enumerate(head) if n not in drop] + proven[:swaps]
    order = {id(item): n for n, (item, _) in enumerate(candidates)}
    return sorted(kept, key=lambda c: order[id(c[0])])


#: For a session recorded before a field existed: the value that ranks as that session did. Only fields whose
#: default changed after they were added and recorded (`try_visits`: 0 until issue 38 session 6).
RECORDED_BEFORE: dict[str, Any] = {"try_visits": 0}


@dataclass
class RetrievalPolicy:
    """How to pick the N items put in a prompt. Seeded, so runs are reproducible.

    - `k`: N, the ranked slots; `pool_factor` (lambda) and `pool_size` (K, overrides lambda * N):
      the pool of most similar candidates the slots are chosen from;
    - `exploration`: "epsilon" (each slot is a random remaining candidate with probability
      `epsilon`, else the best by value), "screen", "ucb" (bonus ``ucb_c * sqrt(ln(N+1)/(n+1))``)
      or "none";
    - `value_weight`: w in the score ``w * value + (1 - w) * similarity`` (1: by Q alone);
    - `min_similarity`: drop candidates under this share of the best match (0: keep the pool);
    - `neutral`: an item not yet tried in this stage ranks at the mean value of the pool's tried
      items (neither better nor worse than a typical item) instead of its stored initial value;
    - `rules`: fetch contract knowledge by rule on top of the N slots;
    - `dedup`: near-duplicate trajectories (same task, stage and outcome) take one place in the
      pool, the one of highest stage Q (then the most similar), so they cannot crowd it;
    - `backend_boost`: similarity bonus for items of the task's backend;
    - `reward`: the reward scheme sessions credit with ("paper" or "shaped", see `values`);
    - `refine_norm`: z-normalise refine rewards with the session's running mean and deviation
      (`values.RunningNorm`, the paper's option; off by default);
    - `seed_ties`: among candidates of equal score, seed items go first, the less visited ahead
      (`tie_rank`); False: ties go to similarity alone;
    - `keep_evidence` (value mode, off by default): an untried item in the K most similar gives its place
      to a less similar recalled item whose Q is above the visited candidates' mean (`keep_evidence`), so
      fresh trajectories and lessons cannot push proven items out of the pool. It helped the two-pass
      check of `benchmarks/bench_learning_real.py` (fake verifier: helpful shown 0.55 -> 0.95 on pass 2)
      but cost the growing-bank simulator (`benchmarks/memory_simulation.py`, 8 seeds: mean success 0.444 -> 0.311,
      below random on 4), so it stays an option until one rule serves both; False: the plain top K;
    - `fresh_floor` (value mode, drafting, default 0.5): an untried trajectory, lesson or insight whose
      similarity is under this share of the best match's gives its pool place to the next most similar
      candidate (`drop_loose_fresh`); 0: the plain top K. Measured in
      `benchmarks/results/memory_learning_real.md` (issue 38);
    - `prior_visits` (with `neutral`): a tried item ranks at ``(n Q + m mean) / (n + m)``, n its visits,
      m this, mean the pool's tried items' mean Q: the running-mean update makes an item's first reward
      its whole Q, so one lucky success (+1) put a fresh trajectory above every note whose many visits
      said it helps, and one failure beside four poor notes put a helpful note (-1) under every untried
      item; 0: Q as stored. Default 5 (issue 38): real verifier, seeds 3 and 5, value's second pass showed
      the helpful notes in every prompt (0.88 and 1.00 before) with contexts worth 0.39 (0.33 before, seed 3);
      figures in `benchmarks/results/memory_learning_real.md`;
    - `try_visits` (with `neutral`): an item with fewer visits than this ranks no lower than an untried item
      (the pool's mean), so one failed context does not bury it: optimistic ranking for the little tried.
      Why (issue 38, seed 4 of the real verifier): with most drafts failing, a helpful note first shown in a
      context that failed ranks just under the mean, every fresh trajectory and lesson (untried, at the mean,
      a new one after every failed attempt) stays ahead of it, and only epsilon brought it back; seeds go
      first among equal ranks (`tie_rank`), so the note gets its second context at the next free slot.
      Default 2 (issue 38, session 6): on the real verifier (seeds 3, 4, 5) value's second pass showed a
      helpful note in every prompt and at least as often as its first (0 rescued seed 4's unlucky start
      from 0.25 / 0.23 to 0.66 / 1.00), and on the weak-signal guard restated over 48 seeds
      (`tests/memory/test_learning_weak_signal.py`) it is level with 0: its one cost is a smaller Q1 lead
      of the helpful notes after pass one (+0.05 against +0.08, 200 seeds), since a poor note gets its second
      look too. 0: the rank before. A session recorded before the option reopens with 0 (`from_settings`);
      figures in `benchmarks/results/memory_learning_real.md` (sessions 5 and 6);
    - `credit`: how sessions share an attempt's reward among the items in its context (`values.CREDIT_RULES`):
      "mc" gives every item the reward (the paper's update), "advantage" moves every item by the context's
      surprise, the reward less the mean Q of the items shown, so items shown together can still end
      apart (`values.context_baselines`; issue 38). Default "mc": "advantage" raised value's second-pass
      mean p on `benchmarks/learning_replica.py` (32 seeds: 0.381 against 0.348 on the hidden helpful set,
      0.368 against 0.379 on the similar one) but not on the real verifier (seeds 3, 4), and it did not
      raise the helpful notes' Q1 separation; figures in `benchmarks/results/memory_learning_real.md`.
    """

    mode: str = "value"
    k: int = 5
    seed: int | None = 0
    pool_factor: float = 5.0
    pool_size: int | None = None
    exploration: str = "epsilon"
    epsilon: float = 0.1
    value_weight: float = 1.0
    screen_visits: float = 10.0
    explore_slots: int = 1
    ucb_c: float = 0.1
    backend_boost: float = 0.25
    min_similarity: float = 0.0
    rules: bool = True
    dedup: bool = True
    neutral: bool = True
    reward: str = "paper"
    refine_norm: bool = False
    seed_ties: bool = True
    keep_evidence: bool = False  # off: on the growing-bank simulator it lost 0.44 -> 0.31 (issue 38 note)
    prior_visits: float = 5.0  # issue 38: one lucky or unlucky reward is not an item's whole rank
    fresh_floor: float = 0.5  # issue 38: loosely similar fresh items with no evidence no longer fill the pool
    credit: str = "mc"  # "advantage" measured in issue 38 (values.context_baselines): not a win on the real path
    try_visits: int = 2  # issue 38: one failed context does not bury a note (0 until session 6)
    _rng: random.Random = field(init=False, repr=False, compare=False)
    _rule_cache: dict[tuple[int, str], dict[str, MemoryItem]] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown retrieval mode {self.mode!r}; expected one of {', '.join(MODES)}")
        if self.exploration not in EXPLORATION:
            raise ValueError(
                f"unknown exploration {self.exploration!r}; expected one of {', '.join(EXPLORATION)}"
            )
        if self.k < 1:
            raise ValueError(f"k (memories per prompt) must be at least 1, got {self.k!r}")
        if self.pool_size is not None and self.pool_size < 1:
            raise ValueError(f"pool size must be at least 1, got {self.pool_size!r}")
        if self.pool_factor < 1.0:
            raise ValueError(f"pool factor (lambda) must be at least 1, got {self.pool_factor!r}")
        if not 0.0 <= self.epsilon <= 1.0:
            raise ValueError(f"epsilon must be within 0..1, got {self.epsilon!r}")
        if not 0 <= self.explore_slots <= self.k or self.screen_visits < 0:
            raise ValueError("explore_slots must be within 0..k and screen_visits at least 0")
        if not 0.0 <= self.fresh_floor <= 1.0:
            raise ValueError(f"fresh_floor must be within 0..1, got {self.fresh_floor!r}")
        if not isinstance(self.try_visits, int) or isinstance(self.try_visits, bool) or self.try_visits < 0:
            raise ValueError(f"try_visits must be a whole number of visits, 0 or more, got {self.try_visits!r}")
        if not 0.0 <= self.value_weight <= 1.0:
            raise ValueError(f"value_weight must be within 0..1, got {self.value_weight!r}")
        check_scheme(self.reward)
        check_credit_rule(self.credit)
        self._rng = random.Random(self.seed)

    @property
    def pool(self) -> int:
        """K: how many of the most similar items the N slots are chosen from (at least N)."""
        size = self.pool_size if self.pool_size is not None else round(self.pool_factor * self.k)
        return max(self.k, size)

    def settings(self) -> dict[str, Any]:
        """The fields a session records so that reopening it retrieves the same way."""
        return {
            "mode": self.mode, "k": self.k, "seed": self.seed, "pool_factor": self.pool_factor,
            "pool_size": self.pool_size, "exploration": self.exploration, "epsilon": self.epsilon,
            "value_weight": self.value_weight, "min_similarity": self.min_similarity, "rules": self.rules,
            "dedup": self.dedup, "neutral": self.neutral, "reward": self.reward, "refine_norm": self.refine_norm,
            "seed_ties": self.seed_ties, "keep_evidence": self.keep_evidence,
            "prior_visits": self.prior_visits, "fresh_floor": self.fresh_floor, "credit": self.credit,
            "try_visits": self.try_visits,
        }

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> RetrievalPolicy:
        """The policy a session recorded (`settings()`). A record that lacks a field added later was written
        when the field did not exist, so it gets the value that reproduces the rank of that time
        (`RECORDED_BEFORE`), not today's default; an empty record means "the defaults" and gets today's."""
        values = dict(settings)
        if values:
            for key, then in RECORDED_BEFORE.items():
                values.setdefault(key, then)
        return cls(**values)

    def retrieve(self, store: Recaller, sig: TaskSignature, stage: str) -> list[Retrieved]:
        """The chosen items for this task and stage (ranked slots first, then rule items)."""
        return self.select(store, sig, stage).hits

    def select(self, store: Recaller, sig: TaskSignature, stage: str) -> Selection:
        """The chosen items together with the pool they were chosen from (for events and metrics)."""
        check_stage(stage)
        rule_ids = self._rule_ids(store, sig)
        want = self.pool * (4 if self.dedup or self.keep_evidence else 1) + len(rule_ids)
        raw = store.recall(sig.query_text(), want, backend=sig.backend, backend_boost=self.backend_boost)
        pool = [(item, sim) for item, sim in raw if item.id not in rule_ids]
        if self.dedup:
            pool = dedup_pool(pool, stage)
        similarity_top = [item.id for item, _ in self._relevant(pool[: self.pool])[: self.k]]
        if self.mode == "value" and stage == "draft":
            pool = drop_loose_fresh(pool, stage, self.fresh_floor)
        if self.mode == "value" and self.keep_evidence:
            pool = keep_evidence(pool, self.pool, stage)
        else:
            pool = pool[: self.pool]
        pool = self._relevant(pool)
        if self.mode == "similarity":
            hits = [Retrieved(item, sim, 0.0, 0.0, sim, "similarity") for item, sim in pool[: self.k]]
        elif self.mode == "random":
            picked = self._rng.sample(pool, min(self.k, len(pool)))
            hits = [Retrieved(item, sim, 0.0, 0.0, 0.0, "random") for item, sim in picked]
        else:
            hits = self._by_value(pool, stage)
        hits += self._rule_hits(store, rule_ids, stage)
        described = [{"id": item.id, "similarity": round(sim, 4), "q": round(item.q(stage), 4)} for item, sim in pool]
        return Selection(stage, hits, described, similarity_top)

    # ----------------------------------------------------------------- rules

    def _rule_ids(self, store: Any, sig: TaskSignature) -> dict[str, MemoryItem]:
        """Contract items for the task's backend, when the store can list them."""
        if not self.rules or not hasattr(store, "items"):
            return {}
        key = (id(store), sig.backend)
        if key not in self._rule_cache:  # contract seeds do not change within a run; listing the bank is O(n)
            seeds = store.items("seed")
            self._rule_cache[key] = {
                i.id: i for i in seeds if i.category in RULE_CATEGORIES and (not i.backends or sig.backend in i.backends)
            }
        return self._rule_cache[key]

    @staticmethod
    def _rule_hits(store: Any, rule_ids: dict[str, MemoryItem], stage: str) -> list[Retrieved]:
        return [Retrieved(item, 0.0, normalised_value(item.q(stage), stage), 0.0, 0.0, "rule") for item in rule_ids.values()]

    # ----------------------------------------------------------------- value ranking

    def _relevant(self, pool: list[tuple[MemoryItem, float]]) -> list[tuple[MemoryItem, float]]:
        """Drop candidates under `min_similarity` of the best match, keeping at least k."""
        if not pool or self.min_similarity <= 0:
            return pool
        floor = self.min_similarity * max(sim for _, sim in pool)
        kept = [(item, sim) for item, sim in pool if sim >= floor]
        return kept if len(kept) >= self.k else pool[: max(self.k, len(kept))]

    def _by_value(self, pool: list[tuple[MemoryItem, float]], stage: str) -> list[Retrieved]:
        w = self.value_weight
        total = sum(item.visits(stage) for item, _ in pool)
        visited = [item.q(stage) for item, _ in pool if item.visits(stage)]
        neutral = sum(visited) / len(visited) if visited and self.neutral else None
        scored = []
        for item, sim in pool:
            q = item.q(stage) if neutral is None or item.visits(stage) else neutral
            if neutral is not None and self.prior_visits and item.visits(stage):
                # evidence counts: a Q from few visits is pulled toward the pool's mean (see `prior_visits`)
                n = item.visits(stage)
                q = (n * q + self.prior_visits * neutral) / (n + self.prior_visits)
            if neutral is not None and item.visits(stage) < self.try_visits:
                q = max(q, neutral)  # too little evidence to rank under an item never tried (see `try_visits`)
            value = normalised_value(q, stage)
            bonus = 0.0
            if self.exploration == "ucb":
                bonus = self.ucb_c * math.sqrt(math.log(total + 1) / (item.visits(stage) + 1))
            scored.append(Retrieved(item, sim, value, bonus, w * value + (1 - w) * sim + bonus, "value"))
        # Last tie-break: the pool's order (similarity, then the bank's insertion order), never the id:
        # trajectory and insight ids are random (uuid4), so ordering by them made runs differ.
        pos = {id(r): n for n, r in enumerate(scored)}
        if self.seed_ties:
            scored.sort(key=lambda r: (-r.score, tie_rank(r.item, stage), -r.similarity, pos[id(r)]))
        else:
            scored.sort(key=lambda r: (-r.score, -r.similarity, pos[id(r)]))
        if self.exploration == "screen":
            return self._screen(scored, total / len(scored) if scored else 0.0)
        if self.exploration != "epsilon":
            return scored[: self.k]
        chosen: list[Retrieved] = []
        rest = list(scored)
        while rest and len(chosen) < self.k:
            if self.epsilon > 0 and self._rng.random() < self.epsilon:
                pick = rest.pop(self._rng.randrange(len(rest)))
                pick.exploration, pick.chosen_by = 1.0, "explore"
            else:
                pick = rest.pop(0)
            chosen.append(pick)
        return chosen

    def _screen(self, ranked: list[Retrieved], mean_visits: float) -> list[Retrieved]:
        """A random slate while the candidates are little known, else the best plus random others."""
        keep = 0 if mean_visits < self.screen_visits else self.k - self.explore_slots
        head, rest = ranked[:keep], ranked[keep:]
        tail = self._rng.sample(rest, min(self.k - len(head), len(rest)))
        for r in tail:
            r.exploration, r.chosen_by = 1.0, "explore"
        pos = {id(r): n for n, r in enumerate(rest)}
        return head + sorted(tail, key=lambda r: (-r.score, -r.similarity, pos[id(r)]))

    # ----------------------------------------------------------------- start points

    def choose_start(self, points: list[tuple[Any, float]]) -> tuple[Any, bool]:
        """Pick a refine start point epsilon-greedily by Q2; `points` are (key, q2), oldest first.

        Returns (key, explored). Ties go to the later start point (the newer variant).
        """
        if not points:
            raise ValueError("no start points to choose from")
        if len(points) > 1 and self.epsilon > 0 and self._rng.random() < self.epsilon:
            return points[self._rng.randrange(len(points))][0], True
        best = max(range(len(points)), key=lambda i: (points[i][1], i))
        return points[best][0], False
