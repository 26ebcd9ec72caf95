"""The memory table: what was retrieved for this step, its values updating in place as rewards arrive."""

from __future__ import annotations

from dataclasses import dataclass

from rich.cells import cell_len
from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import DataTable

from evokernel_tui.view import STAGE_COLUMN, MemoryView

COLUMNS = (("kind", "kind"), ("title", "title"), ("q1", "Q1"), ("q2", "Q2"), ("visits", "n"), ("sim", "sim"), ("score", "score"))
NARROW_COLUMNS = COLUMNS[:5]  # a narrow pane (80×24) drops sim and score (Enter shows them) to give titles room
KIND_LABELS = {"seed": "seed", "insight": "ins", "trajectory": "traj"}

TITLE_WIDTH = 14  # at least; the title takes whatever the pane has left once the other columns fit
WIDE_TITLE = 20  # the fewest title characters worth showing sim and score beside
# each other column's usual width with one cell of padding each side ("seed", "0.52", "3", "0.81", "-0.12");
# once the table is on screen the columns' real widths are used (a Q cell with a change is wider)
COLUMN_WIDTHS = {"kind": 6, "q1": 6, "q2": 6, "visits": 3, "sim": 6, "score": 7}
SCROLLBAR = 2


def q_cell(value: float | None, delta: float | None) -> str:
    """`0.52` or, right after a reward, `0.52▲.12` (compact: the pane is narrow); `–` when unknown."""
    if value is None:
        return "–"
    if delta is None or abs(delta) < 5e-3:
        return f"{value:.2f}"
    sign = "▲" if delta > 0 else "▼"
    magnitude = f"{abs(delta):.2f}".removeprefix("0")
    return f"{value:.2f}{sign}{magnitude}"


def columns_for(width: int) -> tuple[tuple[str, str], ...]:
    """Every column when the pane fits them and a readable title; kind, title, Q1, Q2 and n when it does not."""
    return COLUMNS if title_width(width, COLUMNS) >= WIDE_TITLE else NARROW_COLUMNS


def title_width(width: int, columns: tuple[tuple[str, str], ...] = COLUMNS,
                widths: dict[str, int] | None = None) -> int:
    """The characters of each title a pane `width` wide can show beside the other columns (`widths`, or
    their usual widths), less the title cell's own padding; at least 14."""
    widths = widths or COLUMN_WIDTHS
    others = sum(widths.get(key, COLUMN_WIDTHS[key]) for key, _ in columns if key != "title")
    return max(TITLE_WIDTH, width - others - 2)


class MemoryTable(DataTable):
    """Rows keyed by memory id; the current stage's Q column is highlighted.

    Set `stage` (the columns are rebuilt when it changes) and `memories` (values updated in place when the
    same memories are shown, else the rows are rebuilt; every assignment refits the titles).
    """

    DEFAULT_CSS = """
    MemoryTable > .memory--stage { color: $accent; text-style: bold; }
    MemoryTable > .memory--up { color: $success; }
    MemoryTable > .memory--down { color: $error; }
    """

    COMPONENT_CLASSES = DataTable.COMPONENT_CLASSES | {"memory--stage", "memory--up", "memory--down"}

    BINDINGS = [Binding("u", "toggle_used", "Used", tooltip="Mark the highlighted memory as used for your next edit")]

    stage: reactive[str] = reactive("draft", init=False, repaint=False)
    memories: reactive[list[MemoryView]] = reactive(list, always_update=True, init=False, repaint=False)

    @dataclass
    class MemorySelected(Message):
        memory: MemoryView

    @dataclass
    class UsedToggled(Message):
        """The person marked (or unmarked) a memory as used for their next edit."""

        memory: MemoryView

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.border_title = "Memories"
        self._rows: dict[str, MemoryView] = {}
        self._shown_width = TITLE_WIDTH
        self._columns: tuple[tuple[str, str], ...] = COLUMNS

    def on_mount(self) -> None:
        self._add_columns()

    def _add_columns(self, columns: tuple[tuple[str, str], ...] | None = None) -> None:
        stage_key = STAGE_COLUMN.get(self.stage)
        self._columns = columns or columns_for(self.size.width)
        for key, label in self._columns:
            marked = f"{label}◆" if key == stage_key else label
            self.add_column(Text(marked, style="bold" if key == stage_key else ""), key=key)

    def watch_stage(self) -> None:
        self.clear(columns=True)
        self._add_columns()
        self._rows = {}

    def watch_memories(self, memories: list[MemoryView]) -> None:
        ids = [m.item_id for m in memories]
        if ids != list(self._rows):
            self.clear()
            self._rows = {}
            for memory in memories:
                self._rows[memory.item_id] = memory
                self.add_row(*self._cells(memory), key=memory.item_id)
        else:
            for memory in memories:
                self._rows[memory.item_id] = memory
                for (key, _), cell in zip(self._columns, self._cells(memory), strict=True):
                    self.update_cell(memory.item_id, key, cell, update_width=True)
        self.border_subtitle = f"{len(memories)} for {self.stage}" if memories else "none retrieved yet"
        self._refit()

    def _rebuild(self, columns: tuple[tuple[str, str], ...]) -> None:
        """The same rows under another set of columns (the pane got narrower or wider)."""
        rows = list(self._rows.values())
        self.clear(columns=True)
        self._add_columns(columns)
        self._rows = {}
        self.memories = rows

    @property
    def title_width(self) -> int:
        return self._room(self._columns)

    def _room(self, columns: tuple[tuple[str, str], ...]) -> int:
        """What the title column can show beside `columns`' widest cells (and a scrollbar)."""
        keys = [key for key, _ in COLUMNS if key != "title"]  # the order of `_value_cells`
        stage_key = STAGE_COLUMN.get(self.stage)
        widths = {key: cell_len(label) + (key == stage_key) for key, label in columns if key != "title"}  # ◆
        for memory in self._rows.values():
            for key, cell in zip(keys, self._value_cells(memory), strict=True):
                if key in widths:
                    widths[key] = max(widths[key], cell_len(str(cell)))
        padded = {key: width + 2 * self.cell_padding for key, width in widths.items()}
        return title_width(self.size.width - SCROLLBAR, columns, padded)

    def on_resize(self) -> None:
        self._refit()

    def _refit(self) -> None:
        """Show as much of each title as the pane has room for now; drop sim and score when with them a
        title would get fewer than 20 characters (and bring them back when there is room)."""
        columns = COLUMNS if self._room(COLUMNS) >= WIDE_TITLE else NARROW_COLUMNS
        if columns != self._columns and self.size.width:
            self._rebuild(columns)
            return
        if self._rows and self._shown_width != self.title_width:
            for memory in self._rows.values():
                self.update_cell(memory.item_id, "title", self._title(memory), update_width=True)
            self._shown_width = self.title_width

    def _title(self, m: MemoryView) -> Text:
        self._shown_width = self.title_width
        width = self.title_width
        return Text(m.title if len(m.title) <= width else m.title[: width - 1] + "…", no_wrap=True)

    def memory(self, item_id: str) -> MemoryView | None:
        return self._rows.get(item_id)

    def _cells(self, m: MemoryView) -> list[Text | str]:
        kind, *values = self._value_cells(m)
        return [kind, self._title(m), *values][: len(self._columns)]

    def _value_cells(self, m: MemoryView) -> list[Text | str]:
        """Every cell but the title: kind, Q1, Q2, n, sim, score."""
        stage_key = STAGE_COLUMN.get(self.stage)
        visits = m.visits2 if self.stage == "refine" else m.visits1
        kind = KIND_LABELS.get(m.kind, m.kind)
        cells: list[Text | str] = [Text(f"✓{kind}", style="bold") if m.used else kind]
        for key, value, delta in (("q1", m.q1, m.delta1), ("q2", m.q2, m.delta2)):
            text = Text(q_cell(value, delta))
            if key == stage_key:
                text.stylize(self.get_component_rich_style("memory--stage", partial=True))
            if delta is not None and abs(delta) >= 5e-3:
                text.stylize(self.get_component_rich_style("memory--up" if delta > 0 else "memory--down", partial=True), 4)
            cells.append(text)
        cells += [str(visits), f"{m.similarity:.2f}", f"{m.score:.2f}"]
        return cells

    def action_toggle_used(self) -> None:
        if not self._rows or self.cursor_row < 0:
            return
        key = list(self._rows)[min(self.cursor_row, len(self._rows) - 1)]
        self.post_message(self.UsedToggled(self._rows[key]))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        memory = self._rows.get(str(event.row_key.value))
        if memory is not None:
            self.post_message(self.MemorySelected(memory))
