"""The shape of what a bank stores, and how older shapes are brought up to date.

A memory row is one `MemoryItem` (see `items`); on disk, in the snapshot and in the journal's `put`
operations, it is that item's `to_dict()`. Banks written under an older `SCHEMA_VERSION` hold rows
(and journal operations) of an older shape: the migrations here rewrite them, one version at a
time, before `MemoryItem.from_dict` reads them, so old banks keep loading. `check_record` says
whether a journal line is a usable operation. Kept apart from the file layer (`storage`) so the
row shape and its history can be read, and changed, in one place.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from memory.items import MemoryItem

SCHEMA_VERSION = 3


class MemoryCorrupt(Exception):
    """A bank file cannot be read; `evokernel memory repair` restores the last good snapshot."""



def _v1_to_v2(item: dict[str, Any]) -> dict[str, Any]:
    """Schema 1 kept one value `q` and one `visits` for both stages; schema 2 splits them per stage."""
    out = dict(item)
    q = float(out.pop("q", 0.5))
    visits = int(out.pop("visits", 0))
    out.setdefault("q1", q)
    out.setdefault("visits1", visits)
    out.setdefault("q2", 0.0)
    out.setdefault("visits2", 0)
    out.setdefault("data", {})
    return out


def _v2_to_v3(item: dict[str, Any]) -> dict[str, Any]:
    """Schema 2 drafted on a 0..1 reward scale (neutral 0.5); schema 3 uses [-1, 1] (neutral 0)."""
    out = dict(item)
    out["q1"] = 2.0 * float(out.get("q1", 0.5)) - 1.0
    return out


MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _v1_to_v2, 2: _v2_to_v3}


def migrate_record(record: dict[str, Any], schema: int) -> dict[str, Any]:
    """A journal operation written under an older `schema`, brought up to `SCHEMA_VERSION`."""
    if schema >= SCHEMA_VERSION:
        return record
    out = dict(record)
    if out.get("op") == "put":
        items = [dict(d) for d in out.get("items", [])]
        for version in range(schema, SCHEMA_VERSION):
            items = [MIGRATIONS[version](d) for d in items]
        out["items"] = items
    elif out.get("op") == "credit" and out.get("stage") == "draft" and schema < 3:
        out["reward"] = 2.0 * float(out["reward"]) - 1.0
    return out


def migrate(
    meta: dict[str, Any], items: list[dict[str, Any]], path: Path
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Bring items from an older schema up to `SCHEMA_VERSION`, one step at a time."""
    version = int(meta.get("schema", 1))
    if version > SCHEMA_VERSION:
        raise MemoryCorrupt(
            f"{path} uses memory schema {version}, newer than this evokernel ({SCHEMA_VERSION}); upgrade evokernel"
        )
    while version < SCHEMA_VERSION:
        step = MIGRATIONS[version]
        items = [step(item) for item in items]
        version += 1
    return {**meta, "schema": version, "migrated_from": meta.get("schema", 1)}, items



JOURNAL_OPS = ("put", "remove", "credit")


def check_record(record: Any) -> str | None:
    """Why a parsed journal line is not a usable operation, or None when it is."""
    if not isinstance(record, dict):
        return "not an object"
    if not isinstance(record.get("seq"), int):
        return "no sequence number"
    op = record.get("op")
    if op not in JOURNAL_OPS:
        return f"unknown operation {op!r}"
    need = {"put": ("items",), "remove": ("ids",), "credit": ("ids", "stage", "reward", "alpha", "t")}[op]
    absent = [k for k in need if k not in record]
    if absent:
        return f"{op} without {', '.join(absent)}"
    if not isinstance(record.get("items", record.get("ids")), list):
        return f"{op} with a malformed list"
    baseline = record.get("baseline")  # credit rule "advantage": one number per id
    if baseline is not None and not (
        isinstance(baseline, list) and len(baseline) == len(record["ids"])
        and all(isinstance(b, (int, float)) and not isinstance(b, bool) and math.isfinite(b) for b in baseline)
    ):
        return f"{op} with a baseline that is not one finite number per id"
    return None




def items_from_rows(rows: Iterable[dict[str, Any]], path: Path) -> list[MemoryItem]:
    """Rows of the current schema as items; a row that cannot be read makes the whole file corrupt."""
    try:
        return [MemoryItem.from_dict(d) for d in rows]
    except (KeyError, TypeError, ValueError) as exc:
        raise MemoryCorrupt(f"{path} holds an item that cannot be read ({exc})") from None
