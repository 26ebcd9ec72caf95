from __future__ import annotations

from memory.simulation import SimConfig, run_all


def test_value_retrieval_learns_in_the_simulated_environment():
    """A small seeded run (300 episodes): value retrieval reaches 90% of the oracle and beats similarity."""
    results = run_all(SimConfig(seed=2, episodes=300), policy_seed=2)
    last = {mode: r.mean_probability(100) for mode, r in results.items()}
    first_value = sum(results["value"].probability[:20]) / 20
    assert last["value"] > first_value + 0.2, "value retrieval should improve with use"
    assert last["value"] >= 0.9 * last["oracle"]
    assert last["value"] > last["similarity"] + 0.15
    assert last["value"] > last["random"] + 0.4
