"""Issue 38 guard: value retrieval must keep beating similarity when the memories' signal is weak.

The drafting loop's learning step (`benchmarks/learning_replica.py`: the product's retrieval, credit and
trajectory writing over the 4 built-in and 8 KernelBench-format tasks of `bench_learning_real.py`, two
passes over one bank) against a model whose draft succeeds with p = 0.1 + 0.3 x share of four hidden
helpful seeds among the ranked items: p_good (0.34 with four of five helpful) close to p_base (0.1).
The same check through `evokernel bench` and the real verifier is `benchmarks/bench_learning_real.py`.

Why over 48 seeds, as means: with so weak a signal every figure is a statistical property, not a
per-run one. The guard used to check seeds 1 and 2 one by one, and its "the helpful seeds' Q1 leads
after pass one" held on only 26 of seeds 1-40 with a healthy retrieval, so a change that merely
reshuffled the draws could fail it, or pass it by luck. Here each check is a mean over seeds 1-48, its
threshold set between the distributions measured over seeds 1-200 for the healthy ranks and for broken
ones (`benchmarks/results/memory_learning_real.md`, session 6): mean over 200 seeds +- the spread of a
48-seed mean, and [the mean over seeds 1-48, what the tests below see]:

| check (mean over the seeds) | try_visits 2 (default) | try_visits 0 | similarity rank | Q ignored | threshold |
|---|---|---|---|---|---|
| pass 2 helpful shown, value - similarity | +0.78 +- 0.04 [.76] | +0.81 +- 0.04 [.77] | +0.07 [.08] | +0.71 [.71] | >= 0.40 |
| pass 2 mean p, value - similarity | +0.077 +- 0.006 [.076] | +0.080 [.077] | +0.004 [.005] | +0.066 [.064] | >= 0.04 |
| helpful shown, value's pass 2 - pass 1 | +0.10 +- 0.03 [.12] | +0.11 [.12] | -0.16 [-.14] | +0.01 +- 0.01 [.02] | >= 0.04 |
| Q1 helpful - other seeds, after pass 1 | +0.05 +- 0.02 [.04] | +0.08 [.08] | +0.08 [.07] | +0.14 [.20] | > 0 |

"Similarity rank" is value mode ranking its pool by similarity alone (value_weight 0); "Q ignored" ranks
every item as never tried while credit is still stored. Q ignored still beats similarity: value mode's
structure (seeds first among equal ranks, the fresh floor) puts the hidden seeds in prompts with no
learning at all. What shows that learning steers retrieval is the third line: pass two, on pass one's
bank, shows the helpful seeds more often than pass one did. Its threshold lies 1.8 spreads under the
default's mean and 2.7 over Q ignored's; 48 seeds is what that takes (with 32, about 1.5 and 2.2).
The Q1 lead is the bank's learning, not retrieval's (every rank that credits learns it); it fails when
nothing is credited (no tried seed: NaN). Slow: about 190 replica runs, two minutes of CPU.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_learning_real as real  # noqa: E402
import learning_replica as replica  # noqa: E402

STRENGTH = 0.3  # p_good 0.34 against p_base 0.1
SEEDS = range(1, 49)
SHOWN_LEAD = 0.40  # pass 2: value shows a helpful memory in this many more prompts than similarity
P_LEAD = 0.04  # pass 2: value's contexts are worth this much more (mean p) than similarity's
LEARNT = 0.04  # value's pass 2 shows a helpful memory in this many more prompts than its own pass 1
Q_LEAD = 0.0  # the helpful seeds' Q1 above the other tried seeds' after pass one

Runs = dict[int, list[dict[str, float]]]

# 48 seeds of the replica per mode (about 100 s of CPU on a quiet core; each xdist worker builds the module's
# similarity fixture itself): at a load of 10-14 on 2 cores a test with its fixture took 600 s, the default
# timeout, so these get more room
pytestmark = pytest.mark.timeout(1800)


@pytest.fixture(scope="module")
def world():
    tasks = replica.tasks_of([*real.BUILTIN, *real.KERNELBENCH, *real.KB_ELEMENTWISE])
    return tasks, real.candidate_sources()


@pytest.fixture(scope="module")
def similarity(world) -> Runs:
    return _runs(world, "similarity")


def _runs(world, mode: str, policy: dict[str, Any] | None = None) -> Runs:
    tasks, sources = world
    return {seed: replica.run(mode, seed, tasks, sources, real.HELPFUL, strength=STRENGTH, policy=policy)
            for seed in SEEDS}


def _mean(xs: list[float]) -> float:
    return statistics.fmean(xs) if xs and all(x == x for x in xs) else float("nan")  # a NaN fails every check


def _guard(value: Runs, similarity: Runs) -> list[str]:
    """What fails the issue's bar, as means over the seeds (see the module's note for the thresholds)."""
    seeds = sorted(value)
    shown = _mean([value[s][1]["shown"] - similarity[s][1]["shown"] for s in seeds])
    p = _mean([value[s][1]["p"] - similarity[s][1]["p"] for s in seeds])
    learnt = _mean([value[s][1]["shown"] - value[s][0]["shown"] for s in seeds])
    lead = _mean([value[s][0]["q_helpful"] - value[s][0]["q_others"] for s in seeds])
    why = []
    if not shown >= SHOWN_LEAD:
        why.append(f"pass two shows a helpful memory in {shown:+.2f} of prompts more than similarity (want {SHOWN_LEAD})")
    if not p >= P_LEAD:
        why.append(f"pass two's contexts are worth {p:+.3f} more than similarity's (want {P_LEAD})")
    if not learnt >= LEARNT:
        why.append(f"pass two shows a helpful memory in {learnt:+.3f} of prompts more than pass one (want {LEARNT}): "
                   "what pass one learnt does not steer retrieval")
    if not lead > Q_LEAD:
        why.append(f"the helpful seeds' Q1 leads the others' by {lead:+.3f} after pass one: the bank did not learn")
    return why


@pytest.mark.slow
def test_value_beats_similarity_on_the_second_pass_with_a_weak_signal(world, similarity):
    assert _guard(_runs(world, "value"), similarity) == []


@pytest.mark.slow
def test_pure_similarity_ranking_fails_the_guard(world, similarity):
    """The candidate that would defeat the guard: value mode ranking its pool by similarity alone
    (value_weight 0), i.e. learning that no longer steers retrieval."""
    why = _guard(_runs(world, "value", {"value_weight": 0.0}), similarity)
    assert any("more than similarity" in w for w in why), why
    assert any("more than pass one" in w for w in why), why


@pytest.mark.slow
def test_retrieval_that_ignores_the_learned_values_fails_the_guard(world, similarity, monkeypatch):
    """The subtler candidate: credit still stored, but the rank sees every item as never tried (Q ignored).
    It beats similarity by structure alone, so only the pass-one-to-two check can catch it."""
    from memory import RetrievalPolicy

    by_value = RetrievalPolicy._by_value

    def blind(self, pool, stage):
        fresh = []
        for item, sim in pool:
            copy = item.clone()
            copy.q1, copy.visits1, copy.q2, copy.visits2 = 0.0, 0, 0.0, 0
            fresh.append((copy, sim))
        return by_value(self, fresh, stage)

    monkeypatch.setattr(RetrievalPolicy, "_by_value", blind)
    why = _guard(_runs(world, "value"), similarity)
    assert any("more than pass one" in w for w in why), why
