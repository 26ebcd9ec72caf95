"""Replay a recorded session: the same panes, moved through the timeline one step at a time."""

from __future__ import annotations

from typing import Any

from textual.binding import Binding

from evokernel_tui.screens.main import SessionScreen
from evokernel_tui.screens.prompts import NumberPrompt
from evokernel_tui.view import timeline, view_at
from evokernel_tui.widgets.activity_log import ActivityLog
from evokernel_tui.widgets.kernel_pane import KernelPane
from evokernel_tui.widgets.mode_banner import ModeBanner


class ReplayScreen(SessionScreen):
    """Reads recorded events only; nothing here can reach a model or the verifier."""

    BINDINGS = [
        Binding("left", "move(-1)", "Back", priority=True),
        Binding("right", "move(1)", "Forward", priority=True),
        Binding("home", "go_to(0)", "First", show=False, priority=True),
        Binding("end", "go_to(-1)", "Last", show=False, priority=True),
        Binding("j", "jump", "Jump to step"),
    ]

    def __init__(self, events: list[Any]) -> None:
        super().__init__()
        self._events = events
        self.steps = timeline(events)
        self.index = 0

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one(KernelPane).editor.read_only = True
        self.action_go_to(0)

    @property
    def step(self) -> int:
        return self.steps[self.index]

    def action_move(self, delta: int) -> None:
        self.action_go_to(max(0, min(len(self.steps) - 1, self.index + delta)))

    def action_go_to(self, index: int) -> None:
        self.index = index % len(self.steps)
        view = view_at(self._events, self.step)
        self.show(view)
        self.query_one(ActivityLog).replace(view.activity)
        self.query_one(ModeBanner).replay = (self.step, self.index, len(self.steps))

    def action_jump(self) -> None:
        def go(step: int | None) -> None:
            if step is not None:
                self.action_go_to(max(i for i, s in enumerate(self.steps) if s <= step) if step >= self.steps[0] else 0)

        self.app.push_screen(NumberPrompt("Jump to step", self.step, self.steps[0], self.steps[-1]), go)
