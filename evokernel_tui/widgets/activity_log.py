"""The activity pane: a log of steps, the model's output streaming in, and token/cost totals."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import RichLog, Static

from evokernel_tui.view import ActivityEntry

STREAM_TAIL = 400


def totals_line(stage: str, tokens: int, cost: float | None, manual: bool) -> str:
    """`stage draft · 1,234 tokens · $0.0123` (cost unknown shows as `cost n/a`; manual mode spends nothing)."""
    if manual:
        return f"stage {stage} · manual · no model calls"
    cost_text = "cost n/a" if cost is None else f"${cost:.4f}"
    return f"stage {stage} · {tokens:,} tokens · {cost_text}"


def entry_text(entry: ActivityEntry) -> Text:
    step = f"[{entry.step:>3}] " if entry.step is not None else "      "
    text = Text(step)  # not dim: on the light theme dim text is too faint to read
    text.append(entry.text, style="bold" if entry.kind in ("stage_changed", "needs_human", "error") else "")
    return text


class ActivityLog(Vertical):
    """Log lines come in as events arrive; the last line shows the model's reply as it streams (`streamed`),
    the border the session's totals (`totals`: stage, tokens, cost, manual)."""

    DEFAULT_CSS = """
    ActivityLog > #activity-stream {
        height: 1;
        color: $text-muted;
    }
    """

    #: the tail of the model's reply streaming in ("" between replies)
    streamed: reactive[str] = reactive("", init=False, repaint=False)
    totals: reactive[tuple[str, int, float | None, bool] | None] = reactive(None, init=False, repaint=False)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "Activity"
        self.lines: list[str] = []

    def compose(self) -> ComposeResult:
        yield RichLog(id="activity-log", wrap=True, markup=False, auto_scroll=True)
        yield Static("", id="activity-stream")

    def add(self, entry: ActivityEntry) -> None:
        self.lines.append(entry.text)
        self.query_one(RichLog).write(entry_text(entry))

    def note(self, text: str) -> None:
        """A line from the app itself (not a session event): what it picked up, what it refused."""
        self.add(ActivityEntry(step=None, kind="app", text=text))

    def replace(self, entries: list[ActivityEntry]) -> None:
        """Show exactly `entries` (replay moving through the timeline)."""
        self.lines = []
        self.query_one(RichLog).clear()
        for entry in entries:
            self.add(entry)

    def stream(self, chunk: str) -> None:
        self.streamed = (self.streamed + chunk)[-STREAM_TAIL:]

    def end_stream(self) -> None:
        self.streamed = ""

    def watch_streamed(self, streamed: str) -> None:
        last = streamed.rstrip().splitlines()[-1:] or [""]
        self.query_one("#activity-stream", Static).update(
            Text(f"model ▸ {last[0]}", no_wrap=True, overflow="ellipsis") if streamed else "")

    def watch_totals(self, totals: tuple[str, int, float | None, bool] | None) -> None:
        if totals is not None:
            self.border_subtitle = totals_line(*totals)
