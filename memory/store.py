"""The memory bank: items in memory, persisted as a tinydb snapshot plus an operation journal.

Every change is one journal operation (put, remove, credit) appended under a cross-process file
lock after first replaying what other processes appended, so concurrent writers never lose each
other's updates. Threads of one process are serialised by a re-entrant lock. See `storage` for the
file layout and `values` for the update rule.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import threading
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import platformdirs
from filelock import FileLock, Timeout

from memory.index import LexicalIndex
from memory.items import INITIAL_Q1, INITIAL_Q2, KINDS, MemoryItem, ValueChange, check_stage, now
from memory.storage import (
    SCHEMA_VERSION,
    Journal,
    MemoryCorrupt,
    atomic_write_bytes,
    backup_path,
    gc_paused,
    journal_path,
    lock_path,
    migrate,
    migrate_record,
    read_json_file,
    read_snapshot,
    salvage_journal,
    write_snapshot,
)
from memory.values import DEFAULT_ALPHA, DEFAULT_SCHEDULE, SCHEDULES, mc_update, step_size

ENV_VAR = "EVOKERNEL_MEMORY"
#: Feasible trajectories kept per task and stage (see `add_trajectory`).
DUPLICATE_CAP = 5
EXPORT_FORMAT = "evokernel-memory"


def default_path() -> Path:
    """`$EVOKERNEL_MEMORY`, else `memory.json` in the user data dir (e.g. ~/.local/share/evokernel)."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_data_dir("evokernel")) / "memory.json"


def _file_key(path: Path) -> tuple[int, int, int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)


def _read_header(path: Path) -> dict[str, Any] | None:
    """The journal's first line ({"base_seq", "gen"}), or None when there is no journal yet."""
    try:
        with open(path, "rb") as fh:
            line = fh.readline()
    except FileNotFoundError:
        return None
    try:
        header = json.loads(line)
        return {"base_seq": int(header["base_seq"]), "gen": str(header["gen"]), "size": len(line),
                "schema": int(header.get("schema", 2))}
    except (json.JSONDecodeError, KeyError, TypeError, ValueError):
        raise MemoryCorrupt(f"{path} has a damaged header") from None


class _Tally:
    """Near-duplicate groups and the value sums behind `neutral_values`, kept current by `_apply` so a
    new trajectory costs no scan of the bank (built on first use: loading a bank does not pay for it)."""

    def __init__(self, items: Iterable[MemoryItem] = ()) -> None:
        # Ids per group in the order they joined the bank (a dict as an ordered set; `replace` keeps an
        # item's place): a set of ids would iterate in an order set by the ids' hashes, and
        # `add_trajectory` breaks ties (merge target, which items the cap drops) by this order.
        self.groups: dict[tuple[str, str, str], dict[str, None]] = {}
        self.sums = {"draft": [0.0, 0], "refine": [0.0, 0]}
        for item in items:
            self.add(item)

    def add(self, item: MemoryItem) -> None:
        key = item.duplicate_key()
        if key is not None:
            self.groups.setdefault(key, {})[item.id] = None
        self.count(item, 1)

    def remove(self, item: MemoryItem) -> None:
        key = item.duplicate_key()
        if key is not None and key in self.groups:
            self.groups[key].pop(item.id, None)
            if not self.groups[key]:
                del self.groups[key]
        self.count(item, -1)

    def replace(self, old: MemoryItem, new: MemoryItem) -> None:
        """`old` became `new` (same id): its values change, its place in its group stays."""
        if old.duplicate_key() != new.duplicate_key():
            self.remove(old)
            self.add(new)
            return
        self.count(old, -1)
        self.count(new, 1)

    def count(self, item: MemoryItem, sign: int) -> None:
        """Add (sign 1) or take away (-1) the item's visited values in the sums behind the mean."""
        for stage, q, n in (("draft", item.q1, item.visits1), ("refine", item.q2, item.visits2)):
            if n:
                self.sums[stage][0] += sign * q
                self.sums[stage][1] += sign

    def mean(self, stage: str, default: float) -> float:
        total, n = self.sums[stage]
        return total / n if n > 0 else default


class MemoryStore:
    """A memory bank on disk, safe to share between threads and processes.

    `path=None` uses `default_path()`. A bank that does not exist yet is created, with the shipped
    seed items unless `seed=False`. `alpha` is the learning rate of `credit` and `schedule` how it
    is applied ("mean": max(alpha, 1/visits), "constant": alpha, see `values`). `fsync=False` trades
    durability of the last few operations for speed (simulations, benchmarks of the index).
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        alpha: float = DEFAULT_ALPHA,
        schedule: str = DEFAULT_SCHEDULE,
        seed: bool = True,
        fsync: bool = True,
        lock_timeout: float = 60.0,
        compact_min_bytes: int = 1 << 20,
    ) -> None:
        self.path = Path(path).expanduser() if path is not None else default_path()
        if schedule not in SCHEDULES:
            raise ValueError(f"unknown step-size schedule {schedule!r}; expected one of {', '.join(SCHEDULES)}")
        self.alpha = alpha
        self.schedule = schedule
        self.fsync = fsync
        self.compact_min_bytes = compact_min_bytes
        self._journal = Journal(journal_path(self.path), fsync=fsync)
        self._rlock = threading.RLock()
        self._flock = FileLock(str(lock_path(self.path)), timeout=lock_timeout)
        self._depth = 0
        self._closed = False
        self._items: dict[str, MemoryItem] = {}
        self._tally: _Tally | None = None
        self._index = LexicalIndex(cache_dir=self.path.with_name(self.path.name + ".bm25"))
        self._seq = 0
        self._snap_key: tuple[int, int, int, int] | None = None
        self._gen = ""
        self._jschema = SCHEMA_VERSION
        self._offset = 0
        self._snap_size = 0
        self._created = now()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._rlock, self._acquire():
            existed = self.path.exists() or self._journal.path.exists()
            if existed:
                self._load_full()
            else:
                self._create(seed)
        if existed and seed:
            self._add_new_seeds()

    def _add_new_seeds(self) -> None:
        """Seed items shipped after a bank was made reach it on the next open (matched by id)."""
        from memory.seeds import seed_items

        missing = [item for item in seed_items() if item.id not in self._items]
        if missing:
            with contextlib.suppress(ValueError):
                self.add_many(missing)

    # ----------------------------------------------------------------- locking and syncing

    @contextmanager
    def _acquire(self) -> Iterator[None]:
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
    def _locked(self) -> Iterator[None]:
        """Hold both locks and bring memory up to date with disk (once, at the outermost level)."""
        with self._rlock:
            if self._closed:
                raise ValueError(f"memory bank {self.path} is closed")
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            with self._acquire():
                self._depth = 1
                try:
                    self._sync()
                    yield
                finally:
                    self._depth = 0

    def _sync(self) -> None:
        """Replay what other processes appended; reload fully only when we cannot catch up."""
        header = _read_header(self._journal.path)
        snap_key = _file_key(self.path)
        if header is None or (snap_key is None and self._snap_key is not None):
            self._load_full()
            return
        if header["gen"] != self._gen:
            if snap_key != self._snap_key and header["base_seq"] <= self._seq:
                # Another process compacted: the snapshot holds nothing we have not applied.
                self._snap_key, self._gen, self._offset = snap_key, header["gen"], header["size"]
                self._jschema = header["schema"]
                self._snap_size = snap_key[3] if snap_key else 0
            else:
                self._load_full()
                return
        elif snap_key != self._snap_key:
            self._load_full()
            return
        records, self._offset = self._journal.read_from(self._offset)
        for record in records:
            self._apply(record)

    def _load_full(self) -> None:
        with gc_paused():
            meta, dicts = read_snapshot(self.path) if self.path.exists() else ({"seq": 0}, [])
            try:
                items = [MemoryItem.from_dict(d) for d in dicts]
            except (KeyError, TypeError, ValueError) as exc:
                raise MemoryCorrupt(f"{self.path} holds an item that cannot be read ({exc})") from None
            self._items = {item.id: item for item in items}
            self._tally = None
        self._seq = int(meta.get("seq", 0))
        self._created = float(meta.get("created", now()))
        self._snap_key = _file_key(self.path)
        self._snap_size = self._snap_key[3] if self._snap_key else 0
        self._index.reset(self._items)
        header = _read_header(self._journal.path)
        if header is None:
            self._rotate()
        else:
            self._gen, self._offset = header["gen"], header["size"]
            self._jschema = header["schema"]
            records, self._offset = self._journal.read_from(self._offset)
            for record in records:
                self._apply(record)
        if int(meta.get("migrated_from", SCHEMA_VERSION)) < SCHEMA_VERSION:
            self._compact()

    def _create(self, seed: bool) -> None:
        from memory.seeds import seed_items

        self._items = {item.id: item for item in (seed_items() if seed else [])}
        self._tally = None
        self._index.reset(dict(self._items))
        self._compact()

    def _rotate(self) -> None:
        self._gen = uuid.uuid4().hex
        self._jschema = SCHEMA_VERSION
        header = {"base_seq": self._seq, "gen": self._gen, "schema": SCHEMA_VERSION}
        payload = (json.dumps(header) + "\n").encode()
        atomic_write_bytes(self._journal.path, payload, fsync=self.fsync)
        self._offset = len(payload)

    def _compact(self) -> None:
        """Fold the journal into a new snapshot, then start an empty journal (caller holds the locks)."""
        meta = {"seq": self._seq, "created": self._created, "updated": now()}
        write_snapshot(self.path, meta, [item.to_dict() for item in self._items.values()], fsync=self.fsync)
        self._snap_key = _file_key(self.path)
        self._snap_size = self._snap_key[3] if self._snap_key else 0
        self._rotate()

    # ----------------------------------------------------------------- operations

    def _apply(self, record: dict[str, Any]) -> list[ValueChange]:
        """Apply one journal operation to memory (the same code replays other processes' records)."""
        seq = int(record["seq"])
        if seq <= self._seq:
            return []
        record = migrate_record(record, self._jschema)
        self._seq = seq
        op = record["op"]
        changes: list[ValueChange] = []
        if op == "put":
            for d in record["items"]:
                item = MemoryItem.from_dict(d)
                old_item = self._items.get(item.id)
                if self._tally is not None:
                    if old_item is not None:
                        self._tally.replace(old_item, item)
                    else:
                        self._tally.add(item)
                self._items[item.id] = item
                self._index.put(item.id, item.lexical_text(), item.backends)
        elif op == "remove":
            for item_id in record["ids"]:
                gone = self._items.pop(item_id, None)
                if gone is not None:
                    self._index.remove(item_id)
                    if self._tally is not None:
                        self._tally.remove(gone)
        elif op == "credit":
            stage, reward, alpha, when = record["stage"], record["reward"], record["alpha"], record["t"]
            schedule = record.get("schedule", "constant")
            for item_id in record["ids"]:
                item = self._items.get(item_id)
                if item is None:
                    continue
                old, visits = item.q(stage), item.visits(stage) + 1
                new = mc_update(old, reward, step_size(alpha, visits, schedule))
                if self._tally is not None:
                    self._tally.count(item, -1)  # only its values change: its place in its group stays
                item.set_value(stage, new, visits, when)
                if self._tally is not None:
                    self._tally.count(item, 1)
                changes.append(ValueChange(item_id, stage, old, new, item.visits(stage)))
        else:
            raise MemoryCorrupt(f"{self._journal.path} has an unknown operation {op!r}")
        return changes

    def _commit(self, record: dict[str, Any]) -> list[ValueChange]:
        """Append one operation durably, apply it, and compact when the journal has grown large."""
        record = {**record, "seq": self._seq + 1}
        self._offset = self._journal.append(record)
        changes = self._apply(record)
        if self._offset > max(self.compact_min_bytes, self._snap_size // 2):
            self._compact()
        return changes

    def add(self, item: MemoryItem, neutral: bool = False) -> MemoryItem:
        """Add a new item; its id must not be taken (`neutral`: see `add_many`)."""
        return self.add_many([item], neutral=neutral)[0]

    def neutral_values(self) -> tuple[float, float]:
        """(Q1, Q2) a new item starts at: the mean value of the items already visited in each stage.

        "Neutral" means no better and no worse than a typical item that has been tried: a fixed 0
        would rank a fresh, untried item above every item whose contexts succeed less than half
        the time, so each new attempt would push proven items out of the prompt.
        """
        with self._locked():
            tally = self._tallied()
            return tally.mean("draft", INITIAL_Q1), tally.mean("refine", INITIAL_Q2)

    def _tallied(self) -> _Tally:
        if self._tally is None:
            self._tally = _Tally(self._items.values())
        return self._tally

    def add_many(self, items: Iterable[MemoryItem], neutral: bool = False) -> list[MemoryItem]:
        """Add new items; with `neutral`, unvisited ones start at `neutral_values()`."""
        items = list(items)
        with self._locked():
            for item in items:
                if item.id in self._items:
                    raise ValueError(f"memory item {item.id!r} already exists")
            if neutral:
                q1, q2 = self.neutral_values()
                for item in items:
                    if not item.visits1:
                        item.q1 = q1
                    if not item.visits2:
                        item.q2 = q2
            if items:
                self._commit({"op": "put", "items": [item.to_dict() for item in items]})
        return items

    def add_trajectory(self, item: MemoryItem, cap: int = DUPLICATE_CAP) -> tuple[MemoryItem, str]:
        """Add one attempt's trajectory without letting near-duplicates crowd the bank.

        - A failed attempt is merged into the task's existing lesson of the same stage and outcome
          (its text becomes the newest lesson, its value and visits are kept, `data["merged"]`
          counts the attempts folded in), so repeated failures are one item, not a pool full.
        - A feasible attempt is a new item (a refine start point) at the neutral value; when its
          task already has more than `cap` of them for the stage, the lowest-valued, oldest go.
        Returns (the stored item, "merged" or "added").
        """
        key = item.duplicate_key()
        if key is None:
            raise ValueError(f"{item.id} is not a trajectory")
        stage = key[1] if key[1] in ("draft", "refine") else "draft"
        with self._locked():
            same = [self._items[i] for i in self._tallied().groups.get(key, ()) if i != item.id and i in self._items]
            if same and key[2] != "feasible":
                keep = max(same, key=lambda i: (i.visits(stage), i.created))
                merged = copy.deepcopy(keep)
                merged.title, merged.text, merged.tags = item.title, item.text, list(item.tags)
                merged.data = {**item.data, "merged": int(keep.data.get("merged", 1)) + 1,
                               "first_created": keep.data.get("first_created", keep.created)}
                merged.updated = now()
                self._commit({"op": "put", "items": [merged.to_dict()]})
                return copy.deepcopy(self._items[keep.id]), "merged"
            self.add_many([item], neutral=True)
            group = same + [self._items[item.id]]
            if len(group) > cap:
                group.sort(key=lambda i: (i.q(stage), i.created), reverse=True)
                doomed = [i.id for i in group[cap:] if i.id != item.id]
                if doomed:
                    self._commit({"op": "remove", "ids": doomed})
            return copy.deepcopy(self._items[item.id]), "added"

    def add_insight(self, item: MemoryItem) -> tuple[MemoryItem, str]:
        """Add an insight unless it repeats one already stored: returns (item, "added"), or the
        stored insight it repeats and "duplicate" (nothing is written then)."""
        from memory.writing import is_duplicate_insight

        with self._locked():
            same = is_duplicate_insight(item, [i for i in self._items.values() if i.kind == "insight"])
            if same is not None:
                return copy.deepcopy(same), "duplicate"
            self.add_many([item], neutral=True)
            return copy.deepcopy(self._items[item.id]), "added"

    def remove(self, ids: Iterable[str]) -> int:
        """Remove items by id; unknown ids are ignored. Returns how many were removed."""
        with self._locked():
            present = [i for i in dict.fromkeys(ids) if i in self._items]
            if present:
                self._commit({"op": "remove", "ids": present})
            return len(present)

    def credit(
        self, ids: Iterable[str], stage: str, reward: float, alpha: float | None = None
    ) -> list[ValueChange]:
        """Monte-Carlo update of every item that was in an attempt's context: Q <- Q + a (G - Q).

        `a` is `alpha` (the store's by default) under the store's schedule: with "mean" an item's
        n-th update uses max(alpha, 1/n), so Q is the plain mean of its first 1/alpha returns.

        Used alike for the verifier's reward and for a person's edit, acceptance or rejection.
        Duplicate ids count once; ids no longer in the bank (pruned elsewhere) are skipped.
        """
        check_stage(stage)
        alpha = self.alpha if alpha is None else alpha
        mc_update(0.0, reward, alpha)  # validates alpha and reward before anything is written
        with self._locked():
            present = [i for i in dict.fromkeys(ids) if i in self._items]
            if not present:
                return []
            record = {"op": "credit", "ids": present, "stage": stage, "reward": float(reward), "alpha": alpha}
            if self.schedule != "constant":
                record["schedule"] = self.schedule
            return self._commit({**record, "t": now()})

    def refresh(self) -> None:
        """Pick up what other processes wrote."""
        with self._locked():
            pass

    def flush(self) -> None:
        """Fold the journal into the snapshot now (also happens automatically as the journal grows)."""
        with self._locked():
            self._compact()

    def close(self) -> None:
        """Stop using the bank; everything is already durable in the journal."""
        with self._rlock:
            self._closed = True

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------- reading

    def __len__(self) -> int:
        with self._locked():
            return len(self._items)

    def __contains__(self, item_id: object) -> bool:
        with self._locked():
            return item_id in self._items

    def get(self, item_id: str) -> MemoryItem:
        """A copy of one item; KeyError names the id when it is not in the bank."""
        with self._locked():
            try:
                return self._items[item_id].clone()
            except KeyError:
                raise KeyError(f"no memory item {item_id!r} in {self.path}") from None

    def items(self, kind: str | None = None) -> list[MemoryItem]:
        """Copies of all items (optionally of one kind), oldest first."""
        with self._locked():
            chosen = [i for i in self._items.values() if kind is None or i.kind == kind]
            return sorted((i.clone() for i in chosen), key=lambda i: (i.created, i.id))

    def recall(
        self, query: str, n: int, backend: str | None = None, backend_boost: float = 0.0
    ) -> list[tuple[MemoryItem, float]]:
        """The `n` items most lexically similar to `query` (BM25), as (copy, similarity in 0..1).

        Similarity is BM25 over the best match, plus `backend_boost` for items of `backend` (or of
        every backend), rescaled by 1 / (1 + boost) so it stays within 0..1.
        """
        with self._locked():
            if not self._items or n <= 0:
                return []
            ids, raw = self._index.scores(query)
            top = float(raw.max()) if raw.size else 0.0
            sims = raw / top if top > 0 else np.where(raw < 0, np.float32(-1.0), np.float32(0.0))
            if backend and backend_boost:
                sims = (sims + backend_boost * self._index.backend_mask(backend)) / (1.0 + backend_boost)
            sims = np.where(raw < 0, -np.inf, sims)
            live = int(np.count_nonzero(raw >= 0))
            n = min(n, live)
            if n <= 0:
                return []
            part = np.argpartition(-sims, n - 1)[:n] if n < len(ids) else np.arange(len(ids))
            order = part[np.lexsort((part, -sims[part]))]
            return [(self._items[ids[r]].clone(), float(sims[r])) for r in order]

    def stats(self) -> dict[str, Any]:
        """Counts and value summaries for `evokernel memory stats` and the app."""
        with self._locked():
            items = list(self._items.values())
            by_kind = Counter(i.kind for i in items)
            by_backend = Counter(b for i in items for b in (i.backends or ["any"]))
            by_category = Counter(i.category or "-" for i in items)

            def mean(xs: list[float]) -> float | None:
                return round(sum(xs) / len(xs), 4) if xs else None

            return {
                "path": str(self.path),
                "schema": SCHEMA_VERSION,
                "items": len(items),
                "kinds": {k: by_kind.get(k, 0) for k in KINDS},
                "backends": dict(by_backend.most_common()),
                "categories": dict(by_category.most_common()),
                "visited_draft": sum(1 for i in items if i.visits1),
                "visited_refine": sum(1 for i in items if i.visits2),
                "visits_draft": sum(i.visits1 for i in items),
                "visits_refine": sum(i.visits2 for i in items),
                "mean_q1_visited": mean([i.q1 for i in items if i.visits1]),
                "mean_q2_visited": mean([i.q2 for i in items if i.visits2]),
                "operations": self._seq,
                "snapshot_bytes": self._snap_size,
                "journal_bytes": self._offset,
            }

    # ----------------------------------------------------------------- sharing and upkeep

    def export(self, path: str | Path) -> int:
        """Write every item to a JSON file a team can share; returns the number written."""
        with self._locked():
            items = [i.to_dict() for i in self._items.values()]
        payload = {"format": EXPORT_FORMAT, "schema": SCHEMA_VERSION, "exported": now(), "items": items}
        atomic_write_bytes(Path(path), json.dumps(payload, indent=1, ensure_ascii=False).encode(), self.fsync)
        return len(items)

    def import_(self, path: str | Path) -> dict[str, int]:
        """Merge an exported file (or another bank's snapshot) without duplicating.

        An incoming item matches an existing one by id or by content (kind, title, text). A match
        is replaced only when the incoming copy was updated later, so importing twice changes
        nothing. Returns counts of added, updated and unchanged items.
        """
        incoming = _read_items_file(Path(path))
        with self._locked():
            by_print = {i.fingerprint(): i for i in self._items.values()}
            puts: list[dict[str, Any]] = []
            counts = {"added": 0, "updated": 0, "unchanged": 0}
            seen: set[str] = set()
            for item in incoming:
                match = self._items.get(item.id) or by_print.get(item.fingerprint())
                if match is None:
                    if item.id in seen:
                        counts["unchanged"] += 1
                        continue
                    puts.append(item.to_dict())
                    counts["added"] += 1
                elif item.updated > match.updated:
                    puts.append({**item.to_dict(), "id": match.id})
                    counts["updated"] += 1
                else:
                    counts["unchanged"] += 1
                seen.add(item.id)
            if puts:
                self._commit({"op": "put", "items": puts})
            return counts

    def prune(
        self,
        below: float | None = None,
        min_visits: int = 3,
        max_trajectories: int | None = None,
        dry_run: bool = False,
        task: str | None = None,
    ) -> list[str]:
        """Drop items that proved useless or crowd the bank; seeds are never pruned.

        - `below`: a trajectory or insight whose every visited stage has Q under `below` after at
          least `min_visits` visits;
        - `max_trajectories`: keep only that many trajectories, dropping the lowest-valued, oldest.
        - `task`: every trajectory and insight written on that task (for held-out transfer experiments:
          the bank then holds nothing learnt on it, seeds aside).
        Returns the ids removed (or that would be, with `dry_run`).
        """
        with self._locked():
            doomed: list[str] = []
            if task is not None:
                doomed += [i.id for i in self._items.values() if i.kind != "seed" and i.data.get("task") == task]
            if below is not None:
                for item in self._items.values():
                    stages = [q for q, v in ((item.q1, item.visits1), (item.q2, item.visits2)) if v]
                    visits = item.visits1 + item.visits2
                    if item.kind != "seed" and visits >= min_visits and stages and max(stages) < below:
                        doomed.append(item.id)
            if max_trajectories is not None:
                gone = set(doomed)
                trajs = [i for i in self._items.values() if i.kind == "trajectory" and i.id not in gone]
                trajs.sort(key=lambda i: (max(i.q1, i.q2), i.updated), reverse=True)
                doomed.extend(i.id for i in trajs[max(0, max_trajectories) :])
            if doomed and not dry_run:
                self._commit({"op": "remove", "ids": doomed})
                self._compact()
            return doomed

    @staticmethod
    def repair(path: str | Path | None = None) -> str:
        """Bring a damaged bank back without dropping anything silently; returns what was done.

        - A damaged snapshot (unreadable, or missing its tables) is replaced by its backup, which is
          written at every compaction and so holds everything the journal does not.
        - The journal is read line by line: every operation that still parses is replayed, and only
          the damaged lines are lost; their line numbers are reported.
        - The damaged files are kept next to the bank with a `.corrupt` suffix, and the repaired
          bank is compacted into a fresh snapshot and journal.
        The returned text says what was kept and what could not be.
        """
        path = Path(path).expanduser() if path is not None else default_path()
        with FileLock(str(lock_path(path)), timeout=60):
            problems = _diagnose(path)
            if not problems:
                return f"{path} is healthy; nothing to repair"
            kept: list[str] = []
            lost: list[str] = []
            snap_seq = 0
            if "snapshot" in problems:
                bak = backup_path(path)
                if not bak.exists() or _diagnose_snapshot(bak):
                    raise MemoryCorrupt(
                        f"{path} is damaged ({problems['snapshot']}) and there is no good backup; "
                        "move it away to start a fresh bank"
                    )
                if path.exists():
                    os.replace(path, path.with_name(path.name + ".corrupt"))
                atomic_write_bytes(path, bak.read_bytes())
                meta, dicts = read_snapshot(path)
                snap_seq = int(meta.get("seq", 0))
                kept.append(f"{len(dicts)} items from {bak.name} (operations up to {snap_seq})")
                lost.append(f"{path.name}: {problems['snapshot']}")
            elif path.exists():
                meta, dicts = read_snapshot(path)
                snap_seq = int(meta.get("seq", 0))
                kept.append(f"{len(dicts)} items from {path.name} (operations up to {snap_seq})")
            jpath = journal_path(path)
            if jpath.exists():
                header, records, bad = salvage_journal(jpath)
                base = int(header["base_seq"]) if header else None
                newer = [r for r in records if r["seq"] > snap_seq]
                if "journal" in problems or bad or header is None:
                    os.replace(jpath, jpath.with_name(jpath.name + ".corrupt"))
                    schema = int(header.get("schema", 2)) if header else SCHEMA_VERSION
                    fresh = {"base_seq": snap_seq, "gen": uuid.uuid4().hex, "schema": schema}
                    lines = [json.dumps(fresh)] + [json.dumps(r, separators=(",", ":")) for r in newer]
                    atomic_write_bytes(jpath, ("\n".join(lines) + "\n").encode())
                kept.append(f"{len(newer)} journal operations replayed")
                if header is None:
                    lost.append(f"{jpath.name}: damaged header")
                lost += [f"{jpath.name} {why}" for why in bad]
                if base is not None and base > snap_seq:
                    lost.append(f"operations {snap_seq + 1}..{base} were only in the damaged snapshot")
        # The files are consistent again: open the bank (which takes the lock itself) and compact it.
        store = MemoryStore(path, seed=False)
        try:
            store.flush()
            total = len(store)
        finally:
            store.close()
        text = f"repaired {path}: kept " + "; ".join(kept) + f"; the bank now holds {total} items"
        text += ". Could not keep: " + "; ".join(lost) if lost else ". Nothing was lost"
        return text + " (damaged files kept with a .corrupt suffix)"


def _diagnose_snapshot(path: Path) -> str | None:
    try:
        meta, dicts = read_snapshot(path)
        for d in dicts:
            MemoryItem.from_dict(d)
    except (MemoryCorrupt, KeyError, TypeError, ValueError) as exc:
        return str(exc)
    return None


def _diagnose(path: Path) -> dict[str, str]:
    problems: dict[str, str] = {}
    if path.exists() and (why := _diagnose_snapshot(path)):
        problems["snapshot"] = why
    jpath = journal_path(path)
    if jpath.exists():
        header, _, bad = salvage_journal(jpath)
        bad = [why for why in bad if "incomplete" not in why]  # a torn last line is normal after a crash
        if header is None:
            problems["journal"] = f"{jpath} has a damaged header"
        elif bad:
            problems["journal"] = f"{jpath}: " + "; ".join(bad)
    return problems


def _read_items_file(path: Path) -> list[MemoryItem]:
    """Items from an export file or a bank snapshot, with clear errors for anything else."""
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    data = read_json_file(path)
    if isinstance(data, dict) and data.get("format") == EXPORT_FORMAT:
        raw = data.get("items", [])
        meta = {"schema": data.get("schema", SCHEMA_VERSION)}
    elif isinstance(data, dict) and isinstance(data.get("items"), dict):
        metas = list((data.get("meta") or {}).values())
        meta = dict(metas[0]) if metas else {"schema": 1}
        raw = list(data["items"].values())
    else:
        raise MemoryCorrupt(f"{path} is neither an evokernel memory export nor a memory bank")
    _, raw = migrate(meta, [dict(d) for d in raw], path)
    try:
        return [MemoryItem.from_dict(d) for d in raw]
    except (KeyError, TypeError, ValueError) as exc:
        raise MemoryCorrupt(f"{path} holds an item that cannot be read ({exc})") from None
