from __future__ import annotations

import tempfile
from pathlib import Path

from memory.simulation import SimConfig, build_world, run_method


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
