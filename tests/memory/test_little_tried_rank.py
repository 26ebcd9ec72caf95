"""Issue 38, seed 4 of the real verifier: one failed context must not bury a helpful note.

What happened there (`benchmarks/results/memory_learning_real.md`, sessions 4 and 5): early in the first pass a
context holding three helpful notes failed (p 0.58) and one holding none succeeded (p 0.10). The lucky notes then
held four of five slots while they failed their way down; the helpful ones, at -1 after one visit, ranked just
under the pool's mean, so every untried item (a fresh trajectory after every failed draft, ranked at the mean)
stayed ahead of them and only epsilon could bring them back: helpful notes in 0.25 of the prompts, both passes.

The bank below is that state, small and without chance: the model succeeds exactly when a helpful note is in
the context, epsilon is 0, each failed draft leaves a fresh trajectory that matches the task well. The option
`try_visits` 2 (an item with one visit ranks no lower than an untried one, seeds first among equals) gives a
helpful note its second context at once, and it climbs; the rank before it (try_visits 0, the default until
issue 38 session 6) never shows one.
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
    assert RetrievalPolicy().try_visits == 2  # the default since issue 38 session 6
    shown, q = _drafts(tmp_path, RetrievalPolicy(epsilon=0.0, rules=False))
    assert shown[0] >= 1, shown  # its second context comes at the next prompt, ahead of the untried trajectories
    assert sum(1 for k in shown if k) == PROMPTS, shown
    best_helpful = max(q[f"helpful-{n}"] for n in range(3))
    assert best_helpful > max(q[f"lucky-{n}"] for n in range(4)), q  # and, helping, it ends above the lucky notes


def test_the_rank_without_it_never_shows_one_again(tmp_path):
    """The defeating candidate: the rank before (prior_visits 5 alone, try_visits 0), issue 38's seed 4."""
    shown, q = _drafts(tmp_path, RetrievalPolicy(epsilon=0.0, rules=False, try_visits=0))
    assert shown == [0] * PROMPTS
    assert all(q[f"helpful-{n}"] == -1.0 for n in range(3))


@pytest.mark.parametrize("bad", [-1, 1.5, True, "2"])
def test_try_visits_must_be_a_whole_number(bad):
    with pytest.raises(ValueError, match="try_visits"):
        RetrievalPolicy(try_visits=bad)


def test_try_visits_is_recorded_so_a_reopened_session_ranks_the_same():
    assert RetrievalPolicy().settings()["try_visits"] == 2
    for n in (0, 2, 3):
        assert RetrievalPolicy.from_settings(RetrievalPolicy(try_visits=n).settings()).try_visits == n
    # a session recorded before the option existed ranked with the equivalent of 0: it reopens so, not with
    # today's default (the candidate that would defeat this: `RetrievalPolicy(**old)`, which gives 2)
    old = {k: v for k, v in RetrievalPolicy().settings().items() if k != "try_visits"}
    assert RetrievalPolicy.from_settings(old).try_visits == 0
    assert RetrievalPolicy(**old).try_visits == 2
    # no record at all means the defaults
    assert RetrievalPolicy.from_settings({}).try_visits == 2


def test_a_reopened_session_recorded_before_the_option_ranks_as_it_did(tmp_path):
    """Through the session's own path: a session.json whose retrieval record lacks `try_visits` (written
    before session 5 of issue 38) reopens with 0; one that records it keeps what it recorded."""
    import json

    from core.session import Session
    from core.tasks import load_task

    for recorded, reopened in ((None, 0), (2, 2), (0, 0)):
        policy = RetrievalPolicy(mode="value", seed=7, try_visits=recorded if recorded is not None else 2)
        session = Session.create(load_task("relu"), model=None, root=tmp_path / f"s{recorded}", policy=policy)
        session.close()
        meta_path = session.path / "session.json"
        meta = json.loads(meta_path.read_text())
        if recorded is None:
            del meta["settings"]["retrieval"]["try_visits"]
        meta_path.write_text(json.dumps(meta))
        again = Session.open(session.path)
        try:
            assert again.policy.try_visits == reopened and again.policy.seed == 7
        finally:
            again.close()
