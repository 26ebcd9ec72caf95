"""Issue 36: one memory bank, many writer processes (as several benches, or bench workers on several GPUs,
sharing one bank file). Four processes credit the same items in both stages under two device classes, while
they also add, merge and cap trajectories and the journal is compacted under them; a fifth only reads.

What must hold: every update a writer was told it made is in the bank, once (visit counts, for each stage and
each device class, equal the logged updates); the updates of one item and stage form one chain (each one's
old value is the previous one's new value: no writer updated from a stale value); the value in the bank is
the chain's end; a reader never sees an item's visits go down; and the bank reopens as it was.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import random
from pathlib import Path

from memory import MemoryItem, MemoryStore, TaskSignature
from memory.writing import trajectory_item

IDS = [f"t-{i}" for i in range(1, 5)]
DEVICES = ["NVIDIA H100 80GB HBM3 (sm_90)", "cpu: test"]
WRITERS = 4
ROUNDS = 30


def _item(i: int) -> MemoryItem:
    return MemoryItem(id=f"t-{i}", kind="trajectory", backends=["cuda"], category="activation",
                      title=f"attempt {i}", text=f"relu attempt number {i}")


def _writer(path: str, log: str, seed: int) -> None:
    rng = random.Random(seed)
    store = MemoryStore(path, seed=False, fsync=False, compact_min_bytes=1500)
    sig = TaskSignature(f"task{seed % 2}", "activation")
    with open(log, "w", encoding="utf-8") as fh:
        for n in range(ROUNDS):
            ids = rng.sample(IDS, rng.randint(1, len(IDS)))
            stage = rng.choice(["draft", "refine"])
            device = rng.choice(DEVICES + [""])
            changes = store.credit(ids, stage, rng.uniform(-1, 1), device=device)
            for c in changes:
                fh.write(json.dumps(c.to_dict()) + "\n")
            if n % 3 == 0:  # a failed attempt: merged into the task's one lesson of that stage and outcome
                store.add_trajectory(trajectory_item(sig, "draft", f"code {seed}/{n}", "incorrect"))
            elif n % 3 == 1:  # a feasible one: a new item, the task's oldest beyond the cap removed
                store.add_trajectory(trajectory_item(sig, "draft", f"fast {seed}/{n}", "feasible"))
            if n % 10 == 9:
                store.flush()
    store.close()


def _reader(path: str, rounds: int, out: str) -> None:
    seen: dict[tuple[str, str], int] = {}
    problems = []
    for _ in range(rounds):
        store = MemoryStore(path, seed=False)
        for i in IDS:
            item = store.get(i)
            for stage in ("draft", "refine"):
                v = item.visits(stage)
                if v < seen.get((i, stage), 0):
                    problems.append(f"{i} {stage}: {v} visits after {seen[(i, stage)]}")
                seen[(i, stage)] = v
        store.close()
    Path(out).write_text(json.dumps(problems))


def test_many_writer_processes_lose_and_fork_no_update(tmp_path):
    bank = tmp_path / "memory.json"
    store = MemoryStore(bank, seed=False)
    store.add_many([_item(i) for i in range(1, 5)])
    store.close()
    ctx = mp.get_context("spawn")
    logs = [tmp_path / f"writer{i}.jsonl" for i in range(WRITERS)]
    procs = [ctx.Process(target=_writer, args=(str(bank), str(logs[i]), i)) for i in range(WRITERS)]
    reader = ctx.Process(target=_reader, args=(str(bank), 15, str(tmp_path / "reader.json")))
    for p in [*procs, reader]:
        p.start()
    for p in [*procs, reader]:
        p.join(240)
        assert p.exitcode == 0

    logged = [json.loads(line) for log in logs for line in log.read_text().splitlines()]
    assert len(logged) > WRITERS * ROUNDS  # each credit names one to four items
    final = MemoryStore(bank, seed=False)
    for i in IDS:
        item = final.get(i)
        per_device = item.device_values()
        for stage, n_key in (("draft", "visits1"), ("refine", "visits2")):
            chain = sorted((c for c in logged if c["item_id"] == i and c["stage"] == stage), key=lambda c: c["visits"])
            assert item.visits(stage) == len(chain), f"{i} {stage}: {item.visits(stage)} visits, {len(chain)} logged"
            assert [c["visits"] for c in chain] == list(range(1, len(chain) + 1))  # no update counted twice
            for before, after in zip(chain, chain[1:], strict=False):
                assert after["old"] == before["new"], f"{i} {stage}: update {after['visits']} started from a stale value"
            if chain:
                assert abs(item.q(stage) - chain[-1]["new"]) < 1e-12
            for device in DEVICES:
                n = sum(1 for c in chain if c["device"] == device)
                assert per_device.get(device, {}).get(n_key, 0) == n, (i, stage, device)
    assert json.loads((tmp_path / "reader.json").read_text()) == []
    lessons = [t for t in final.items("trajectory") if t.data.get("outcome") == "incorrect"]
    assert len(lessons) == 2 and sum(int(t.data.get("merged", 1)) for t in lessons) == WRITERS * ROUNDS // 3
    snapshot = {i: (final.get(i).visits1, final.get(i).visits2, final.get(i).q1, final.get(i).q2) for i in IDS}
    final.flush()
    final.close()
    again = MemoryStore(bank, seed=False)
    assert {i: (again.get(i).visits1, again.get(i).visits2, again.get(i).q1, again.get(i).q2) for i in IDS} == snapshot
    assert "healthy" in MemoryStore.repair(bank)
