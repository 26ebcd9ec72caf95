"""Session events and the append-only log that makes a session durable.

Every state change of a session is an `Event`; the session folds the log to rebuild itself, so a
log that survives a crash is a session that survives a crash.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EVENT_KINDS = (
    "session_started",
    "stage_changed",
    "retrieved",
    "prompt",
    "model_reply",
    "model_error",
    "kernel",
    "gate",
    "verification",
    "reward",
    "q_update",
    "memory_added",
    "pending_refinement",
    "accepted",
    "rejected",
    "human_edit",
    "insight",
    "needs_human",
    "starter",
    "step_done",
    "budget_changed",
    "error",
)


@dataclass
class Event:
    """One thing that happened in a session; `step` is the session step it belongs to."""

    kind: str
    data: dict[str, Any] = field(default_factory=dict)
    step: int = 0
    ts: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "step": self.step, "ts": self.ts, "data": self.data}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Event:
        return cls(kind=d["kind"], data=dict(d.get("data", {})), step=int(d.get("step", 0)), ts=float(d.get("ts", 0.0)))


class EventLog:
    """`events.jsonl`: one JSON object per line, flushed and fsynced as each is written."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def append(self, event: Event) -> None:
        line = json.dumps(event.to_dict(), default=_jsonable, ensure_ascii=False)
        self._ensure_line_start()
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())

    def _ensure_line_start(self) -> None:
        """Drop a half-written last line left by a crash, so the next event starts on its own line."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        with open(self.path, "rb+") as f:
            f.seek(-1, os.SEEK_END)
            if f.read(1) == b"\n":
                return
            data = self.path.read_bytes()
            keep = data.rfind(b"\n") + 1
            f.truncate(keep)
            f.flush()
            os.fsync(f.fileno())

    def __iter__(self) -> Iterator[Event]:
        return iter(read_events(self.path))


def read_events(path: Path) -> list[Event]:
    """All complete events in a log; a truncated or garbled last line (a crash mid-write) is skipped."""
    path = Path(path)
    if not path.exists():
        return []
    events: list[Event] = []
    lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            events.append(Event.from_dict(json.loads(line)))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            if i >= len(lines) - 2:
                break
            raise ValueError(f"{path}: line {i + 1} is not a valid event; the log is damaged") from None
    return events


def _jsonable(obj: Any) -> Any:
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, set | tuple):
        return list(obj)
    return repr(obj)


def describe_event(ev: Event) -> str | None:
    """One human line for an event (progress displays, replay); None for events too fine to show."""
    d = ev.data
    k = ev.kind
    if k == "session_started":
        return f"session for {d.get('task')} on {d.get('backend')} with {d.get('model') or 'no model (manual)'}"
    if k == "stage_changed":
        return f"stage {d.get('from')} -> {d.get('to')}: {d.get('reason', '')}"
    if k == "retrieved":
        return f"retrieved {len(d.get('items', []))} memories for {d.get('stage')}"
    if k == "model_reply":
        cost = "unknown cost" if d.get("cost") is None else f"${d['cost']:.4f}"
        tokens = d.get("prompt_tokens", 0) + d.get("completion_tokens", 0)
        return f"model replied ({d.get('purpose')}): {tokens} tokens, {cost}, {d.get('seconds', 0):.1f} s"
    if k == "model_error":
        return f"model step failed ({d.get('reason')}): {d.get('message')}"
    if k == "starter":
        return "starter kernel written: it builds and copies its input; make it compute the task"
    if k == "kernel":
        return f"kernel v{d.get('version')} by {d.get('author')} ({d.get('stage')}) -> {d.get('file')}"
    if k == "verification":
        r = d.get("result", {})
        lat = f", {r['latency_ms']:.4f} ms" if r.get("latency_ms") is not None else ""
        sp = f", {r['speedup']:.2f}x" if r.get("speedup") else ""
        again = " (re-verified)" if d.get("reverify") else ""
        return f"v{d.get('version')}{again}: {r.get('outcome')}{lat}{sp}"
    if k == "reward":
        return f"reward {d.get('value'):+.3f} ({d.get('stage')}, {len(d.get('credited', []))} memories credited)"
    if k == "pending_refinement":
        gain = f" ({d['gain']:.2f}x faster than the best)" if d.get("gain") else ""
        return f"v{d.get('version')} is a pending refinement{gain}"
    if k in ("accepted", "rejected"):
        return f"v{d.get('version')} {k} by {d.get('by')}"
    if k == "human_edit":
        return f"person's edit v{d.get('version')} ({d.get('stage')})"
    if k == "insight":
        return f"insight skipped: {d['skipped']}" if "skipped" in d else f"insight stored: {d.get('title')}"
    if k in ("needs_human", "error"):
        return str(d.get("message"))
    if k == "budget_changed":
        return f"{d.get('add')} more {d.get('stage')} steps"
    return None
