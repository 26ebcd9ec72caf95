"""The memory bank's API: `MemoryStore` adds, credits, removes and reads items for sessions, retrieval
and the `memory` command, safe to share between threads and processes.

Which operations to commit and what to return is decided here; keeping the items in step with the
files (locks, journal replay, compaction) is `bank`, the files themselves are `storage`, the row
shape and its migrations `schema`, and whole-bank chores (export, import, prune, repair) `upkeep`.
"""

from __future__ import annotations

import contextlib
import copy
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from memory import values as _values
from memory.bank import Bank
from memory.items import INITIAL_Q1, INITIAL_Q2, KINDS, MemoryItem, ValueChange, check_stage, now
from memory.schema import SCHEMA_VERSION
from memory.storage import ENV_VAR, default_path
from memory.upkeep import EXPORT_FORMAT, export_items, import_items, prune_items, repair_files
from memory.values import (
    DEFAULT_ALPHA,
    DEFAULT_CREDIT,
    DEFAULT_SCHEDULE,
    SCHEDULES,
    check_credit_rule,
    context_baselines,
    mc_update,
)

__all__ = ["DUPLICATE_CAP", "ENV_VAR", "EXPORT_FORMAT", "MemoryStore", "default_path"]

#: Feasible trajectories kept per task and stage (see `add_trajectory`).
DUPLICATE_CAP = 5


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
        self._bank = Bank(self.path, fsync=fsync, lock_timeout=lock_timeout, compact_min_bytes=compact_min_bytes)
        existed = self._bank.open(seed)
        if existed and seed:
            self._add_new_seeds()

    @property
    def compact_min_bytes(self) -> int:
        """The journal is folded into the snapshot once it outgrows this (or half the snapshot)."""
        return self._bank.compact_min_bytes

    @compact_min_bytes.setter
    def compact_min_bytes(self, value: int) -> None:
        self._bank.compact_min_bytes = value

    def _add_new_seeds(self) -> None:
        """Seed items shipped after a bank was made reach it on the next open (matched by id)."""
        from memory.seeds import seed_items

        missing = [item for item in seed_items() if item.id not in self._bank.items]
        if missing:
            with contextlib.suppress(ValueError):
                self.add_many(missing)

    # ----------------------------------------------------------------- operations

    def add(self, item: MemoryItem, neutral: bool = False) -> MemoryItem:
        """Add a new item; its id must not be taken (`neutral`: see `add_many`)."""
        return self.add_many([item], neutral=neutral)[0]

    def neutral_values(self) -> tuple[float, float]:
        """(Q1, Q2) a new item starts at: the mean value of the items already visited in each stage.

        "Neutral" means no better and no worse than a typical item that has been tried: a fixed 0
        would rank a fresh, untried item above every item whose contexts succeed less than half
        the time, so each new attempt would push proven items out of the prompt.
        """
        with self._bank.locked():
            tally = self._bank.tallied()
            return tally.mean("draft", INITIAL_Q1), tally.mean("refine", INITIAL_Q2)

    def add_many(self, items: Iterable[MemoryItem], neutral: bool = False) -> list[MemoryItem]:
        """Add new items; with `neutral`, unvisited ones start at `neutral_values()`."""
        items = list(items)
        with self._bank.locked():
            for item in items:
                if item.id in self._bank.items:
                    raise ValueError(f"memory item {item.id!r} already exists")
            if neutral:
                q1, q2 = self.neutral_values()
                for item in items:
                    if not item.visits1:
                        item.q1 = q1
                    if not item.visits2:
                        item.q2 = q2
            if items:
                self._bank.put(items)
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
        with self._bank.locked():
            stored = self._bank.items
            same = [stored[i] for i in self._bank.tallied().groups.get(key, ()) if i != item.id and i in stored]
            if same and key[2] != "feasible":
                keep = max(same, key=lambda i: (i.visits(stage), i.created))
                merged = copy.deepcopy(keep)
                merged.title, merged.text, merged.tags = item.title, item.text, list(item.tags)
                merged.data = {**item.data, "merged": int(keep.data.get("merged", 1)) + 1,
                               "first_created": keep.data.get("first_created", keep.created)}
                if keep.data.get("by_device"):  # the values learnt per device stay with the values
                    merged.data["by_device"] = copy.deepcopy(keep.data["by_device"])
                merged.updated = now()
                self._bank.put([merged])
                return copy.deepcopy(self._bank.items[keep.id]), "merged"
            self.add_many([item], neutral=True)
            group = same + [self._bank.items[item.id]]
            if len(group) > cap:
                group.sort(key=lambda i: (i.q(stage), i.created), reverse=True)
                doomed = [i.id for i in group[cap:] if i.id != item.id]
                if doomed:
                    self._bank.remove(doomed)
            return copy.deepcopy(self._bank.items[item.id]), "added"

    def add_insight(self, item: MemoryItem) -> tuple[MemoryItem, str]:
        """Add an insight unless it repeats one already stored: returns (item, "added"), or the
        stored insight it repeats and "duplicate" (nothing is written then)."""
        from memory.writing import is_duplicate_insight

        with self._bank.locked():
            same = is_duplicate_insight(item, [i for i in self._bank.items.values() if i.kind == "insight"])
            if same is not None:
                return copy.deepcopy(same), "duplicate"
            self.add_many([item], neutral=True)
            return copy.deepcopy(self._bank.items[item.id]), "added"

    def remove(self, ids: Iterable[str]) -> int:
        """Remove items by id; unknown ids are ignored. Returns how many were removed."""
        with self._bank.locked():
            present = [i for i in dict.fromkeys(ids) if i in self._bank.items]
            if present:
                self._bank.remove(present)
            return len(present)

    def credit(
        self, ids: Iterable[str], stage: str, reward: float, alpha: float | None = None, device: str = "",
        rule: str = DEFAULT_CREDIT,
    ) -> list[ValueChange]:
        """Monte-Carlo update of every item that was in an attempt's context: Q <- Q + a (G - Q).

        `a` is `alpha` (the store's by default) under the store's schedule: with "mean" an item's
        n-th update uses max(alpha, 1/n), so Q is the plain mean of its first 1/alpha returns.

        Used alike for the verifier's reward and for a person's edit, acceptance or rejection.
        Duplicate ids count once; ids no longer in the bank (pruned elsewhere) are skipped.
        `device` (a device class, given by the caller) is recorded with the update, and the same update
        is made to the items' values for that device (`MemoryItem.device_values`).
        `rule` "advantage": each item is credited with its value plus the context's surprise, the reward
        less the mean value of the items credited (`values.context_baselines`, from the values before this
        update); what each item's reward was lessened by is recorded with the operation ("baseline"), so
        replaying the journal gives the same values.
        """
        check_stage(stage)
        check_credit_rule(rule)
        alpha = self.alpha if alpha is None else alpha
        mc_update(0.0, reward, alpha)  # validates alpha and reward before anything is written
        with self._bank.locked():
            present = [i for i in dict.fromkeys(ids) if i in self._bank.items]
            if not present:
                return []
            record: dict[str, Any] = {"op": "credit", "ids": present, "stage": stage, "reward": float(reward),
                                      "alpha": alpha}
            if rule == "advantage" and len(present) > 1:
                items = [self._bank.items[i] for i in present]
                mean = self._bank.tallied().mean(stage, 0.0)
                qs = [i.q(stage) if i.visits(stage) else None for i in items]
                record["baseline"] = [round(b, 6) for b in context_baselines(qs, mean, _values.ADVANTAGE_WEIGHT)]
            if self.schedule != "constant":
                record["schedule"] = self.schedule
            if device:
                record["device"] = str(device)
            return self._bank.commit({**record, "t": now()})

    def refresh(self) -> None:
        """Pick up what other processes wrote."""
        with self._bank.locked():
            pass

    def flush(self) -> None:
        """Fold the journal into the snapshot now (also happens automatically as the journal grows)."""
        with self._bank.locked():
            self._bank.compact()

    def close(self) -> None:
        """Stop using the bank; everything is already durable in the journal."""
        self._bank.close()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------- reading

    def __len__(self) -> int:
        with self._bank.locked():
            return len(self._bank.items)

    def __contains__(self, item_id: object) -> bool:
        with self._bank.locked():
            return item_id in self._bank.items

    def get(self, item_id: str) -> MemoryItem:
        """A copy of one item; KeyError names the id when it is not in the bank."""
        with self._bank.locked():
            try:
                return self._bank.items[item_id].clone()
            except KeyError:
                raise KeyError(f"no memory item {item_id!r} in {self.path}") from None

    def items(self, kind: str | None = None) -> list[MemoryItem]:
        """Copies of all items (optionally of one kind), oldest first."""
        with self._bank.locked():
            chosen = [i for i in self._bank.items.values() if kind is None or i.kind == kind]
            return sorted((i.clone() for i in chosen), key=lambda i: (i.created, i.id))

    def recall(
        self, query: str, n: int, backend: str | None = None, backend_boost: float = 0.0
    ) -> list[tuple[MemoryItem, float]]:
        """The `n` items most lexically similar to `query` (BM25), as (copy, similarity in 0..1).

        Similarity is BM25 over the best match, plus `backend_boost` for items of `backend` (or of
        every backend), rescaled by 1 / (1 + boost) so it stays within 0..1.
        """
        with self._bank.locked():
            if not self._bank.items or n <= 0:
                return []
            ids, raw = self._bank.index.scores(query)
            top = float(raw.max()) if raw.size else 0.0
            sims = raw / top if top > 0 else np.where(raw < 0, np.float32(-1.0), np.float32(0.0))
            if backend and backend_boost:
                sims = (sims + backend_boost * self._bank.index.backend_mask(backend)) / (1.0 + backend_boost)
            sims = np.where(raw < 0, -np.inf, sims)
            live = int(np.count_nonzero(raw >= 0))
            n = min(n, live)
            if n <= 0:
                return []
            part = np.argpartition(-sims, n - 1)[:n] if n < len(ids) else np.arange(len(ids))
            order = part[np.lexsort((part, -sims[part]))]
            return [(self._bank.items[ids[r]].clone(), float(sims[r])) for r in order]

    def stats(self) -> dict[str, Any]:
        """Counts and value summaries for `evokernel memory stats` and the app."""
        with self._bank.locked():
            items = list(self._bank.items.values())
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
                "devices": _by_device(items, mean),
                "operations": self._bank.seq,
                "snapshot_bytes": self._bank.snap_size,
                "journal_bytes": self._bank.offset,
            }

    # ----------------------------------------------------------------- sharing and upkeep

    def export(self, path: str | Path) -> int:
        """Write every item to a JSON file a team can share; returns the number written."""
        return export_items(self._bank, Path(path), self.fsync)

    def import_(self, path: str | Path) -> dict[str, int]:
        """Merge an exported file (or another bank's snapshot) without duplicating.

        An incoming item matches an existing one by id or by content (kind, title, text). A match
        is replaced only when the incoming copy was updated later, so importing twice changes
        nothing. Returns counts of added, updated and unchanged items.
        """
        return import_items(self._bank, Path(path))

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
        return prune_items(self._bank, below, min_visits, max_trajectories, dry_run, task)

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
        found = repair_files(path)
        if found is None:
            return f"{path} is healthy; nothing to repair"
        kept, lost = found
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



def _by_device(items: list[MemoryItem], mean: Any) -> dict[str, dict[str, Any]]:
    """Per device class: items learnt there, and the values credited there (visited items' mean Q1/Q2 and
    visits). Items and credits that named no device are under "unknown"."""
    rows: dict[str, dict[str, Any]] = {}

    def row(cls: str) -> dict[str, Any]:
        return rows.setdefault(cls or "unknown", {"learnt": 0, "q1": [], "q2": [], "visits_draft": 0,
                                                 "visits_refine": 0})

    for item in items:
        if item.kind != "seed":
            row(item.learnt_on)["learnt"] += 1
        per = item.device_values()
        credited1 = credited2 = 0
        for cls, v in per.items():
            r = row(cls)
            if v.get("visits1"):
                r["q1"].append(float(v["q1"]))
                r["visits_draft"] += int(v["visits1"])
                credited1 += int(v["visits1"])
            if v.get("visits2"):
                r["q2"].append(float(v["q2"]))
                r["visits_refine"] += int(v["visits2"])
                credited2 += int(v["visits2"])
        if item.visits1 > credited1 or item.visits2 > credited2:  # credits from before devices were recorded
            r = row("")
            r["visits_draft"] += item.visits1 - credited1
            r["visits_refine"] += item.visits2 - credited2
    return {cls: {"learnt": r["learnt"], "visits_draft": r["visits_draft"], "visits_refine": r["visits_refine"],
                  "mean_q1_visited": mean(r["q1"]), "mean_q2_visited": mean(r["q2"])}
            for cls, r in sorted(rows.items())}
