"""Plain records that cross module borders: memory items, task signatures and value changes."""

from __future__ import annotations

import copy
import hashlib
import time
import uuid
from dataclasses import asdict, dataclass, field, fields
from typing import Any

KINDS = ("seed", "trajectory", "insight")
STAGES = ("draft", "refine")
AUTHORS = ("model", "person", "seed")

# Neutral starting values: both stages' rewards lie in [-1, 1] (see `values`), so 0 is "no evidence
# either way" for drafting and "no improvement" for refining; never optimistic.
INITIAL_Q1 = 0.0
INITIAL_Q2 = 0.0


def check_stage(stage: str) -> str:
    """Return `stage` or raise, so a typo never silently credits the wrong value."""
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; expected one of {', '.join(STAGES)}")
    return stage


def now() -> float:
    return round(time.time(), 3)


def new_id(kind: str) -> str:
    """A short unique id with the kind as prefix, readable in tables (`traj-3f9c1a2b7d`)."""
    prefix = {"seed": "seed", "trajectory": "traj", "insight": "ins"}.get(kind, "item")
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def device_class(device: Any) -> str:
    """The class of a device record: its "class" (e.g. "NVIDIA H100 80GB HBM3 (sm_90)", "cpu: AMD EPYC 7B13"),
    else its name; a plain string is its own class. Memory never finds a device itself: the caller passes it."""
    if isinstance(device, str):
        return device
    if isinstance(device, dict):
        return str(device.get("class") or device.get("name") or "")
    return ""


@dataclass
class TaskSignature:
    """What retrieval knows about a task: its name, op category, backend, shapes and a description."""

    task: str
    category: str = ""
    backend: str = "cpu"
    shapes: str = ""
    text: str = ""

    def query_text(self) -> str:
        """The lexical query built from every field, so names, shapes and words all count."""
        return " ".join(p for p in (self.task, self.category, self.backend, self.shapes, self.text) if p)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TaskSignature:
        return cls(
            task=d["task"],
            category=d.get("category", ""),
            backend=d.get("backend", "cpu"),
            shapes=d.get("shapes", ""),
            text=d.get("text", ""),
        )


@dataclass
class MemoryItem:
    """One memory: seed knowledge, one attempt (trajectory) or a distilled insight, with per-stage values."""

    id: str
    kind: str
    backends: list[str]
    category: str
    title: str
    text: str
    tags: list[str] = field(default_factory=list)
    q1: float = INITIAL_Q1
    q2: float = INITIAL_Q2
    visits1: int = 0
    visits2: int = 0
    created: float = field(default_factory=now)
    updated: float = field(default_factory=now)
    provenance: str = "seed"
    data: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown memory kind {self.kind!r}; expected one of {', '.join(KINDS)}")

    def q(self, stage: str) -> float:
        return self.q1 if check_stage(stage) == "draft" else self.q2

    def visits(self, stage: str) -> int:
        return self.visits1 if check_stage(stage) == "draft" else self.visits2

    def set_value(self, stage: str, q: float, visits: int, when: float) -> None:
        if check_stage(stage) == "draft":
            self.q1, self.visits1 = q, visits
        else:
            self.q2, self.visits2 = q, visits
        self.updated = when

    @property
    def learnt_on(self) -> str:
        """The device class this item was learnt on (`data["device"]["class"]`, passed in by the caller as
        data); "" for seeds and items written before devices were recorded."""
        return device_class(self.data.get("device"))

    def learnt_elsewhere(self, here: str) -> bool:
        """Whether this item was learnt on a device class other than `here` (unknown on either side: no)."""
        mine = self.learnt_on
        return bool(here and mine and mine != here)

    def device_values(self) -> dict[str, dict[str, float]]:
        """Its values per device class: {class: {"q1", "visits1", "q2", "visits2"}} (from device-tagged credits)."""
        return {k: dict(v) for k, v in (self.data.get("by_device") or {}).items()}

    def lexical_text(self) -> str:
        """Everything BM25 should see: title, text, tags, category and backends."""
        return " ".join([self.title, self.text, " ".join(self.tags), self.category, " ".join(self.backends)])

    def duplicate_key(self) -> tuple[str, str, str] | None:
        """Trajectories of one task, stage and outcome are near-duplicates of each other."""
        if self.kind != "trajectory":
            return None
        d = self.data
        return (str(d.get("task", "")), str(d.get("stage", "")), str(d.get("outcome", "")))

    def fingerprint(self) -> str:
        """Content identity (kind, title, text) used by import to avoid duplicates under other ids."""
        raw = "\x1f".join((self.kind, self.title.strip(), self.text.strip()))
        return hashlib.sha1(raw.encode()).hexdigest()[:16]

    def clone(self) -> MemoryItem:
        """An independent copy, several times faster than `copy.deepcopy` (strings are shared)."""
        item = object.__new__(MemoryItem)
        item.__dict__.update(self.__dict__)
        item.backends, item.tags = list(self.backends), list(self.tags)
        item.data = copy.deepcopy(self.data) if self.data else {}
        return item

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able copy; lists and `data` are copied so the record never aliases the item."""
        d = dict(self.__dict__)
        d["backends"], d["tags"], d["data"] = list(self.backends), list(self.tags), copy.deepcopy(self.data)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MemoryItem:
        if d.keys() == _FIELDS and d["kind"] in KINDS:
            # Fast path for records we wrote ourselves: a bank load builds 100,000 of these, and
            # skipping __init__ (defaults, __post_init__) halves the cost.
            item = object.__new__(cls)
            item.__dict__.update(d)
            return item
        return cls(
            id=str(d["id"]),
            kind=d["kind"],
            backends=list(d.get("backends", [])),
            category=d.get("category", ""),
            title=d.get("title", ""),
            text=d.get("text", ""),
            tags=list(d.get("tags", [])),
            q1=float(d.get("q1", INITIAL_Q1)),
            q2=float(d.get("q2", INITIAL_Q2)),
            visits1=int(d.get("visits1", 0)),
            visits2=int(d.get("visits2", 0)),
            created=float(d.get("created", 0.0)),
            updated=float(d.get("updated", 0.0)),
            provenance=d.get("provenance", "seed"),
            data=dict(d.get("data", {})),
        )


_FIELDS = frozenset(f.name for f in fields(MemoryItem))


@dataclass
class ValueChange:
    """One Monte-Carlo update of one item's value for one stage, for events and the app."""

    item_id: str
    stage: str
    old: float
    new: float
    visits: int
    #: the device class the reward was measured on ("" when the credit named none)
    device: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ValueChange:
        return cls(d["item_id"], d["stage"], float(d["old"]), float(d["new"]), int(d["visits"]),
                   str(d.get("device", "")))
