"""A one-line banner for the modes that change what the controls do: manual and replay."""

from __future__ import annotations

from textual.widgets import Static

MANUAL_TEXT = "Manual mode: no model configured (set --model, EVOKERNEL_MODEL or config.toml). Edit and verify work."
MANUAL_SHORT = "Manual mode: no model (--model, EVOKERNEL_MODEL, config.toml); ctrl+s verifies"  # fits 80 columns


def manual_text(width: int) -> str:
    """The manual-mode line that fits `width` columns (the short one at 80×24)."""
    return MANUAL_TEXT if width >= len(MANUAL_TEXT) or width <= 0 else MANUAL_SHORT


def replay_text(step: int, index: int, total: int) -> str:
    return f"Replay · step {step} ({index + 1} of {total}) · ←/→ move · home/end · j jump · no model calls"


class ModeBanner(Static):
    """Hidden unless the session is in manual or replay mode."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id)
        self.display = False

    def show_manual(self, manual: bool) -> None:
        self.set_class(manual, "-manual")
        self.update(manual_text(self.content_size.width) if manual else "")
        self.display = manual

    def on_resize(self) -> None:
        if self.has_class("-manual"):
            self.update(manual_text(self.content_size.width))

    def show_replay(self, step: int, index: int, total: int) -> None:
        self.add_class("-replay")
        self.update(replay_text(step, index, total))
        self.display = True

    def show_message(self, text: str) -> None:
        self.update(text)
        self.display = bool(text)
