from __future__ import annotations

import tempfile
from pathlib import Path

from benchmarks.memory_simulation import SimConfig, build_world, run_method


def test_simulated_bank_grows_and_value_retrieval_beats_random():
    """A small seeded run of the growing-bank simulator: the bank gains items as attempts are made,
    both stages run, and value retrieval does better than random retrieval from the same pool."""
    cfg = SimConfig(seed=7, categories=2, tasks_per_category=3, rounds=2)
    world = build_world(cfg)
    assert 0.1 < world.similarity_utility_correlation() < 0.9  # informative but imperfect similarity
    with tempfile.TemporaryDirectory() as tmp:
        runs = {m: run_method(world, m, Path(tmp), 7) for m in ("oracle", "value", "random")}
    value = runs["value"]
    assert len(value.attempts) == cfg.budget * cfg.tasks_per_category * cfg.categories * cfg.rounds
    assert value.draft and value.refine  # both stages ran
    assert runs["oracle"].success() > value.success() > runs["random"].success()
    assert value.slots and value.trajectory_slots < value.slots  # trajectories do not fill every slot


def test_regression_probe_separates_items_that_context_rewards_tell_apart():
    """The analysis probe credits jointly: an item seen only in winning contexts outranks one seen only
    in losing contexts, even though both shared their contexts with the same neutral companion."""
    from benchmarks.memory_simulation import RegressionProbe

    probe = RegressionProbe(sigma=0.0, seed=1, stages=("refine",))
    for _ in range(5):
        probe.update("refine", ["good", "companion"], 1.0)
        probe.update("refine", ["bad", "companion"], -1.0)
    assert probe.pick("refine", ["bad", "companion", "good"], 1) == ["good"]
    assert probe.pick("refine", ["bad", "companion", "good"], 3)[-1] == "bad"
    assert probe.pick("draft", ["bad", "good"], 1) is None  # a stage it does not cover is left to the policy


def test_known_seed_world_ranks_seeds_by_their_hidden_utility():
    from benchmarks.memory_simulation import known_seed_world

    world = build_world(SimConfig(seed=3, categories=1))
    known = known_seed_world(world)
    seeds = [s for s in known.items.values() if s.item.kind == "seed"]
    by_q = sorted(seeds, key=lambda s: -s.item.q2)
    by_u = sorted(seeds, key=lambda s: -sum(s.refine.values()))
    assert [s.item.id for s in by_q] == [s.item.id for s in by_u] and all(s.item.visits2 >= 1000 for s in seeds)
    assert all(s.item.visits2 == 0 for s in world.items.values())  # the original world is untouched
