from __future__ import annotations

import json
import multiprocessing as mp
import threading

import pytest

from memory import MemoryCorrupt, MemoryItem, MemoryStore, TaskSignature
from memory.storage import backup_path, journal_path
from memory.writing import trajectory_item


def _item(i: int, **kw) -> MemoryItem:
    return MemoryItem(id=f"t-{i}", kind="trajectory", backends=["cpu"], category="softmax",
                      title=f"attempt {i}", text=f"softmax attempt number {i}", **kw)


def test_new_bank_is_seeded_and_reopens(bank):
    store = MemoryStore(bank)
    seeds = store.items("seed")
    assert len(seeds) >= 30
    assert {b for s in seeds for b in s.backends} >= {"cpu", "cuda", "triton"}
    assert all(s.q1 == 0.0 and s.q2 == 0.0 and s.visits1 == 0 for s in seeds)  # neutral, not optimistic
    contracts = [s for s in seeds if s.category == "contract"]
    assert {c.backends[0] for c in contracts} == {"cpu", "cuda", "triton"}
    assert all("ModelNew" in c.text and "torch.compile" in c.text for c in contracts)
    assert len(MemoryStore(bank)) == len(seeds)


def test_env_var_sets_default_path(tmp_path, monkeypatch):
    monkeypatch.setenv("EVOKERNEL_MEMORY", str(tmp_path / "env.json"))
    store = MemoryStore(seed=False)
    assert store.path == tmp_path / "env.json" and store.path.exists()


def test_add_get_credit_persist(bank):
    store = MemoryStore(bank, seed=False, alpha=0.5, schedule="constant")
    store.add(_item(1))
    with pytest.raises(ValueError, match="already exists"):
        store.add(_item(1))
    changes = store.credit(["t-1", "t-1", "missing"], "refine", 1.0)
    assert [(c.item_id, c.old, c.new, c.visits) for c in changes] == [("t-1", 0.0, 0.5, 1)]
    again = MemoryStore(bank, seed=False)
    got = again.get("t-1")
    assert (got.q2, got.visits2, got.q1, got.visits1) == (0.5, 1, 0.0, 0)
    with pytest.raises(KeyError, match="no memory item"):
        again.get("nope")
    with pytest.raises(ValueError, match="stage"):
        again.credit(["t-1"], "drafting", 1.0)


def test_mean_schedule_averages_returns_until_alpha_takes_over(bank):
    store = MemoryStore(bank, seed=False, alpha=0.25, schedule="mean")
    store.add(_item(1))
    rewards = [1.0, 0.2, 0.4, 1.0, 0.0, 1.0]
    qs = [store.credit(["t-1"], "draft", r)[0].new for r in rewards]
    assert qs[:4] == pytest.approx([1.0, 0.6, 8 / 15, 0.65])  # plain means of the first 1/alpha returns
    assert qs[4] == pytest.approx(0.65 * 0.75) and qs[5] == pytest.approx(qs[4] + 0.25 * (1.0 - qs[4]))
    assert MemoryStore(bank, seed=False, schedule="constant").get("t-1").q1 == pytest.approx(qs[-1])  # replay
    with pytest.raises(ValueError, match="schedule"):
        MemoryStore(bank, schedule="harmonic")


def test_compaction_keeps_state_and_backup(bank):
    store = MemoryStore(bank, seed=False)
    store.add(_item(1))
    store.credit(["t-1"], "draft", 1.0)
    store.flush()
    assert json.loads(journal_path(bank).read_text().splitlines()[0])["base_seq"] == 2
    assert backup_path(bank).exists()
    reopened = MemoryStore(bank, seed=False)
    assert reopened.get("t-1").visits1 == 1
    store.credit(["t-1"], "draft", 1.0)  # the first instance keeps working after its own compaction
    assert MemoryStore(bank, seed=False).get("t-1").visits1 == 2


def test_other_instance_sees_writes_and_compactions(bank):
    a = MemoryStore(bank, seed=False)
    b = MemoryStore(bank, seed=False)
    a.add(_item(1))
    b.credit(["t-1"], "draft", 1.0)
    a.flush()
    b.credit(["t-1"], "draft", 1.0)
    a.credit(["t-1"], "draft", 1.0)
    assert a.get("t-1").visits1 == 3 and b.get("t-1").visits1 == 3


def test_threads_do_not_lose_updates(bank):
    store = MemoryStore(bank, seed=False, fsync=False)
    store.add(_item(1))

    def work():
        for _ in range(25):
            store.credit(["t-1"], "draft", 1.0)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert MemoryStore(bank, seed=False).get("t-1").visits1 == 100


def _credit_many(path: str, n: int) -> None:
    store = MemoryStore(path, seed=False, fsync=False, compact_min_bytes=2000)
    for _ in range(n):
        store.credit(["t-1", "t-2"], "draft", 1.0)
        store.add(trajectory_item(TaskSignature("x", "softmax"), "draft", "code", "incorrect"))


def test_processes_do_not_lose_updates(bank):
    store = MemoryStore(bank, seed=False)
    store.add_many([_item(1), _item(2)])
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_credit_many, args=(str(bank), 30)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    final = MemoryStore(bank, seed=False)
    assert final.get("t-1").visits1 == 90 and final.get("t-2").visits1 == 90
    assert len(final.items("trajectory")) == 2 + 90


def test_corrupt_snapshot_is_restored_from_a_backup_current_at_the_last_compaction(bank):
    store = MemoryStore(bank, seed=False)
    store.add(_item(1))
    store.flush()
    store.add(_item(2))  # only in the second compaction: a one-compaction-old backup would lose it
    store.flush()
    store.credit(["t-2"], "draft", 1.0)  # only in the journal
    bank.write_text('{"meta": {"1": {')
    with pytest.raises(MemoryCorrupt, match="not valid JSON"):
        MemoryStore(bank, seed=False)
    note = MemoryStore.repair(bank)
    assert "2 items from memory.json.bak" in note and "1 journal operations replayed" in note
    assert "Could not keep: memory.json:" in note  # the damaged file is named, not glossed over
    repaired = MemoryStore(bank, seed=False)
    assert "t-1" in repaired and "t-2" in repaired and repaired.get("t-2").visits1 == 1
    assert bank.with_name(bank.name + ".corrupt").exists()
    assert "healthy" in MemoryStore.repair(bank)


def test_torn_journal_tail_is_ignored_and_cut(bank):
    store = MemoryStore(bank, seed=False)
    store.add(_item(1))
    with open(journal_path(bank), "ab") as fh:
        fh.write(b'{"seq": 99, "op": "cre')
    again = MemoryStore(bank, seed=False)
    assert "t-1" in again
    again.credit(["t-1"], "draft", 1.0)
    assert MemoryStore(bank, seed=False).get("t-1").visits1 == 1


def test_repair_replays_every_parseable_journal_operation(bank):
    store = MemoryStore(bank, seed=False)
    store.add(_item(1))
    with open(journal_path(bank), "ab") as fh:
        fh.write(b"garbage\n")
    lines = journal_path(bank).read_text().splitlines()
    good_after = [json.dumps({"seq": 3, "op": "put", "items": [_item(2).to_dict()]}),
                  json.dumps({"seq": 4, "op": "teleport", "ids": ["t-1"]}),
                  json.dumps({"seq": 5, "op": "credit", "ids": ["t-2"], "stage": "draft", "reward": 1.0,
                              "alpha": 0.5, "t": 1.0})]
    journal_path(bank).write_text("\n".join(lines + good_after) + "\n")
    with pytest.raises(MemoryCorrupt, match="damaged record"):
        MemoryStore(bank, seed=False)
    note = MemoryStore.repair(bank)
    assert "3 journal operations replayed" in note  # t-1's put, t-2's put, its credit
    assert "line 3: not valid JSON" in note and "line 5: unknown operation 'teleport'" in note
    repaired = MemoryStore(bank, seed=False)
    assert "t-1" in repaired and repaired.get("t-2").visits1 == 1, "operations after the damage are kept"
    assert journal_path(bank).with_name("memory.json.journal.corrupt").exists()
    assert "healthy" in MemoryStore.repair(bank)


@pytest.mark.parametrize("content", ['{}', '{"items": {}}', '{"meta": {"1": {"schema": 3, "seq": 4}}}'])
def test_a_snapshot_missing_its_tables_is_damaged_not_empty(bank, content):
    store = MemoryStore(bank, seed=False)
    store.add(_item(1))
    store.flush()
    bank.write_text(content)
    with pytest.raises(MemoryCorrupt, match="missing its"):
        MemoryStore(bank, seed=False)
    note = MemoryStore.repair(bank)
    assert "missing its" in note and "1 items from memory.json.bak" in note
    assert "t-1" in MemoryStore(bank, seed=False)


def test_repair_without_a_good_backup_refuses_and_says_what_to_do(bank):
    MemoryStore(bank, seed=False).add(_item(1))
    bank.write_text("{}")
    backup_path(bank).write_text("{}")
    with pytest.raises(MemoryCorrupt, match="no good backup; move it away"):
        MemoryStore.repair(bank)


def test_schema_1_is_migrated(bank):
    bank.parent.mkdir(parents=True)
    old = {"meta": {"1": {"schema": 1, "seq": 0}},
           "items": {"1": {"id": "old", "kind": "insight", "title": "t", "text": "x", "q": 0.8, "visits": 3}}}
    bank.write_text(json.dumps(old))
    store = MemoryStore(bank, seed=False)
    item = store.get("old")
    # schema 1 -> 2 splits the value per stage; 2 -> 3 maps the 0..1 draft scale onto -1..1
    assert (item.q1, item.visits1, item.q2, item.visits2) == (pytest.approx(0.6), 3, 0.0, 0)
    assert json.loads(bank.read_text())["meta"]["1"]["schema"] == 3


def test_newer_schema_is_refused(bank):
    bank.parent.mkdir(parents=True)
    bank.write_text(json.dumps({"meta": {"1": {"schema": 99, "seq": 0}}, "items": {}}))
    with pytest.raises(MemoryCorrupt, match="newer"):
        MemoryStore(bank, seed=False)


def test_export_import_merges_without_duplicates(tmp_path):
    a = MemoryStore(tmp_path / "a.json")
    a.add(_item(1))
    a.credit(["t-1", "seed-cpu-contract"], "draft", 1.0)
    a.export(tmp_path / "share.json")
    b = MemoryStore(tmp_path / "b.json")
    first = b.import_(tmp_path / "share.json")
    assert first == {"added": 1, "updated": 1, "unchanged": len(a) - 2}  # t-1 new, the credited seed newer
    assert b.get("seed-cpu-contract").visits1 == 1
    assert b.import_(tmp_path / "share.json") == {"added": 0, "updated": 0, "unchanged": len(a)}
    assert len(b) == len(a)


def test_prune_removes_low_value_but_keeps_seeds(bank):
    store = MemoryStore(bank, alpha=0.5)
    store.add_many([_item(1), _item(2), _item(3)])
    for _ in range(3):
        store.credit(["t-1", "seed-cpu-contract"], "draft", 0.0)
    store.credit(["t-2"], "draft", 1.0)
    assert store.prune(below=0.3, dry_run=True) == ["t-1"]
    assert "t-1" in store
    assert store.prune(below=0.3) == ["t-1"]
    assert "t-1" not in MemoryStore(bank) and "seed-cpu-contract" in store
    assert set(store.prune(max_trajectories=1)) == {"t-3"}


def test_seeds_shipped_later_reach_an_existing_bank(bank):
    from memory.seeds import seed_items

    store = MemoryStore(bank)
    newest = seed_items()[-1].id
    store.remove([newest])
    store.close()
    reopened = MemoryStore(bank)
    assert reopened.get(newest) is not None and reopened.get(newest).kind == "seed"
    assert len(reopened.items("seed")) == len(seed_items())
    assert MemoryStore(bank, seed=False).get(newest) is not None


def test_neutral_values_and_duplicate_groups_stay_current(bank):
    store = MemoryStore(bank, seed=False)
    sig = TaskSignature(task="relu", category="elementwise", backend="cpu")
    assert store.neutral_values() == (0.0, 0.0)  # nothing tried yet: the scale's middle
    store.add_many([_item(1), _item(2), _item(3)])
    store.credit(["t-1"], "draft", 1.0)
    store.credit(["t-2"], "draft", -0.5)
    store.credit(["t-3"], "refine", 0.3)
    other = MemoryStore(bank, seed=False)  # another process's view, replayed from the journal
    other.neutral_values()
    store.remove(["t-2"])
    store.credit(["t-1"], "draft", 0.0)

    def brute(s):
        items = s.items()
        q1 = [i.q1 for i in items if i.visits1]
        q2 = [i.q2 for i in items if i.visits2]
        return sum(q1) / len(q1), sum(q2) / len(q2)

    assert store.neutral_values() == pytest.approx(brute(store))
    assert other.neutral_values() == pytest.approx(brute(store))
    first, how = store.add_trajectory(trajectory_item(sig, "draft", "a", "incorrect"))
    assert how == "added" and first.q1 == pytest.approx(brute(store)[0])  # a new item starts neutral
    assert other.add_trajectory(trajectory_item(sig, "draft", "b", "incorrect"))[1] == "merged"
