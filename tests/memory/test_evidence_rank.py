"""Issue 38, causes 1 and 2: one reward must not be an item's whole rank.

The running-mean update makes an item's first reward its whole Q, so (1) a fresh trajectory whose one
context happened to succeed (+1) outranked a note whose many contexts said it helps, and (2) a helpful
note first shown beside four poor ones, failing once (-1), fell under every item whose many contexts had
failed. The default `prior_visits` ranks a tried item at its Q shrunk toward the pool's mean by its
evidence. These tests fail with the old default (prior_visits 0)."""

from __future__ import annotations

from memory import MemoryItem, MemoryStore, RetrievalPolicy, TaskSignature

SIG = TaskSignature(task="relu", category="elementwise", backend="cpu", shapes="x: 256x1024 f32", text="relu")


def _item(name: str, kind: str, q1: float, visits1: int) -> MemoryItem:
    data = {"task": "sigmoid", "stage": "draft", "outcome": "feasible"} if kind == "trajectory" else {}
    return MemoryItem(id=name, kind=kind, backends=["cpu"], category="elementwise", title=f"relu elementwise {name}",
                      text=f"relu elementwise cpu kernel {name}", q1=q1, visits1=visits1, data=data)


def _ranked(tmp_path, policy: RetrievalPolicy) -> list[str]:
    store = MemoryStore(tmp_path / f"m{policy.prior_visits}.json", seed=False, fsync=False)
    store.add_many([
        _item("proven-note", "seed", -0.1, 20),  # its contexts succeed more often than most: evidence it helps
        _item("lucky-trajectory", "trajectory", 1.0, 1),  # one context, which happened to succeed
        _item("unlucky-note", "seed", -1.0, 1),  # one context, beside poor notes, which failed
        *[_item(f"poor-{n}", "seed", -0.8, 10) for n in range(6)],  # ten contexts each, mostly failed
    ])
    hits = policy.select(store, SIG, "draft").ranked
    store.close()
    return [h.item.id for h in hits]


def test_one_lucky_or_unlucky_context_does_not_decide_the_rank(tmp_path):
    ids = _ranked(tmp_path, RetrievalPolicy(k=9, epsilon=0.0, rules=False))
    assert RetrievalPolicy().prior_visits > 0
    assert ids.index("proven-note") < ids.index("lucky-trajectory"), ids  # evidence outranks one success
    assert all(ids.index("unlucky-note") < ids.index(f"poor-{n}") for n in range(6)), ids  # one failure is not ten


def test_the_old_rank_by_stored_q_fails_both(tmp_path):
    """The defeating candidate: ranking by the stored Q alone (prior_visits 0, and no lift for the little tried,
    try_visits 0, which did not exist then), the rule before issue 38."""
    ids = _ranked(tmp_path, RetrievalPolicy(k=9, epsilon=0.0, rules=False, prior_visits=0, try_visits=0))
    assert ids.index("lucky-trajectory") < ids.index("proven-note")
    assert ids[-1] == "unlucky-note"
