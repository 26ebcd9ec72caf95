"""Versions: every kernel of the session in one table, with its outcome and timing and what became of it.

Enter shows a version's source and its diff against the best; x saves the best feasible kernel.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.cells import cell_len
from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Label

COLUMNS = ("v", "author", "stage", "outcome", "ms", "IQR ms", "runs", "speedup", "status")
#: what a narrow table gives up, in order, once the statuses are short: these two are in the title of the
#: version's own view (enter), so nothing is lost; the figures and the decision always stay whole
DROPPABLE = ("stage", "runs")
#: the table's cell padding (DataTable's default: one cell each side of every column)
CELL_PADDING = 1


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
    #: the paired measurement's interval stayed too wide to claim a speed (shown as ≈)
    noisy: bool = False
    #: the speedup's 95% interval (lo, hi): in the version's own view, where there is room for it
    interval: tuple[float, float] | None = None

    def cells(self, short: bool = False) -> tuple[str, ...]:
        """The row's cells in `COLUMNS` order; `short` writes the status with ✓/✗ (`best ✓ loop`)."""
        def ms(value: float | None) -> str:
            return f"{value:.4g}" if value is not None else "-"

        return (f"v{self.version}", self.author, self.stage, self.outcome, ms(self.median_ms), ms(self.spread_ms),
                str(self.runs) if self.runs else "-",
                f"{'≈' if self.noisy else ''}{self.speedup:.2f}×" if self.speedup else "-",
                short_status(self.status) if short else self.status)

    def heading(self) -> str:
        """The title of the version's own view: every column a narrow table may leave out is here."""
        runs = f" · {self.runs} runs" if self.runs else ""
        speed = ""
        if self.speedup:
            speed = f" · {'≈' if self.noisy else ''}{self.speedup:.2f}×"
            speed += f" [{self.interval[0]:.2f}–{self.interval[1]:.2f}]" if self.interval else ""
            speed += " noisy" if self.noisy else ""
        return f"v{self.version} · {self.author} · {self.stage} · {self.outcome}{runs}{speed}"


def short_status(status: str) -> str:
    """`best · accepted (loop)` → `best ✓ loop`, `rejected (person)` → `✗ person`: the decision in a few cells."""
    def mark(match: re.Match[str]) -> str:
        sign = "✓" if match.group(1) == "accepted" else "✗"
        return f"{sign} {match.group(2)}" if match.group(2) else sign

    return re.sub(r"(accepted|rejected)(?: \((\w+)\))?", mark, status.replace(" · ", " "))


@dataclass
class TableFit:
    """The columns and cells that fit a width, and the columns left out (shown by enter instead)."""

    columns: tuple[str, ...]
    cells: list[tuple[str, ...]]
    short: bool
    dropped: tuple[str, ...]


def fit_table(rows: list[VersionRow], width: int) -> TableFit:
    """The widest layout whose columns fit `width` cells whole: every column as written; then short
    statuses (✓/✗); then without `DROPPABLE`, one at a time. The last one when nothing fits."""
    layouts = [(False, ())] + [(True, DROPPABLE[:n]) for n in range(len(DROPPABLE) + 1)]
    fit = None
    for short, dropped in layouts:
        keep = [i for i, name in enumerate(COLUMNS) if name not in dropped]
        cells = [tuple(row.cells(short)[i] for i in keep) for row in rows]
        columns = tuple(COLUMNS[i] for i in keep)
        fit = TableFit(columns, cells, short, tuple(dropped))
        need = sum(max([cell_len(name)] + [cell_len(c[j]) for c in cells]) + 2 * CELL_PADDING
                   for j, name in enumerate(columns))
        if need <= width:
            return fit
    assert fit is not None
    return fit


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
            source=attempt.source, noisy=bool(result and result.noisy),
            interval=result.speedup_interval if result is not None and attempt.speedup else None))
    return rows


class VersionsScreen(ModalScreen[None]):
    """The versions table; escape or h closes it. Its columns fit the screen whole (`fit_table`): at 80
    columns the statuses are short and stage and runs move to the version's own view (enter)."""

    DEFAULT_CSS = """
    VersionsScreen .modal-title { width: 100%; }
    VersionsScreen #versions-table { scrollbar-size-vertical: 1; }
    """

    BINDINGS = [
        Binding("escape", "dismiss", "Close"),
        Binding("h", "dismiss", "Close", show=False),
        Binding("m", "mark", "Mark A"),
        Binding("p", "compare", "Compare with A"),
        Binding("x", "export_best", "Save best"),
    ]

    def __init__(self, rows: list[VersionRow], best_source: str | None,
                 compare: Callable[[str, str], dict] | None = None) -> None:
        """`compare(source_a, source_b)` re-times two kernels back to back (paired rounds on the same
        inputs) and returns B's speedup over A with its interval, or {"error": …}."""
        super().__init__()
        self.rows = rows
        self.best_source = best_source
        self._compare = compare
        self.marked: VersionRow | None = None
        self.comparison: dict | None = None
        self.fit: TableFit | None = None

    def _highlighted(self) -> VersionRow | None:
        table = self.query_one(DataTable)
        if not self.rows or table.cursor_row is None:
            return None
        return self.rows[min(table.cursor_row, len(self.rows) - 1)]

    def action_mark(self) -> None:
        self.marked = self._highlighted()
        if self.marked is not None:
            self.notify(f"v{self.marked.version} marked as A: move to another version and press p to compare.")

    def action_compare(self) -> None:
        b = self._highlighted()
        a = self.marked
        if self._compare is None:
            self.notify("Comparing needs a live session.", severity="warning")
            return
        if a is None or b is None or a.version == b.version:
            self.notify("Mark one version with m, move to another, then press p.", severity="warning")
            return
        self.query_one(".modal-title", Label).update(f"Re-timing v{a.version} and v{b.version} back to back…")
        self._run_compare(a, b)

    @work(thread=True, exclusive=True, group="compare", name="compare versions")
    def _run_compare(self, a: VersionRow, b: VersionRow) -> None:
        assert self._compare is not None
        try:
            result = self._compare(a.source, b.source)
        except Exception as exc:  # the verifier is foreign code: one line in the screen, never a crash
            result = {"error": f"{type(exc).__name__}: {exc}"}
        self.app.call_from_thread(self.show_comparison, a, b, result)

    def show_comparison(self, a: VersionRow, b: VersionRow, result: dict) -> None:
        self.comparison = result
        self.query_one(".modal-title", Label).update(comparison_text(a.version, b.version, result))

    def compose(self) -> ComposeResult:
        with Vertical(classes="modal"):
            yield Label(self._title(()), classes="modal-title")
            yield DataTable(id="versions-table", cursor_type="row", zebra_stripes=True, cell_padding=CELL_PADDING)

    def _title(self, dropped: tuple[str, ...]) -> str:
        shown = "source, diff vs best" + "".join(f", {name}" for name in dropped)
        return (f"Versions ({len(self.rows)}) · enter: {shown} · m then p: compare two · x: save the best · "
                "esc: close")

    def on_mount(self) -> None:
        # the first fill from the screen's width (the modal's CSS: 80%, at least 76, border and padding 4,
        # and a cell for the scrollbar); `on_resize` refits to the table's own width once it is laid out
        width = self.app.size.width
        self._fill(min(width, max(76, width * 4 // 5)) - 5)
        if self.rows:
            self.query_one(DataTable).move_cursor(row=len(self.rows) - 1)
        self.query_one(DataTable).focus()

    def on_resize(self, event: events.Resize) -> None:
        self.call_after_refresh(self._refit)

    def _refit(self) -> None:
        table = self.query_one(DataTable)
        if table.content_region.width:
            self._fill(table.content_region.width - table.styles.scrollbar_size_vertical)

    def _fill(self, width: int) -> None:
        """The columns that fit `width` whole (`fit_table`); the table is rebuilt only when that changes."""
        fit = fit_table(self.rows, width)
        if fit == self.fit:
            return
        self.fit = fit
        table = self.query_one(DataTable)
        cursor = table.cursor_row
        table.clear(columns=True)
        table.add_columns(*fit.columns)
        for row, cells in zip(self.rows, fit.cells, strict=True):
            table.add_row(*cells, key=str(row.version))
        if self.rows and cursor:
            table.move_cursor(row=min(cursor, len(self.rows) - 1))
        title = self.query_one(".modal-title", Label)
        if self.comparison is None:
            title.update(self._title(fit.dropped))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        from evokernel_tui.screens.detail import TextModal
        from evokernel_tui.widgets.kernel_pane import unified_diff

        row = next(r for r in self.rows if str(r.version) == event.row_key.value)
        body = row.source
        if self.best_source is not None and row.source != self.best_source:
            body += "\n\n── diff against the best ──\n" + unified_diff(self.best_source, row.source, "best", f"v{row.version}")
        self.app.push_screen(TextModal(row.heading(), body))

    def action_export_best(self) -> None:
        self.dismiss(None)
        self.app.action_export()  # type: ignore[attr-defined]  # EvoKernelApp's: this screen opens only there

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)


def comparison_text(a: int, b: int, result: dict) -> str:
    """`v4 vs v2 (paired re-timing): v4 is 1.28× as fast (95% 1.21–1.34); 1.25 → 0.98 ms`."""
    if result.get("error"):
        return f"v{b} vs v{a}: no comparison: {result['error']}"
    speedup, lo, hi = result.get("speedup"), result.get("lo"), result.get("hi")
    text = f"v{b} vs v{a} (paired re-timing): v{b} is {speedup:.2f}× as fast" if speedup else f"v{b} vs v{a}:"
    if lo is not None and hi is not None:
        text += f" (95% {lo:.2f}–{hi:.2f})"
    if result.get("a_ms") is not None and result.get("b_ms") is not None:
        text += f"; {result['a_ms']:.4g} → {result['b_ms']:.4g} ms"
    if result.get("noisy"):
        text += "; noisy: the interval stayed wide"
    return text


def compare_in_session(session: Any) -> Callable[[str, str], dict] | None:
    """Paired re-timing of two of `session`'s kernels with its task, backend and settings."""
    meta = getattr(session, "meta", None) or {}
    reference = (meta.get("task") or {}).get("source")
    if not reference:
        return None

    def compare(source_a: str, source_b: str) -> dict:
        from core.verdicts import compare as paired

        return paired(reference, source_a, source_b, backend=session.backend,
                      config=getattr(session, "verify_config", None))

    return compare


def session_events(session: Any) -> list[dict[str, Any]]:
    from evokernel_tui.view import read_events

    path = getattr(session, "path", None)
    return read_events(Path(path)) if path else []
