"""The memory table: what was retrieved for this step, its values updating in place as rewards arrive."""

from __future__ import annotations

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable

from evokernel_tui.view import STAGE_COLUMN, MemoryView

COLUMNS = (("kind", "kind"), ("title", "title"), ("q1", "Q1"), ("q2", "Q2"), ("visits", "n"), ("sim", "sim"), ("score", "score"))
KIND_LABELS = {"seed": "seed", "insight": "ins", "trajectory": "traj"}

TITLE_WIDTH = 14  # at least; wider panes (and a maximised one, z) show more of each title
OTHER_COLUMNS_WIDTH = 46  # kind, Q1, Q2, n, sim, score and the cell padding


def q_cell(value: float | None, delta: float | None) -> str:
    """`0.52` or, right after a reward, `0.52▲.12` (compact: the pane is narrow); `–` when unknown."""
    if value is None:
        return "–"
    if delta is None or abs(delta) < 5e-3:
        return f"{value:.2f}"
    sign = "▲" if delta > 0 else "▼"
    magnitude = f"{abs(delta):.2f}".removeprefix("0")
    return f"{value:.2f}{sign}{magnitude}"


class MemoryTable(DataTable):
    """Rows keyed by memory id; the current stage's Q column is highlighted."""

    COMPONENT_CLASSES = DataTable.COMPONENT_CLASSES | {"memory--stage", "memory--up", "memory--down"}

    BINDINGS = [Binding("u", "toggle_used", "Used", tooltip="Mark the highlighted memory as used for your next edit")]

    class MemorySelected(Message):
        def __init__(self, memory: MemoryView) -> None:
            super().__init__()
            self.memory = memory

    class UsedToggled(Message):
        """The person marked (or unmarked) a memory as used for their next edit."""

        def __init__(self, memory: MemoryView) -> None:
            super().__init__()
            self.memory = memory

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.border_title = "Memories"
        self._rows: dict[str, MemoryView] = {}
        self._stage = "draft"
        self._shown_width = TITLE_WIDTH

    def on_mount(self) -> None:
        self._add_columns()

    def _add_columns(self) -> None:
        stage_key = STAGE_COLUMN.get(self._stage)
        for key, label in COLUMNS:
            marked = f"{label}◆" if key == stage_key else label
            self.add_column(Text(marked, style="bold" if key == stage_key else ""), key=key)

    def show(self, memories: list[MemoryView], stage: str) -> None:
        """Update values in place when the same memories are shown, else rebuild the rows."""
        if stage != self._stage:
            self._stage = stage
            self.clear(columns=True)
            self._add_columns()
            self._rows = {}
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
                for (key, _), cell in zip(COLUMNS, self._cells(memory), strict=True):
                    self.update_cell(memory.item_id, key, cell, update_width=True)
        self.border_subtitle = f"{len(memories)} for {stage}" if memories else "none retrieved yet"

    @property
    def title_width(self) -> int:
        return max(TITLE_WIDTH, self.size.width - OTHER_COLUMNS_WIDTH)

    def on_resize(self) -> None:
        if self._rows and self._shown_width != self.title_width:
            for memory in self._rows.values():
                self.update_cell(memory.item_id, "title", self._title(memory), update_width=True)
            self._shown_width = self.title_width

    def _title(self, m: MemoryView) -> Text:
        self._shown_width = self.title_width
        return Text(m.title[: self.title_width], no_wrap=True)

    def memory(self, item_id: str) -> MemoryView | None:
        return self._rows.get(item_id)

    def _cells(self, m: MemoryView) -> list[Text | str]:
        stage_key = STAGE_COLUMN.get(self._stage)
        visits = m.visits2 if self._stage == "refine" else m.visits1
        kind = KIND_LABELS.get(m.kind, m.kind)
        cells: list[Text | str] = [Text(f"✓{kind}", style="bold") if m.used else kind, self._title(m)]
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
