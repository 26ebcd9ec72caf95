"""A one-line banner for the modes that change what the controls do: manual and replay."""

from __future__ import annotations

from textual.widgets import Static

MANUAL_TEXT = "Manual mode: no model configured (set --model, EVOKERNEL_MODEL or config.toml). Edit and verify work."


def replay_text(step: int, index: int, total: int) -> str:
    return f"Replay · step {step} ({index + 1} of {total}) · ←/→ move · home/end · j jump · no model calls"


class ModeBanner(Static):
    """Hidden unless the session is in manual or replay mode."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id)
        self.display = False

    def show_manual(self, manual: bool) -> None:
        self.set_class(manual, "-manual")
        self.update(MANUAL_TEXT if manual else "")
        self.display = manual

    def show_replay(self, step: int, index: int, total: int) -> None:
        self.add_class("-replay")
        self.update(replay_text(step, index, total))
        self.display = True

    def show_message(self, text: str) -> None:
        self.update(text)
        self.display = bool(text)
