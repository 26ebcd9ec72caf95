from __future__ import annotations

from memory.simulation import SimConfig, run_all


def test_value_retrieval_learns_in_the_simulated_environment():
    """A small seeded run: value retrieval beats similarity and random and gets close to the oracle."""
    results = run_all(SimConfig(seed=2, episodes=300), policy_seed=2)
    last = {mode: r.mean_probability(100) for mode, r in results.items()}
    first_value = sum(results["value"].probability[:20]) / 20
    assert last["value"] > first_value, "value retrieval should improve with use"
    assert last["value"] > last["similarity"] + 0.1
    assert last["value"] > last["random"] + 0.3
    assert last["value"] >= 0.75 * last["oracle"]
