"""A one-line banner for the modes that change what the controls do: manual and replay."""

from __future__ import annotations

from textual.reactive import reactive
from textual.widgets import Static

MANUAL_TEXT = "Manual mode: no model configured (set --model, EVOKERNEL_MODEL or config.toml). Edit and verify work."
MANUAL_SHORT = "Manual mode: no model (--model, EVOKERNEL_MODEL, config.toml); ctrl+s verifies"  # fits 80 columns


def manual_text(width: int) -> str:
    """The manual-mode line that fits `width` columns (the short one at 80×24)."""
    return MANUAL_TEXT if width >= len(MANUAL_TEXT) or width <= 0 else MANUAL_SHORT


def replay_text(step: int, index: int, total: int) -> str:
    return f"Replay · step {step} ({index + 1} of {total}) · ←/→ move · home/end · j jump · no model calls"


class ModeBanner(Static):
    """Hidden unless the session is in manual or replay mode: set `manual`, or `replay` to (step, index, total)."""

    DEFAULT_CSS = """
    ModeBanner {
        height: 1;
        padding: 0 1;
        background: $warning 30%;
        color: $text;
        text-style: bold;
    }
    """

    manual: reactive[bool] = reactive(False, init=False)
    #: where replay stands in the timeline: (step, index, number of steps); None outside replay
    replay: reactive[tuple[int, int, int] | None] = reactive(None, init=False)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id)
        self.display = False

    def watch_manual(self, manual: bool) -> None:
        self.set_class(manual, "-manual")
        self.update(manual_text(self.content_size.width) if manual else "")
        self.display = manual

    def on_resize(self) -> None:
        if self.has_class("-manual"):
            self.update(manual_text(self.content_size.width))

    def watch_replay(self, position: tuple[int, int, int] | None) -> None:
        if position is None:
            return
        self.add_class("-replay")
        self.update(replay_text(*position))
        self.display = True
