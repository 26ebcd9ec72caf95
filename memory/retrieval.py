"""Stage-aware retrieval: lexical recall of candidates, then ranking by the stage's learned value.

Every item in an attempt's context is credited with the same return, so an item's Q is the mean
return of the contexts it appeared in. Ranked greedily from the start, weak items that happen to sit
next to strong ones inherit their return and the ranking locks in early. The default exploration,
"screen", therefore first shows the relevant candidates in random slates (random companions, so
each item's mean return reflects its own contribution) until they average `screen_visits` visits,
then exploits: the top k - `explore_slots` by value, plus random picks among the rest so new items
still get tried. "ucb" and "epsilon" remain for comparison; `similarity` and `random` modes rank
the same candidates by BM25 alone or draw them at random, for ablation.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any, Protocol

from memory.items import MemoryItem, TaskSignature, check_stage
from memory.values import normalised_value

MODES = ("value", "similarity", "random")
EXPLORATION = ("screen", "ucb", "epsilon", "none")


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

    def to_dict(self) -> dict[str, Any]:
        return {
            "item": self.item.to_dict(),
            "similarity": self.similarity,
            "value": self.value,
            "exploration": self.exploration,
            "score": self.score,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Retrieved:
        return cls(
            item=MemoryItem.from_dict(d["item"]),
            similarity=float(d["similarity"]),
            value=float(d["value"]),
            exploration=float(d["exploration"]),
            score=float(d["score"]),
        )


@dataclass
class RetrievalPolicy:
    """How to pick the k items put in a prompt. Seeded, so runs are reproducible.

    - `candidates`: size of the lexical recall pool that is then ranked;
    - `min_similarity`: candidates below this share of the best match are dropped (the k best are
      always kept), so a value learnt on unrelated tasks cannot pull in an unrelated item; 0.5 also
      drops items that share only the backend with the task (the boost alone gives them 0.2);
    - `value_weight`: w in the score ``w * value + (1 - w) * similarity`` (value mode);
    - `exploration`: "screen" (random slates of the relevant candidates until they average
      `screen_visits` stage visits, then the best k - `explore_slots` plus random others), "ucb"
      (bonus ``ucb_c * sqrt(ln(N + 1) / (n + 1))``), "epsilon" (each slot is a random candidate
      with probability `epsilon`) or "none";
    - `backend_boost`: similarity bonus for items of the task's backend; other backends still count.
    """

    mode: str = "value"
    k: int = 5
    seed: int | None = 0
    candidates: int = 40
    value_weight: float = 1.0
    exploration: str = "screen"
    screen_visits: float = 10.0
    explore_slots: int = 1
    ucb_c: float = 0.1
    epsilon: float = 0.1
    backend_boost: float = 0.25
    min_similarity: float = 0.5
    _rng: random.Random = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown retrieval mode {self.mode!r}; expected one of {', '.join(MODES)}")
        if self.exploration not in EXPLORATION:
            raise ValueError(
                f"unknown exploration {self.exploration!r}; expected one of {', '.join(EXPLORATION)}"
            )
        if self.k < 1 or self.candidates < 1:
            raise ValueError("k and candidates must be at least 1")
        if not 0 <= self.explore_slots <= self.k or self.screen_visits < 0:
            raise ValueError("explore_slots must be within 0..k and screen_visits at least 0")
        if not 0.0 <= self.value_weight <= 1.0:
            raise ValueError(f"value_weight must be within 0..1, got {self.value_weight!r}")
        self._rng = random.Random(self.seed)

    def retrieve(self, store: Recaller, sig: TaskSignature, stage: str) -> list[Retrieved]:
        """The top k items for this task and stage, best first, with their score parts."""
        check_stage(stage)
        pool = store.recall(
            sig.query_text(),
            max(self.candidates, self.k),
            backend=sig.backend,
            backend_boost=self.backend_boost,
        )
        if self.mode == "similarity":
            return [Retrieved(item, sim, 0.0, 0.0, sim) for item, sim in pool[: self.k]]
        if self.mode == "random":
            picked = self._rng.sample(pool, min(self.k, len(pool)))
            return [Retrieved(item, sim, 0.0, 0.0, 0.0) for item, sim in picked]
        return self._by_value(pool, stage)

    def _relevant(self, pool: list[tuple[MemoryItem, float]]) -> list[tuple[MemoryItem, float]]:
        """Drop candidates under `min_similarity` of the best match, keeping at least k."""
        if not pool or self.min_similarity <= 0:
            return pool
        floor = self.min_similarity * max(sim for _, sim in pool)
        kept = [(item, sim) for item, sim in pool if sim >= floor]
        return kept if len(kept) >= self.k else pool[: max(self.k, len(kept))]

    def _by_value(self, pool: list[tuple[MemoryItem, float]], stage: str) -> list[Retrieved]:
        pool = self._relevant(pool)
        w = self.value_weight
        total = sum(item.visits(stage) for item, _ in pool)
        scored = []
        for item, sim in pool:
            value = normalised_value(item.q(stage), stage)
            bonus = 0.0
            if self.exploration == "ucb":
                bonus = self.ucb_c * math.sqrt(math.log(total + 1) / (item.visits(stage) + 1))
            scored.append(Retrieved(item, sim, value, bonus, w * value + (1 - w) * sim + bonus))
        scored.sort(key=lambda r: (-r.score, -r.similarity, r.item.id))
        if self.exploration == "screen":
            return self._screen(scored, total / len(scored) if scored else 0.0)
        if self.exploration != "epsilon":
            return scored[: self.k]
        chosen: list[Retrieved] = []
        rest = list(scored)
        while rest and len(chosen) < self.k:
            if self._rng.random() < self.epsilon:
                pick = rest.pop(self._rng.randrange(len(rest)))
                pick.exploration = 1.0
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
            r.exploration = 1.0
        return head + sorted(tail, key=lambda r: (-r.score, -r.similarity, r.item.id))
