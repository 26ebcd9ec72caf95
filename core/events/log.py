"""`events.jsonl`: the append-only log a session writes (flushed and fsynced per event) and its reader."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from core.events.payloads import Event, Payload


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
    """All complete events in a log (a file, or a session folder holding `events.jsonl`).

    A truncated or garbled last line (a crash mid-write) is skipped; damage anywhere else is an error.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "events.jsonl"
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
    if isinstance(obj, Payload):
        return obj.to_data()
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, set | tuple):
        return list(obj)
    return repr(obj)
