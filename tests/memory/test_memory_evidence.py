"""Issue 38: fresh items with no evidence must not push items whose evidence says they help out of
value retrieval's pool. After one pass over a set of tasks every task had trajectories and lessons
that match its query better than general notes do; they filled the K most similar places, the notes
whose contexts had succeeded fell out of the pool, and value retrieval could no longer choose them
(`benchmarks/bench_learning_real.py`: value's second pass showed the helpful seeds less often than
its first)."""

from __future__ import annotations

import pytest

from memory import MemoryItem, MemoryStore, RetrievalPolicy, TaskSignature
from memory.retrieval import keep_evidence

SIG = TaskSignature(task="relu", category="activation", backend="cpu", shapes="x: 4096", text="elementwise relu")


def _note(i: int, text: str) -> MemoryItem:
    return MemoryItem(id=f"note{i}", kind="seed", backends=["cpu"], category="", title=f"note {i}", text=text)


def _fresh(i: int) -> MemoryItem:
    text = "relu relu elementwise activation cpu draft incorrect lesson x 4096"
    return MemoryItem(id=f"fresh{i}", kind="insight", backends=["cpu"], category="", title=f"fresh {i}", text=text)


@pytest.fixture
def store(tmp_path):
    s = MemoryStore(tmp_path / "m.json", seed=False, fsync=False)
    # four general notes, the last one the least similar to the task but the one that helps
    s.add_many([_note(0, "relu elementwise cpu loop"), _note(1, "elementwise cpu loop"), _note(2, "cpu loop"),
                _note(3, "loop unrolling")])
    # most drafts fail: every note was in failed contexts, the helpful one also in successful ones
    for _ in range(4):
        s.credit(["note0", "note1", "note2"], "draft", -1.0)
    for reward in (1.0, 1.0, -1.0):
        s.credit(["note3"], "draft", reward)
    s.credit(["fresh_lucky"], "draft", 1.0)  # unknown id: ignored
    s.add_many([_fresh(i) for i in range(6)], neutral=True)  # pass one's lessons: similar, never shown
    yield s
    s.close()


def test_the_scenario_pushes_the_proven_note_out_of_the_plain_similarity_pool(store):
    """Without the rule the pool of K = 7 is the six fresh items and the most similar note, so value
    cannot choose note3."""
    policy = RetrievalPolicy(mode="value", k=2, pool_size=7, exploration="none", keep_evidence=False)
    selection = policy.select(store, SIG, "draft")
    assert {p["id"] for p in selection.pool} == {f"fresh{i}" for i in range(6)} | {"note0"}


def test_fresh_items_without_evidence_do_not_push_proven_items_out_of_the_pool(store):
    policy = RetrievalPolicy(mode="value", k=2, pool_size=7, exploration="none", keep_evidence=True)
    selection = policy.select(store, SIG, "draft")
    pool = [p["id"] for p in selection.pool]
    assert "note3" in pool and "note0" in pool and len(pool) == 7
    assert [p["similarity"] for p in selection.pool] == sorted((p["similarity"] for p in selection.pool), reverse=True)
    assert selection.ranked[0].item.id == "note3"  # the one item whose evidence says it helps is shown
    # notes with evidence below the mean (note1, note2 at Q -1) do not come back in: only proven ones do
    assert not {"note1", "note2"} & set(pool)


def test_similarity_mode_keeps_the_plain_top_k(store):
    policy = RetrievalPolicy(mode="similarity", k=2, pool_size=7)
    selection = policy.select(store, SIG, "draft")
    assert "note3" not in {p["id"] for p in selection.pool}


def test_keep_evidence_swaps_the_least_similar_untried_items_only():
    tried = _note(0, "a")
    tried.q1, tried.visits1 = 0.5, 2
    low = _note(1, "b")
    low.q1, low.visits1 = -1.0, 3
    fresh = [_fresh(i) for i in range(3)]
    candidates = [(fresh[0], 0.9), (low, 0.8), (fresh[1], 0.7), (fresh[2], 0.6), (tried, 0.5)]
    kept = keep_evidence(candidates, 4, "draft")
    assert [i.id for i, _ in kept] == ["fresh0", "note1", "fresh1", "note0"]
    assert keep_evidence(candidates, 5, "draft") == candidates  # everything fits: nothing to swap
    assert keep_evidence(candidates[:4], 4, "draft") == candidates[:4]


def test_one_lucky_success_does_not_outrank_a_note_with_much_evidence(tmp_path):
    """The running-mean update makes a first reward the whole Q: one success puts a fresh item at +1.
    Ranked with `prior_visits` (an option, off by default until the benchmark has tuned it), its Q is
    pulled toward the pool's mean, so a note that helped in 7 of 10 contexts stays ahead of it."""
    s = MemoryStore(tmp_path / "m.json", seed=False, fsync=False)
    s.add_many([_note(0, "relu elementwise cpu loop"), _note(1, "elementwise cpu loop"), _fresh(0)])
    for r in (1, 1, 1, 1, 1, 1, 1, -1, -1, -1):
        s.credit(["note0"], "draft", float(r))
    for _ in range(10):
        s.credit(["note1"], "draft", -1.0)
    s.credit(["fresh0"], "draft", 1.0)
    policy = RetrievalPolicy(mode="value", k=1, exploration="none", prior_visits=5)
    assert policy.select(s, SIG, "draft").ranked[0].item.id == "note0"
    plain = RetrievalPolicy(mode="value", k=1, exploration="none")
    assert plain.select(s, SIG, "draft").ranked[0].item.id == "fresh0"  # what it was before
    s.close()
