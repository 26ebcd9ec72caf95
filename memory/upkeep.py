"""Looking after a bank as a whole: export and import (sharing a bank within a team), pruning items
that proved useless or crowd the bank, and repairing damaged bank files.

Each is occasional and works on the bank wholesale, unlike the per-attempt reads and updates of
`store`; `MemoryStore.export`, `import_`, `prune` and `repair` are these functions.
"""

from __future__ import annotations

import dataclasses
import json
import os
import uuid
from pathlib import Path

from filelock import FileLock

from memory.bank import Bank
from memory.items import MemoryItem, now
from memory.schema import SCHEMA_VERSION, MemoryCorrupt, items_from_rows, migrate
from memory.storage import (
    atomic_write_bytes,
    backup_path,
    journal_path,
    lock_path,
    read_json_file,
    read_snapshot,
    salvage_journal,
)

EXPORT_FORMAT = "evokernel-memory"


def export_items(bank: Bank, path: Path, fsync: bool) -> int:
    """Write every item to a JSON file a team can share; returns the number written."""
    with bank.locked():
        items = [i.to_dict() for i in bank.items.values()]
    payload = {"format": EXPORT_FORMAT, "schema": SCHEMA_VERSION, "exported": now(), "items": items}
    atomic_write_bytes(path, json.dumps(payload, indent=1, ensure_ascii=False).encode(), fsync)
    return len(items)


def import_items(bank: Bank, path: Path) -> dict[str, int]:
    """Merge an exported file (or another bank's snapshot) without duplicating (see `MemoryStore.import_`)."""
    incoming = read_items_file(path)
    with bank.locked():
        by_print = {i.fingerprint(): i for i in bank.items.values()}
        puts: list[MemoryItem] = []
        counts = {"added": 0, "updated": 0, "unchanged": 0}
        seen: set[str] = set()
        for item in incoming:
            match = bank.items.get(item.id) or by_print.get(item.fingerprint())
            if match is None:
                if item.id in seen:
                    counts["unchanged"] += 1
                    continue
                puts.append(item)
                counts["added"] += 1
            elif item.updated > match.updated:
                puts.append(dataclasses.replace(item, id=match.id))
                counts["updated"] += 1
            else:
                counts["unchanged"] += 1
            seen.add(item.id)
        if puts:
            bank.put(puts)
        return counts


def prune_items(bank: Bank, below: float | None, min_visits: int, max_trajectories: int | None, dry_run: bool,
                task: str | None) -> list[str]:
    """The ids `MemoryStore.prune` drops (removed unless `dry_run`); seeds are never pruned."""
    with bank.locked():
        doomed: list[str] = []
        if task is not None:
            doomed += [i.id for i in bank.items.values() if i.kind != "seed" and i.data.get("task") == task]
        if below is not None:
            for item in bank.items.values():
                stages = [q for q, v in ((item.q1, item.visits1), (item.q2, item.visits2)) if v]
                visits = item.visits1 + item.visits2
                if item.kind != "seed" and visits >= min_visits and stages and max(stages) < below:
                    doomed.append(item.id)
        if max_trajectories is not None:
            gone = set(doomed)
            trajs = [i for i in bank.items.values() if i.kind == "trajectory" and i.id not in gone]
            trajs.sort(key=lambda i: (max(i.q1, i.q2), i.updated), reverse=True)
            doomed.extend(i.id for i in trajs[max(0, max_trajectories) :])
        if doomed and not dry_run:
            bank.remove(doomed)
            bank.compact()
        return doomed


def repair_files(path: Path) -> tuple[list[str], list[str]] | None:
    """Bring a damaged bank's files back to a consistent state (see `MemoryStore.repair`); returns
    (what was kept, what could not be), or None when the bank is healthy."""
    with FileLock(str(lock_path(path)), timeout=60):
        problems = _diagnose(path)
        if not problems:
            return None
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
    return kept, lost


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


def read_items_file(path: Path) -> list[MemoryItem]:
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
    return items_from_rows(raw, path)
