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
    Ranked with `prior_visits` (5 by default since issue 38, session 4), its Q is pulled toward the pool's
    mean, so a note that helped in 7 of 10 contexts stays ahead of it."""
    s = MemoryStore(tmp_path / "m.json", seed=False, fsync=False)
    s.add_many([_note(0, "relu elementwise cpu loop"), _note(1, "elementwise cpu loop"), _fresh(0)])
    for r in (1, 1, 1, 1, 1, 1, 1, -1, -1, -1):
        s.credit(["note0"], "draft", float(r))
    for _ in range(10):
        s.credit(["note1"], "draft", -1.0)
    s.credit(["fresh0"], "draft", 1.0)
    policy = RetrievalPolicy(mode="value", k=1, exploration="none", prior_visits=5)
    assert policy.select(s, SIG, "draft").ranked[0].item.id == "note0"
    assert RetrievalPolicy(mode="value", k=1, exploration="none").select(s, SIG, "draft").ranked[0].item.id == "note0"
    plain = RetrievalPolicy(mode="value", k=1, exploration="none", prior_visits=0)
    assert plain.select(s, SIG, "draft").ranked[0].item.id == "fresh0"  # what it was before
    s.close()


# --------------------------------------------------------------------------- the default rule: fresh_floor


def _trajectory(task: str, text: str, n: int = 0) -> MemoryItem:
    return MemoryItem(id=f"t-{task}-{n}", kind="trajectory", backends=["cpu"], category="", title=f"draft incorrect: {task}",
                      text=text, data={"task": task, "stage": "draft", "outcome": "incorrect"})


@pytest.fixture
def crowded(tmp_path):
    """After a pass over other tasks: a note whose contexts succeeded (2 of 3), one whose contexts failed,
    this task's own lesson (the best match) and eight lessons of other tasks that share only the
    boilerplate words with this one; every fresh item untried."""
    s = MemoryStore(tmp_path / "m.json", seed=False, fsync=False)
    s.add_many([MemoryItem(id="proven", kind="seed", backends=["cpu"], category="", title="Loop unrolling",
                           text="unroll the inner loop by four"),
                MemoryItem(id="failed", kind="seed", backends=["cpu"], category="", title="Elementwise loops",
                           text="elementwise loop over the tensor")])
    for reward in (1.0, 1.0, -1.0):
        s.credit(["proven"], "draft", reward)
    for _ in range(3):
        s.credit(["failed"], "draft", -1.0)
    s.add_many([_trajectory("relu", "relu elementwise activation x 4096 kernel")], neutral=True)
    s.add_many([_trajectory(f"task{i}", f"task{i} kernel loop over the tensor elementwise cpu", i) for i in range(8)],
               neutral=True)
    yield s
    s.close()


def test_a_proven_note_stays_in_the_pool_when_fresh_similar_items_are_written(crowded):
    """The eight loosely similar lessons of other tasks rank above the proven note by similarity; with
    the default rule they give their places up, so value retrieval can still choose the note and does."""
    ranked = [item.id for item, _ in crowded.recall(SIG.query_text(), 20, backend="cpu", backend_boost=0.25)]
    assert ranked.index("proven") > 6  # below every fresh lesson: outside a plain pool of 6
    policy = RetrievalPolicy(mode="value", k=2, pool_size=6, exploration="none", rules=False)
    assert policy.fresh_floor == 0.5  # on by default
    selection = policy.select(crowded, SIG, "draft")
    pool = [p["id"] for p in selection.pool]
    assert "proven" in pool and not any(i.startswith("t-task") for i in pool)
    assert selection.ranked[0].item.id == "proven"
    assert "t-relu-0" in pool  # the task's own fresh lesson (the best match) still enters untried
    plain = RetrievalPolicy(mode="value", k=2, pool_size=6, exploration="none", rules=False, fresh_floor=0.0)
    before = plain.select(crowded, SIG, "draft")
    assert "proven" not in [p["id"] for p in before.pool]  # what happened before the rule
    assert "proven" not in [h.item.id for h in before.ranked]


def test_a_fresh_item_once_credited_keeps_its_place_and_is_judged_by_its_value(crowded):
    crowded.credit(["t-task3-3"], "draft", 1.0)  # shown once, and that context succeeded
    selection = RetrievalPolicy(mode="value", k=2, pool_size=6, exploration="none", rules=False).select(crowded, SIG, "draft")
    pool = [p["id"] for p in selection.pool]
    assert "t-task3-3" in pool and "t-task4-4" not in pool
    assert selection.ranked[0].item.id == "t-task3-3"  # Q +1: above the proven note's +0.33


def test_similarity_mode_still_ranks_the_plain_top_k(crowded):
    selection = RetrievalPolicy(mode="similarity", k=2, pool_size=6, rules=False).select(crowded, SIG, "draft")
    assert sum(1 for p in selection.pool if p["id"].startswith("t-task")) == 4
    assert [h.item.id for h in selection.ranked] == ["t-relu-0", "failed"]


def test_epsilon_greedy_still_explores_under_the_rule(crowded):
    """Default policy, many drafts: most slots go by value, about epsilon of them to a random pool item,
    and exploration reaches items value alone never ranks first; the pool is never the loose lessons."""
    policy = RetrievalPolicy(mode="value", k=2, pool_size=6, rules=False, seed=1)
    chosen_by: list[str] = []
    explored: set[str] = set()
    for _ in range(300):
        selection = policy.select(crowded, SIG, "draft")
        assert not any(p["id"].startswith("t-task") for p in selection.pool)
        for hit in selection.ranked:
            chosen_by.append(hit.chosen_by)
            if hit.chosen_by == "explore":
                explored.add(hit.item.id)
    share = chosen_by.count("explore") / len(chosen_by)
    assert 0.04 < share < 0.2  # epsilon 0.1 per slot
    assert "failed" in explored  # greedy alone always shows proven (Q +0.33) and t-relu-0 (untried: the mean)


def test_refining_keeps_the_plain_pool(crowded):
    """The rule is for drafting: in refining the pool is the plain top K (the simulator lost 0.06 of the
    oracle with it there)."""
    selection = RetrievalPolicy(mode="value", k=2, pool_size=6, exploration="none", rules=False).select(crowded, SIG, "refine")
    assert sum(1 for p in selection.pool if p["id"].startswith("t-task")) == 4


def test_fresh_floor_is_recorded_and_checked():
    assert RetrievalPolicy().settings()["fresh_floor"] == 0.5
    assert RetrievalPolicy(**RetrievalPolicy(fresh_floor=0.0).settings()).fresh_floor == 0.0
    with pytest.raises(ValueError, match="fresh_floor"):
        RetrievalPolicy(fresh_floor=1.5)
