"""Small one-question modals: how many steps, which step, where to save."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label


def parse_count(text: str, low: int, high: int) -> int | None:
    """An int in [low, high] from the person's text, or None when it is not one."""
    try:
        value = int(text.strip())
    except ValueError:
        return None
    return value if low <= value <= high else None


class NumberPrompt(ModalScreen[int | None]):
    """Ask for a whole number in a range; enter confirms, escape cancels."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, question: str, default: int, low: int, high: int) -> None:
        super().__init__()
        self._question, self._default, self._low, self._high = question, default, low, high

    def compose(self) -> ComposeResult:
        with Vertical(classes="modal prompt"):
            yield Label(f"{self._question} ({self._low}–{self._high})", classes="modal-title")
            yield Input(str(self._default), id="prompt-input", type="integer")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        value = parse_count(event.value, self._low, self._high)
        if value is None:
            self.notify(f"Type a whole number from {self._low} to {self._high}.", severity="error")
            return
        self.dismiss(value)

    def action_cancel(self) -> None:
        self.dismiss(None)


class PathPrompt(ModalScreen[str | None]):
    """Ask for a file path, prefilled."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, question: str, default: str) -> None:
        super().__init__()
        self._question, self._default = question, default

    def compose(self) -> ComposeResult:
        with Vertical(classes="modal prompt"):
            yield Label(self._question, classes="modal-title")
            yield Input(self._default, id="prompt-input")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if not event.value.strip():
            self.notify("Type a path to save to.", severity="error")
            return
        self.dismiss(event.value.strip())

    def action_cancel(self) -> None:
        self.dismiss(None)


class ConfirmPrompt(ModalScreen[bool]):
    """A yes/no question: y or enter confirms, n or escape declines."""

    BINDINGS = [
        Binding("y", "answer(True)", "Yes"),
        Binding("enter", "answer(True)", "Yes", show=False),
        Binding("n", "answer(False)", "No"),
        Binding("escape", "answer(False)", "No", show=False),
    ]

    def __init__(self, question: str) -> None:
        super().__init__()
        self._question = question

    def compose(self) -> ComposeResult:
        with Vertical(classes="modal prompt"):
            yield Label(self._question, classes="modal-title")
            yield Label("y: yes · n: no", classes="modal-body")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
