"""A bank's items in memory, kept in step with its files across threads and processes.

Every change is one journal operation (put, remove, credit) appended under a cross-process file
lock after first replaying what other processes appended, so concurrent writers never lose each
other's updates; threads of one process are serialised by a re-entrant lock. The same `apply`
replays this process's and other processes' operations, and `compact` folds the journal into a
new snapshot when it has grown large.

Kept apart from `store` so the question "is memory the same as disk?" is answered in one place;
`MemoryStore` only says which operations to commit and what to read.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from memory.index import LexicalIndex
from memory.items import MemoryItem, ValueChange, now
from memory.schema import SCHEMA_VERSION, MemoryCorrupt, check_record, items_from_rows, migrate_record
from memory.storage import (
    Journal,
    atomic_write_bytes,
    file_key,
    gc_paused,
    journal_path,
    lock_path,
    read_header,
    read_snapshot,
    write_snapshot,
)
from memory.tally import Tally
from memory.values import mc_update, reward_range, step_size


class Bank:
    """The items of the bank at `path`, its BM25 index and its tally, and the locks that keep them
    current. Use `locked()` around every read and write; `commit` appends and applies one operation."""

    def __init__(self, path: Path, *, fsync: bool, lock_timeout: float, compact_min_bytes: int) -> None:
        self.path = path
        self.fsync = fsync
        self.compact_min_bytes = compact_min_bytes
        self.journal = Journal(journal_path(path), fsync=fsync)
        self.rlock = threading.RLock()
        self._flock = FileLock(str(lock_path(path)), timeout=lock_timeout)
        self._depth = 0
        self.closed = False
        self.items: dict[str, MemoryItem] = {}
        self._tally: Tally | None = None
        self.index = LexicalIndex(cache_dir=path.with_name(path.name + ".bm25"))
        self.seq = 0
        self._snap_key: tuple[int, int, int, int] | None = None
        self._gen = ""
        self._jschema = SCHEMA_VERSION
        self.offset = 0
        self.snap_size = 0
        self._created = now()
        path.parent.mkdir(parents=True, exist_ok=True)

    def open(self, seed: bool) -> bool:
        """Load the bank, or create it (with the shipped seed items when `seed`); True when it existed."""
        with self.rlock, self.acquire():
            existed = self.path.exists() or self.journal.path.exists()
            if existed:
                self._load_full()
            else:
                self._create(seed)
        return existed

    def close(self) -> None:
        with self.rlock:
            self.closed = True

    # ----------------------------------------------------------------- locking and syncing

    @contextmanager
    def acquire(self) -> Iterator[None]:
        try:
            self._flock.acquire()
        except Timeout:
            raise TimeoutError(
                f"memory bank {self.path} is locked by another process; try again when it finishes"
            ) from None
        try:
            yield
        finally:
            self._flock.release()

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold both locks and bring memory up to date with disk (once, at the outermost level)."""
        with self.rlock:
            if self.closed:
                raise ValueError(f"memory bank {self.path} is closed")
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            with self.acquire():
                self._depth = 1
                try:
                    self._sync()
                    yield
                finally:
                    self._depth = 0

    def _sync(self) -> None:
        """Replay what other processes appended; reload fully only when we cannot catch up."""
        header = read_header(self.journal.path)
        snap_key = file_key(self.path)
        if header is None or (snap_key is None and self._snap_key is not None):
            self._load_full()
            return
        if header["gen"] != self._gen:
            if snap_key != self._snap_key and header["base_seq"] <= self.seq:
                # Another process compacted: the snapshot holds nothing we have not applied.
                self._snap_key, self._gen, self.offset = snap_key, header["gen"], header["size"]
                self._jschema = header["schema"]
                self.snap_size = snap_key[3] if snap_key else 0
            else:
                self._load_full()
                return
        elif snap_key != self._snap_key:
            self._load_full()
            return
        records, self.offset = self.journal.read_from(self.offset)
        for record in records:
            self.apply(record)

    def _load_full(self) -> None:
        with gc_paused():
            meta, dicts = read_snapshot(self.path) if self.path.exists() else ({"seq": 0}, [])
            items = items_from_rows(dicts, self.path)
            self.items = {item.id: item for item in items}
            self._tally = None
        self.seq = int(meta.get("seq", 0))
        self._created = float(meta.get("created", now()))
        self._snap_key = file_key(self.path)
        self.snap_size = self._snap_key[3] if self._snap_key else 0
        self.index.reset(self.items)
        header = read_header(self.journal.path)
        if header is None:
            self._rotate()
        else:
            self._gen, self.offset = header["gen"], header["size"]
            self._jschema = header["schema"]
            records, self.offset = self.journal.read_from(self.offset)
            for record in records:
                self.apply(record)
        if int(meta.get("migrated_from", SCHEMA_VERSION)) < SCHEMA_VERSION:
            self.compact()

    def _create(self, seed: bool) -> None:
        from memory.seeds import seed_items

        self.items = {item.id: item for item in (seed_items() if seed else [])}
        self._tally = None
        self.index.reset(dict(self.items))
        self.compact()

    def _rotate(self) -> None:
        self._gen = uuid.uuid4().hex
        self._jschema = SCHEMA_VERSION
        header = {"base_seq": self.seq, "gen": self._gen, "schema": SCHEMA_VERSION}
        payload = (json.dumps(header) + "\n").encode()
        atomic_write_bytes(self.journal.path, payload, fsync=self.fsync)
        self.offset = len(payload)

    def compact(self) -> None:
        """Fold the journal into a new snapshot, then start an empty journal (caller holds the locks)."""
        meta = {"seq": self.seq, "created": self._created, "updated": now()}
        write_snapshot(self.path, meta, [item.to_dict() for item in self.items.values()], fsync=self.fsync)
        self._snap_key = file_key(self.path)
        self.snap_size = self._snap_key[3] if self._snap_key else 0
        self._rotate()

    # ----------------------------------------------------------------- operations

    def tallied(self) -> Tally:
        if self._tally is None:
            self._tally = Tally(self.items.values())
        return self._tally

    def apply(self, record: dict[str, Any]) -> list[ValueChange]:
        """Apply one journal operation to memory (the same code replays other processes' records)."""
        seq = int(record["seq"])
        if seq <= self.seq:
            return []
        record = migrate_record(record, self._jschema)
        self.seq = seq
        op = record["op"]
        changes: list[ValueChange] = []
        if op == "put":
            for d in record["items"]:
                item = MemoryItem.from_dict(d)
                old_item = self.items.get(item.id)
                if self._tally is not None:
                    if old_item is not None:
                        self._tally.replace(old_item, item)
                    else:
                        self._tally.add(item)
                self.items[item.id] = item
                self.index.put(item.id, item.lexical_text(), item.backends)
        elif op == "remove":
            for item_id in record["ids"]:
                gone = self.items.pop(item_id, None)
                if gone is not None:
                    self.index.remove(item_id)
                    if self._tally is not None:
                        self._tally.remove(gone)
        elif op == "credit":
            stage, reward, alpha, when = record["stage"], record["reward"], record["alpha"], record["t"]
            schedule = record.get("schedule", "constant")
            device = str(record.get("device") or "")
            baselines = record.get("baseline") or [0.0] * len(record["ids"])
            if "baseline" in record and (why := check_record(record)):
                raise MemoryCorrupt(f"{self.journal.path} has a damaged record (seq {seq}: {why})")
            lo, hi = reward_range(stage)
            for item_id, baseline in zip(record["ids"], baselines, strict=True):
                held = self.items.get(item_id)
                if held is None:
                    continue
                # rule "advantage" records what each item's reward is lessened by (`values.context_baselines`)
                target = min(hi, max(lo, reward - float(baseline))) if baseline else reward
                old, visits = held.q(stage), held.visits(stage) + 1
                new = mc_update(old, target, step_size(alpha, visits, schedule))
                if self._tally is not None:
                    self._tally.count(held, -1)  # only its values change: its place in its group stays
                held.set_value(stage, new, visits, when)
                if self._tally is not None:
                    self._tally.count(held, 1)
                if device:
                    _credit_device(held, device, stage, target, alpha, schedule)
                changes.append(ValueChange(item_id, stage, old, new, held.visits(stage), device))
        else:
            raise MemoryCorrupt(f"{self.journal.path} has an unknown operation {op!r}")
        return changes

    def commit(self, record: dict[str, Any]) -> list[ValueChange]:
        """Append one operation durably, apply it, and compact when the journal has grown large."""
        record = {**record, "seq": self.seq + 1}
        self.offset = self.journal.append(record)
        changes = self.apply(record)
        if self.offset > max(self.compact_min_bytes, self.snap_size // 2):
            self.compact()
        return changes

    def put(self, items: list[MemoryItem]) -> list[ValueChange]:
        """Commit one `put` of these items (new ones, or new versions of stored ones under their ids)."""
        return self.commit({"op": "put", "items": [item.to_dict() for item in items]})

    def remove(self, ids: list[str]) -> list[ValueChange]:
        """Commit one `remove` of these ids."""
        return self.commit({"op": "remove", "ids": ids})


def _credit_device(item: MemoryItem, device: str, stage: str, reward: float, alpha: float, schedule: str) -> None:
    """The same Monte-Carlo update on the item's values for one device class (`data["by_device"]`), so
    `memory stats` can tell what was learnt where; the item's own Q stays the value retrieval ranks by."""
    q_key, n_key = ("q1", "visits1") if stage == "draft" else ("q2", "visits2")
    by_device = item.data.setdefault("by_device", {})
    row = by_device.setdefault(device, {"q1": 0.0, "visits1": 0, "q2": 0.0, "visits2": 0})
    visits = int(row.get(n_key, 0)) + 1
    row[q_key] = mc_update(float(row.get(q_key, 0.0)), reward, step_size(alpha, visits, schedule))
    row[n_key] = visits
