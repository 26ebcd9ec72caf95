"""Pick a task to open: a built-in by name, or a path to a KernelBench-style file."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList
from textual.widgets.option_list import Option


class TaskPickerScreen(ModalScreen[str | None]):
    """Returns the chosen task name or path; the app turns it into a session (in a worker)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, tasks: list[tuple[str, str]]) -> None:
        super().__init__()
        self._tasks = tasks

    def compose(self) -> ComposeResult:
        with Vertical(classes="modal picker"):
            yield Label("Open a task: pick one, or type a name or a path and press enter", classes="modal-title")
            yield Input(placeholder="task name or path to a .py task file", id="task-input")
            yield OptionList(*(Option(f"{name:<24} {desc}", id=name) for name, desc in self._tasks), id="task-list")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.value.strip():
            self.dismiss(event.value.strip())

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(str(event.option.id))

    def action_cancel(self) -> None:
        self.dismiss(None)
