from __future__ import annotations

import numpy as np
import pytest

from memory import MemoryItem, MemoryStore, RetrievalPolicy, TaskSignature
from memory.index import LexicalIndex

SIG = TaskSignature(task="softmax_rows", category="softmax", backend="cuda", shapes="x: 256x4096", text="row softmax")


def _item(i, text, backends=("cuda",), **kw):
    return MemoryItem(id=f"i{i}", kind="insight", backends=list(backends), category="", title=text, text=text, **kw)


@pytest.fixture
def store(tmp_path):
    s = MemoryStore(tmp_path / "m.json", seed=False, fsync=False)
    s.add_many([
        _item(0, "softmax softmax softmax rows max subtraction"),
        _item(1, "softmax rows online"),
        _item(2, "softmax warp reduce"),
        _item(3, "softmax in triton", backends=("triton",)),
        _item(4, "matmul tiling shared memory"),
        _item(5, "conv im2col"),
    ])
    return s


def test_similarity_mode_ranks_by_bm25(store):
    hits = RetrievalPolicy(mode="similarity", k=3).retrieve(store, SIG, "draft")
    assert hits[0].item.id == "i0" and hits[0].similarity == pytest.approx(1.0)
    assert [h.similarity for h in hits] == sorted((h.similarity for h in hits), reverse=True)
    assert {"i4", "i5"}.isdisjoint(h.item.id for h in hits)


def test_value_mode_prefers_high_stage_value(store):
    store.credit(["i2"], "draft", 1.0, alpha=1.0)
    store.credit(["i0"], "draft", -1.0, alpha=1.0)
    policy = RetrievalPolicy(mode="value", k=2, exploration="none", value_weight=0.7, neutral=False)
    draft = policy.retrieve(store, SIG, "draft")
    assert draft[0].item.id == "i2" and "i0" not in [h.item.id for h in draft]
    assert draft[0].score == pytest.approx(0.7 * draft[0].value + 0.3 * draft[0].similarity)
    refine = policy.retrieve(store, SIG, "refine")  # Q2 is untouched: similarity decides
    assert refine[0].item.id == "i0"


def test_backend_boost_and_cross_backend_sharing(store):
    plain = RetrievalPolicy(mode="similarity", k=6, backend_boost=0.0, min_similarity=0.0)
    boosted = RetrievalPolicy(mode="similarity", k=6, backend_boost=1.0, min_similarity=0.0)
    sim = {h.item.id: h.similarity for h in plain.retrieve(store, SIG, "draft")}
    bsim = {h.item.id: h.similarity for h in boosted.retrieve(store, SIG, "draft")}
    assert "i3" in sim  # a triton item is still recalled for a cuda task
    assert bsim["i3"] / bsim["i1"] < sim["i3"] / sim["i1"]


def test_ucb_explores_unvisited_items(store):
    for _ in range(5):
        store.credit(["i0", "i1"], "draft", 0.6, alpha=1.0)
    hits = RetrievalPolicy(mode="value", k=1, exploration="ucb", ucb_c=1.0).retrieve(store, SIG, "draft")
    assert hits[0].item.visits1 == 0 and hits[0].exploration > 1.0


def test_screening_draws_random_slates_then_exploits_with_one_explore_slot(store):
    # fresh_floor 0: these untried insights stand for any items here, all six in the pool
    policy = RetrievalPolicy(mode="value", k=3, seed=5, exploration="screen", screen_visits=2.0, neutral=False,
                             fresh_floor=0.0)
    seen = set()
    for _ in range(4):  # 4 slates of 3 bring the 6 candidates to a mean of 2 visits
        hits = policy.retrieve(store, SIG, "draft")
        assert all(h.exploration == 1.0 for h in hits)
        seen.update(h.item.id for h in hits)
        store.credit([h.item.id for h in hits], "draft", 1.0 if "i5" in {h.item.id for h in hits} else -0.6)
    assert len(seen) >= 5, "screening should show more than the lexical top 3"
    hits = policy.retrieve(store, SIG, "draft")
    best = max(store.items(), key=lambda i: (i.q1, -i.visits1))
    assert [h.exploration for h in hits] == [0.0, 0.0, 1.0] and hits[0].item.q1 == best.q1
    assert hits[0].value >= hits[1].value >= max(i.q1 for i in store.items() if i.id not in {h.item.id for h in hits[:2]})


def test_min_similarity_drops_backend_only_matches(store):
    store.add(_item(6, "matmul tiling registers"))  # shares only the cuda backend with the query
    wide = RetrievalPolicy(mode="value", k=1, pool_size=10, exploration="none", neutral=False)
    gated = RetrievalPolicy(mode="value", k=1, pool_size=10, exploration="none", neutral=False, min_similarity=0.5)
    store.credit(["i6"], "draft", 1.0, alpha=1.0)  # a high value learnt elsewhere
    assert wide.retrieve(store, SIG, "draft")[0].item.id == "i6"
    assert gated.retrieve(store, SIG, "draft")[0].item.id != "i6"


def test_random_and_epsilon_are_seeded(store):
    def ids(policy):
        return [[h.item.id for h in policy.retrieve(store, SIG, "draft")] for _ in range(5)]

    assert ids(RetrievalPolicy(mode="random", k=2, seed=3)) == ids(RetrievalPolicy(mode="random", k=2, seed=3))
    eps = RetrievalPolicy(mode="value", k=2, exploration="epsilon", epsilon=1.0, seed=1)
    hits = eps.retrieve(store, SIG, "draft")
    assert all(h.exploration == 1.0 and h.chosen_by == "explore" for h in hits)


def test_default_policy_is_epsilon_greedy_over_q_in_a_pool_of_lambda_n(store):
    policy = RetrievalPolicy()
    assert (policy.mode, policy.exploration, policy.value_weight) == ("value", "epsilon", 1.0)
    assert policy.pool == round(policy.pool_factor * policy.k) and RetrievalPolicy(k=2, pool_size=3).pool == 3
    store.credit(["i5"], "draft", 1.0, alpha=1.0)  # the least similar item has the best Q
    for _ in range(2):  # two failed contexts each: with one, `try_visits` (2) keeps them at an untried item's rank
        store.credit(["i0", "i1"], "draft", -1.0, alpha=1.0)
    greedy = RetrievalPolicy(k=2, pool_size=6, epsilon=0.0)
    sel = greedy.select(store, SIG, "draft")
    ids = [h.item.id for h in sel.hits]
    assert ids[0] == "i5" and "i0" not in ids and "i1" not in ids
    assert sel.similarity_top == ["i0", "i1"] and sel.value_chosen_beyond_similarity() == 2
    assert [p["id"] for p in sel.pool][:2] == ["i0", "i1"] and {"id", "similarity", "q"} <= set(sel.pool[0])
    assert sel.event()["explored"] == [] and sel.event()["value_beyond_similarity"] == 2
    small = RetrievalPolicy(k=2, pool_size=2, epsilon=0.0).select(store, SIG, "draft")
    assert {h.item.id for h in small.hits} == {"i0", "i1"}  # only the K most similar are candidates


def test_untried_items_rank_at_the_pools_mean_value(store):
    store.credit(["i0"], "draft", 0.8, alpha=1.0)
    for _ in range(2):  # two visits: with one, `try_visits` (2) lifts it to the untried items' rank
        store.credit(["i1"], "draft", -0.6, alpha=1.0)  # mean of the tried: 0.1 > 0
    hits = RetrievalPolicy(k=6, pool_size=6, epsilon=0.0).retrieve(store, SIG, "draft")
    order = [h.item.id for h in hits]
    assert order[0] == "i0" and order[-1] == "i1"  # untried items sit between the tried ones


def test_near_duplicate_trajectories_take_one_pool_place(tmp_path):
    from memory.writing import trajectory_item

    s = MemoryStore(tmp_path / "d.json", seed=False, fsync=False)
    sig = TaskSignature(task="softmax_rows", category="softmax", backend="cuda", text="row softmax")
    kept = [s.add_trajectory(trajectory_item(sig, "draft", f"code{i}", "compile_fail", feedback=f"error {i}"))
            for i in range(4)]
    assert [how for _, how in kept] == ["added", "merged", "merged", "merged"]
    assert len(s.items("trajectory")) == 1 and s.items("trajectory")[0].data["merged"] == 4
    for i in range(7):
        s.add_trajectory(trajectory_item(sig, "draft", f"ok{i}", "feasible", latency_ms=1.0 + i))
    from memory.store import DUPLICATE_CAP

    assert len([i for i in s.items("trajectory") if i.data["outcome"] == "feasible"]) == DUPLICATE_CAP
    pool = RetrievalPolicy(k=3, pool_size=6).select(s, sig, "draft").pool
    assert len(pool) == 2  # one lesson, one feasible start point: duplicates do not crowd the pool


def test_contract_knowledge_is_fetched_by_rule_not_ranked(tmp_path):
    s = MemoryStore(tmp_path / "r.json")
    sig = TaskSignature(task="relu", category="elementwise", backend="cuda", text="relu activation")
    sel = RetrievalPolicy(k=3).select(s, sig, "draft")
    rule = [h for h in sel.hits if h.chosen_by == "rule"]
    assert [h.item.id for h in rule] == ["seed-cuda-contract"]
    assert "seed-cuda-contract" not in sel.credited_ids and len(sel.credited_ids) == 3
    assert all(p["id"] != "seed-cuda-contract" for p in sel.pool)


def test_start_point_is_chosen_by_q2():
    policy = RetrievalPolicy(epsilon=0.0)
    assert policy.choose_start([("v1", 0.2), ("v2", 0.5), ("v3", -0.1)]) == ("v2", False)
    assert policy.choose_start([("v1", 0.0), ("v2", 0.0)]) == ("v2", False)  # ties: the newer variant
    explorer = RetrievalPolicy(epsilon=1.0, seed=3)
    assert all(explorer.choose_start([("a", 1.0), ("b", 0.0)])[1] for _ in range(5))


def test_bad_policy_settings_are_rejected():
    with pytest.raises(ValueError, match="mode"):
        RetrievalPolicy(mode="best")
    with pytest.raises(ValueError, match="exploration"):
        RetrievalPolicy(exploration="greedy")
    with pytest.raises(ValueError, match="explore_slots"):
        RetrievalPolicy(k=2, explore_slots=3)
    with pytest.raises(ValueError, match="epsilon"):
        RetrievalPolicy(epsilon=1.5)
    with pytest.raises(ValueError, match="pool"):
        RetrievalPolicy(pool_size=0)


def test_new_items_are_found_before_and_after_rebuild(tmp_path):
    store = MemoryStore(tmp_path / "m.json", seed=False, fsync=False)
    store.add_many([_item(i, f"filler note {i} loops") for i in range(300)])
    assert RetrievalPolicy(mode="similarity", k=1).retrieve(store, SIG, "draft")  # builds the index
    store.add(_item(999, "softmax rows"))  # goes to the delta index
    assert RetrievalPolicy(mode="similarity", k=1).retrieve(store, SIG, "draft")[0].item.id == "i999"
    store.remove(["i999"])
    assert "i999" not in [h.item.id for h in RetrievalPolicy(mode="similarity", k=5).retrieve(store, SIG, "draft")]
    store.add_many([_item(1000 + i, f"softmax variant {i}") for i in range(400)])  # forces a rebuild
    hits = RetrievalPolicy(mode="similarity", k=3).retrieve(store, SIG, "draft")
    assert all(h.item.id.startswith("i1") and "softmax" in h.item.text for h in hits)


def test_bm25_cache_keeps_unchanged_rows_and_rebuilds_when_damaged(tmp_path):
    texts = {f"i{n}": f"note {n} softmax rows" if n % 3 else f"note {n} matmul tiles" for n in range(30)}
    cache = tmp_path / "m.json.bm25"

    def index(docs, **kw):
        idx = LexicalIndex(cache_dir=cache, cache_min_items=10, **kw)
        idx.reset(docs)
        return idx, *idx.scores("softmax rows")

    first, ids, scores = index(texts)
    assert first.cache_hits == 0 and (cache / "items.json").exists()
    again, ids2, scores2 = index(texts)
    assert again.cache_hits == 1 and ids2 == ids and np.allclose(scores2, scores)
    changed_texts = {**texts, "i0": "softmax softmax softmax", "i99": "softmax rows new"}
    changed, ids3, scores3 = index(changed_texts)  # 2 changes: saved rows kept, the rest in the delta
    got = dict(zip(ids3, scores3, strict=True))
    assert changed.cache_hits == 1 and got["i0"] > 0 and got["i99"] > 0 and ids3.count("i0") == 2
    assert scores3[ids3.index("i0")] == -1.0  # the saved row of the changed item is dead
    strict, ids4, scores4 = index(changed_texts, min_rebuild=0, rebuild_fraction=0.0)
    assert strict.cache_hits == 0 and sorted(ids4) == sorted(changed_texts)  # too many changes: rebuilt
    (cache / "data.csc.index.npy").write_bytes(b"garbage")  # a damaged cache only costs a rebuild
    broken, ids5, scores5 = index(changed_texts)
    assert broken.cache_hits == 0 and ids5 == ids4 and np.allclose(scores5, scores4)


def test_backend_boost_applies_to_items_added_after_the_index_was_built(tmp_path):
    store = MemoryStore(tmp_path / "m.json", seed=False, fsync=False)
    store.add_many([_item(i, f"softmax note {i}") for i in range(5)])
    assert store.recall("softmax", 3, backend="cuda", backend_boost=1.0)  # builds the main index
    store.add_many([_item(10, "softmax note x", backends=("triton",)), _item(11, "softmax note y", backends=())])
    sims = dict((i.id, s) for i, s in store.recall("softmax note x y", 10, backend="cuda", backend_boost=1.0))
    plain = dict((i.id, s) for i, s in store.recall("softmax note x y", 10, backend="cuda", backend_boost=0.0))
    assert sims["i10"] == pytest.approx(plain["i10"] / 2)  # triton item: no boost, rescaled by 1 / (1 + 1)
    assert sims["i11"] == pytest.approx((plain["i11"] + 1) / 2)  # no backend: applies to every backend


def _seed(i, text):
    return MemoryItem(id=f"s{i}", kind="seed", backends=["cuda"], category="softmax", title=text, text=text)


def test_after_a_failed_context_an_untried_seed_is_shown_before_the_failed_ones(tmp_path):
    """Every shown item failed once (Q1 = -1), so untried items rank at the same -1 (the tried items'
    mean): the tie goes to the untried seed, not to similarity, and an untried trajectory (a fresh one
    appears after every attempt) is not favoured, even as the most similar candidate."""
    from memory.retrieval import tie_rank

    s = MemoryStore(tmp_path / "t.json", seed=False, fsync=False)
    s.add_many([_seed(i, f"softmax rows row softmax note {i}") for i in range(5)])
    s.add_many([
        _seed(5, "softmax warp reduce"),
        MemoryItem(id="t0", kind="trajectory", backends=["cuda"], category="softmax", title="draft failed: softmax_rows",
                   text="softmax_rows softmax rows row softmax cuda 256x4096", data={"task": "softmax_rows", "stage": "draft",
                                                                                    "outcome": "incorrect"}),
    ])
    s.credit([f"s{i}" for i in range(5)], "draft", -1.0, alpha=1.0)
    old = RetrievalPolicy(k=5, pool_size=7, epsilon=0.0, seed_ties=False).select(s, SIG, "draft")
    sim = {p["id"]: p["similarity"] for p in old.pool}
    assert sim["t0"] == max(sim.values()) and sim["s5"] == min(sim.values())  # the setting this test needs
    assert "s5" not in [h.item.id for h in old.hits]  # similarity alone: the failed seeds again

    new = RetrievalPolicy(k=5, pool_size=7, epsilon=0.0).select(s, SIG, "draft")
    ids = [h.item.id for h in new.hits]
    assert ids[0] == "s5" and "t0" not in ids
    assert len({h.value for h in new.hits}) == 1 and s.get("s0").q1 == -1.0  # a tie on value, broken by tie_rank
    assert tie_rank(s.get("s5"), "draft") < tie_rank(s.get("s0"), "draft") < tie_rank(s.get("t0"), "draft")
    assert tie_rank(s.get("s0"), "refine") == tie_rank(s.get("s5"), "refine")  # per stage: no refine visits yet
    assert RetrievalPolicy().settings()["seed_ties"] is True
    assert RetrievalPolicy(**RetrievalPolicy(seed_ties=False).settings()).seed_ties is False
