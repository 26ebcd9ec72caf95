"""Reading sessions back: listings, replay, and re-verifying every recorded kernel."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.events import Event, read_events
from core.fsutil import one_line as _one_line
from core.session.folder import load_meta
from core.session.machine import Session
from core.session.models import _default_verify, fresh_config
from core.session.records import EventSink, ReverifyRow, SessionError, VerifyFn

if TYPE_CHECKING:
    from verifier import VerifyConfig


def list_sessions(root: Path) -> list[dict[str, object]]:
    """Summaries of every readable session under `root`, newest first; unreadable ones are marked."""
    rows: list[dict[str, Any]] = []
    if not Path(root).is_dir():
        return rows
    for d in sorted(Path(root).iterdir()):
        if not (d / "session.json").exists():
            continue
        try:
            rows.append(Session.open(d, lock=False).summary())
        except SessionError as exc:
            rows.append({"id": d.name, "path": str(d), "error": str(exc), "created": 0})
    rows.sort(key=lambda r: r.get("created") or 0, reverse=True)
    return rows


def replay(path: Path, on_event: EventSink | None = None, delay_s: float = 0.0) -> list[Event]:
    """Re-emit the recorded events in order (the app's replay mode); returns them."""
    load_meta(Path(path))
    try:
        events = read_events(Path(path) / "events.jsonl")
    except ValueError as exc:
        raise SessionError(str(exc)) from None
    for ev in events:
        if on_event is not None:
            on_event(ev)
        if delay_s:
            time.sleep(delay_s)
    return events


def reverify_all(path: Path, verify_fn: VerifyFn | None = None, verify_config: VerifyConfig | None = None,
                 on_row: Callable[[ReverifyRow], None] | None = None) -> list[ReverifyRow]:
    """Run the verifier again on every recorded kernel (read-only: nothing is appended to the session)."""
    session = Session.open(path, lock=False)
    verify_fn = verify_fn or _default_verify
    rows: list[ReverifyRow] = []
    for a in session.history:
        rec = a.result
        row = ReverifyRow(a.version, a.author, a.outcome, "", a.latency_ms, None, rec.device if rec else "")
        try:
            res = verify_fn(session.meta.task_source, a.source, backend=session.backend,
                            config=fresh_config(verify_config), on_gate=None)
            row.outcome, row.latency_ms, row.device = res.outcome, res.latency_ms, res.device
        except Exception as exc:
            row.outcome, row.error = "error", _one_line(exc)
        rows.append(row)
        if on_row is not None:
            on_row(row)
    return rows
