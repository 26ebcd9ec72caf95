"""Issue 38, seed 4 of the real verifier: one failed context must not bury a helpful note.

What happened there (`benchmarks/results/memory_learning_real.md`, sessions 4 and 5): early in the first pass a
context holding three helpful notes failed (p 0.58) and one holding none succeeded (p 0.10). The lucky notes then
held four of five slots while they failed their way down; the helpful ones, at -1 after one visit, ranked just
under the pool's mean, so every untried item (a fresh trajectory after every failed draft, ranked at the mean)
stayed ahead of them and only epsilon could bring them back: helpful notes in 0.25 of the prompts, both passes.

The bank below is that state, small and without chance: the model succeeds exactly when a helpful note is in
the context, epsilon is 0, each failed draft leaves a fresh trajectory that matches the task well. The option
`try_visits` 2 (an item with one visit ranks no lower than an untried one, seeds first among equals) gives a
helpful note its second context at once, and it climbs; today's default rank (try_visits 0) never shows one.
(Not the default: with a weak signal it costs the fast guard, see `RetrievalPolicy.try_visits`.)
"""

from __future__ import annotations

import pytest

from memory import MemoryItem, MemoryStore, RetrievalPolicy, TaskSignature

SIG = TaskSignature(task="relu", category="elementwise", backend="cpu", shapes="x: 256x1024 f32", text="relu kernel")
PROMPTS = 10


def _item(name: str, kind: str, words: str, q1: float = 0.0, visits1: int = 0) -> MemoryItem:
    data = {"task": "relu", "stage": "draft", "outcome": "incorrect"} if kind == "trajectory" else {}
    return MemoryItem(id=name, kind=kind, backends=["cpu"], category="elementwise", title=name,
                      text=f"relu elementwise cpu kernel {words} {name}", q1=q1, visits1=visits1, data=data)


def _drafts(tmp_path, policy: RetrievalPolicy) -> tuple[list[int], dict[str, float]]:
    """Helpful notes per prompt over PROMPTS drafts, and the final draft Q of each item."""
    store = MemoryStore(tmp_path / f"m{policy.try_visits}.json", seed=False, fsync=False)
    store.add_many([
        # the helpful notes: least similar (as the hidden set is), one context each, which failed
        *[_item(f"helpful-{n}", "seed", "", -1.0, 1) for n in range(3)],
        # the lucky context's notes: one success, then three failures
        *[_item(f"lucky-{n}", "seed", "relu", -0.5, 4) for n in range(4)],
        *[_item(f"poor-{n}", "seed", "relu kernel", -0.8, 5) for n in range(6)],
        # two failed drafts' trajectories, never shown yet: they rank at the pool's mean
        *[_item(f"traj-old-{n}", "trajectory", "relu relu kernel") for n in range(2)],
    ])
    shown = []
    try:
        for n in range(PROMPTS):
            ids = [h.item.id for h in policy.select(store, SIG, "draft").ranked]
            helpful = sum(i.startswith("helpful") for i in ids)
            shown.append(helpful)
            store.credit(ids, "draft", 1.0 if helpful else -1.0)
            if not helpful:
                store.add_many([_item(f"traj-{n}", "trajectory", "relu relu kernel")])
        q = {i.id: i.q1 for i in store.items()}
    finally:
        store.close()
    return shown, q


def test_a_helpful_note_that_failed_once_gets_a_second_context(tmp_path):
    shown, q = _drafts(tmp_path, RetrievalPolicy(epsilon=0.0, rules=False, try_visits=2))
    assert shown[0] >= 1, shown  # its second context comes at the next prompt, ahead of the untried trajectories
    assert sum(1 for k in shown if k) == PROMPTS, shown
    best_helpful = max(q[f"helpful-{n}"] for n in range(3))
    assert best_helpful > max(q[f"lucky-{n}"] for n in range(4)), q  # and, helping, it ends above the lucky notes


def test_todays_default_rank_never_shows_one_again(tmp_path):
    """The defeating candidate: the default rank (prior_visits 5 alone, try_visits 0), issue 38's seed 4."""
    assert RetrievalPolicy().try_visits == 0
    shown, q = _drafts(tmp_path, RetrievalPolicy(epsilon=0.0, rules=False))
    assert shown == [0] * PROMPTS
    assert all(q[f"helpful-{n}"] == -1.0 for n in range(3))


@pytest.mark.parametrize("bad", [-1, 1.5, True, "2"])
def test_try_visits_must_be_a_whole_number(bad):
    with pytest.raises(ValueError, match="try_visits"):
        RetrievalPolicy(try_visits=bad)


def test_try_visits_is_recorded_so_a_reopened_session_ranks_the_same():
    assert RetrievalPolicy().settings()["try_visits"] == 0
    assert RetrievalPolicy(**RetrievalPolicy(try_visits=2).settings()).try_visits == 2
    # a session recorded before the option existed reopens with the default
    old = {k: v for k, v in RetrievalPolicy().settings().items() if k != "try_visits"}
    assert RetrievalPolicy(**old).try_visits == 0
