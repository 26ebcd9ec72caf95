"""Versions: every kernel of the session in one table, with its outcome and timing and what became of it.

Enter shows a version's source and its diff against the best; x saves the best feasible kernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Label

COLUMNS = ("v", "author", "stage", "outcome", "ms", "IQR ms", "runs", "speedup", "status")


@dataclass
class VersionRow:
    version: int
    author: str
    stage: str
    outcome: str
    median_ms: float | None
    spread_ms: float | None
    runs: int | None
    speedup: float | None
    status: str
    source: str

    def cells(self) -> tuple[str, ...]:
        def ms(value: float | None) -> str:
            return f"{value:.4g}" if value is not None else "-"

        return (f"v{self.version}", self.author, self.stage, self.outcome, ms(self.median_ms), ms(self.spread_ms),
                str(self.runs) if self.runs else "-", f"{self.speedup:.2f}×" if self.speedup else "-", self.status)


def decisions(events: list[dict[str, Any]]) -> dict[int, str]:
    """version → "accepted" / "rejected" (by whom) from the recorded events; the last decision wins."""
    from evokernel_tui.view import event_parts

    out: dict[int, str] = {}
    for event in events:
        kind, data, _ = event_parts(event)
        if kind in ("accepted", "rejected") and data.get("version") is not None:
            by = data.get("by")
            out[int(data["version"])] = kind + (f" ({by})" if by else "")
    return out


def version_rows(session: Any, events: list[dict[str, Any]]) -> list[VersionRow]:
    """One row per recorded kernel version of `session`, oldest first."""
    decided = decisions(events)
    best = getattr(getattr(session, "best", None), "version", None)
    pending = getattr(getattr(session, "pending", None), "version", None)
    rows = []
    for attempt in getattr(session, "history", None) or []:
        result = attempt.result
        latency = next((g for g in (result.gates if result else []) if g.name == "latency"), None)
        detail = dict(latency.detail) if latency is not None else {}
        spread = detail.get("cand_iqr_ms", detail.get("iqr_ms"))
        status = decided.get(attempt.version, "")
        if attempt.version == best:
            status = "best" + (f" · {status}" if status else "")
        elif attempt.version == pending:
            status = "pending"
        rows.append(VersionRow(
            version=attempt.version, author=attempt.author, stage=attempt.stage, outcome=attempt.outcome,
            median_ms=attempt.latency_ms, spread_ms=float(spread) if spread is not None else None,
            runs=int(detail["runs"]) if detail.get("runs") else None, speedup=attempt.speedup, status=status,
            source=attempt.source))
    return rows


class VersionsScreen(ModalScreen[None]):
    """The versions table; escape or h closes it."""

    BINDINGS = [
        Binding("escape", "dismiss", "Close"),
        Binding("h", "dismiss", "Close", show=False),
        Binding("x", "export_best", "Save best"),
    ]

    def __init__(self, rows: list[VersionRow], best_source: str | None) -> None:
        super().__init__()
        self.rows = rows
        self.best_source = best_source

    def compose(self) -> ComposeResult:
        with Vertical(classes="modal"):
            yield Label(f"Versions ({len(self.rows)}) · enter: source and diff vs best · x: save the best · esc: close",
                        classes="modal-title")
            yield DataTable(id="versions-table", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns(*COLUMNS)
        for row in self.rows:
            table.add_row(*row.cells(), key=str(row.version))
        if self.rows:
            table.move_cursor(row=len(self.rows) - 1)
        table.focus()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        from evokernel_tui.screens.detail import TextModal
        from evokernel_tui.widgets.kernel_pane import unified_diff

        row = next(r for r in self.rows if str(r.version) == event.row_key.value)
        body = row.source
        if self.best_source is not None and row.source != self.best_source:
            body += "\n\n── diff against the best ──\n" + unified_diff(self.best_source, row.source, "best", f"v{row.version}")
        self.app.push_screen(TextModal(f"v{row.version} · {row.author} · {row.outcome}", body))

    def action_export_best(self) -> None:
        self.dismiss(None)
        self.app.action_export()

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)


def session_events(session: Any) -> list[dict[str, Any]]:
    from evokernel_tui.app import read_events

    path = getattr(session, "path", None)
    return read_events(Path(path)) if path else []
