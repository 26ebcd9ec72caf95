"""Issue 38, cause 3: the credit rule must separate items that are shown together.

Under the paper's per-item update every item in a context is credited with the whole reward, so an item
that is usually shown beside a helpful one (a "rider") ends with the helpful one's Q. The "advantage" rule
credits each item with its own value plus the context's surprise (the reward less the mean Q of the items
shown): a success that the helpful item already explains teaches the rider little, a failure beside it
is blamed on it. These tests fail with the old rule (every id credited with the reward itself)."""

from __future__ import annotations

import pytest

from memory import MemoryItem, MemoryStore
from memory.retrieval import RetrievalPolicy
from memory.values import context_baselines


def _seed(name: str) -> MemoryItem:
    return MemoryItem(id=name, kind="seed", backends=["cpu"], category="x", title=name, text=f"note {name}")


def _history() -> list[tuple[list[str], float]]:
    """Contexts whose reward is on average the mean of their items' worth (helpful +1, others -1): two
    helpful notes succeed together, two poor ones fail together, and the rider, shown only beside a
    helpful note, makes those contexts a coin flip (alternating, so the test is deterministic)."""
    seq: list[tuple[list[str], float]] = [(["h1", "h2"], 1.0), (["p1", "p2"], -1.0)] * 2
    seq += [(["h1" if n % 3 else "h2", "rider"], 1.0 if n % 2 else -1.0) for n in range(12)]
    return seq


def _replay(path, rule: str) -> dict[str, float]:
    store = MemoryStore(path, seed=False, fsync=False)
    store.add_many([_seed(n) for n in ("h1", "h2", "rider", "p1", "p2")])
    for ids, reward in _history():
        store.credit(ids, "draft", reward, rule=rule)
    q = {i.id: i.q1 for i in store.items()}
    store.close()
    return q


def _separation(q: dict[str, float]) -> float:
    return (q["h1"] + q["h2"]) / 2 - q["rider"]


def test_advantage_credit_separates_a_rider_from_the_helpful_notes_it_is_shown_with(tmp_path):
    q = _replay(tmp_path / "a" / "memory.json", "advantage")
    assert _separation(q) >= 0.5, q
    assert min(q["h1"], q["h2"]) > q["rider"] > max(q["p1"], q["p2"])
    # the defeating candidate: the old rule (every item credited with the whole reward) does not separate them
    old = _replay(tmp_path / "m" / "memory.json", "mc")
    assert _separation(old) < 0.3, old


def test_advantage_credit_is_replayed_from_the_journal(tmp_path):
    path = tmp_path / "memory.json"
    q = _replay(path, "advantage")
    again = {i.id: i.q1 for i in MemoryStore(path, seed=False, fsync=False).items()}
    assert again == q


def test_one_item_or_an_unsurprising_context_is_the_papers_update(tmp_path):
    """With one item in the context (or companions at the mean) the advantage rule is the MC update."""
    values = {}
    for rule in ("mc", "advantage"):
        store = MemoryStore(tmp_path / rule / "memory.json", seed=False, fsync=False)
        store.add_many([_seed("a"), _seed("b")])
        for reward in (1.0, -1.0, -1.0, 1.0, 1.0):
            store.credit(["a"], "draft", reward, rule=rule)
            store.credit(["b"], "refine", -reward, rule=rule)
        values[rule] = {(i.id, i.q1, i.q2, i.visits1, i.visits2) for i in store.items()}
        store.close()
    assert values["mc"] == values["advantage"]
    # an item's baseline is the mean Q of its context less its own Q; untried items count at the stage mean
    assert context_baselines([0.5, None, -0.1], mean=-0.4) == pytest.approx([-0.5, 0.4, 0.1])


def test_unknown_credit_rule_is_refused_in_one_line(tmp_path):
    store = MemoryStore(tmp_path / "memory.json", seed=False, fsync=False)
    store.add(_seed("a"))
    with pytest.raises(ValueError, match="unknown credit rule 'shared'; expected one of mc, advantage"):
        store.credit(["a"], "draft", 1.0, rule="shared")
    with pytest.raises(ValueError, match="unknown credit rule"):
        RetrievalPolicy(credit="shared")
    assert RetrievalPolicy().settings()["credit"] == RetrievalPolicy().credit


@pytest.mark.parametrize("baseline", [[0.5], [0.1, "x"], [0.1, None], [0.1, True], "0.1"])
def test_a_journal_credit_with_malformed_baselines_is_damage_not_a_crash(tmp_path, baseline):
    """The defeating candidate: a hand-edited or torn-and-glued journal line whose baselines do not give
    one finite number per id. It must read as a damaged record (repair says so), never a traceback."""
    import json

    from memory import MemoryCorrupt
    from memory.storage import journal_path

    path = tmp_path / "memory.json"
    store = MemoryStore(path, seed=False, fsync=False)
    store.add_many([_seed("a"), _seed("b")])
    store.close()
    line = json.dumps({"seq": 99, "op": "credit", "ids": ["a", "b"], "stage": "draft", "reward": 1.0, "alpha": 0.1,
                       "t": 1.0, "baseline": baseline})
    with open(journal_path(path), "a", encoding="utf-8") as fh:
        fh.write(line + "\n")
    with pytest.raises(MemoryCorrupt, match="damaged record"):
        MemoryStore(path, seed=False, fsync=False)
    assert "not one finite number per id" in MemoryStore.repair(path)
