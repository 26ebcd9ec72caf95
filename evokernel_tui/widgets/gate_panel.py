"""The gate panel: one coloured light per verifier gate, with a spinner while a gate runs."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from rich.text import Text
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from core.verdicts import library_line
from evokernel_tui.view import GateView

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
_KERNEL_CPP_LINE = re.compile(r"\bkernel\.cpp:(\d+):")


def cpp_line_label(text: str) -> str:
    """`kernel.cpp:12: error` → `C++ line 12: error`. The verifier's diagnostics number the lines of the
    C++ source the kernel passes to load_inline (the compiled kernel.cpp has one more line on top, the
    shim's #include, so its raw log says 13); the C++ view (c) numbers lines the same way."""
    return _KERNEL_CPP_LINE.sub(r"C++ line \1:", text)


def gates_title(degenerate: list[str] | None, note: str = "") -> str:
    """`Gates`; `Gates · ⚠ degenerate: zeros pass` when a trivial answer passes the task; `Gates · cached,
    measured 4 min ago` when the verdict shown came from the cache (`note`: the verdict's timing label)."""
    parts = ["Gates"]
    if degenerate:
        from core.verdicts import describe_degenerate

        parts.append(f"⚠ {describe_degenerate(degenerate)}")
    if note:
        parts.append(note)
    return " · ".join(parts)


STATE_LABELS = {"waiting": "waiting", "running": "running", "checking": "checking", "pass": "pass", "fail": "FAIL",
                "skip": "skipped"}


def gate_line(gate: GateView, frame: int = 0, width: int = 60, blocked: bool = False,
              elapsed: float | None = None) -> Text:
    """`● Compile    pass   1.23s`; a failed gate's reason follows on its own indented lines, wrapped
    inside the row (the option list wraps the prompt to the pane's width). The light's style is left
    to the caller. `blocked`: nothing will run (a task check failed), so a waiting gate says `not run`.
    `elapsed`: seconds a running gate has run, shown before its progress (`⠋ Correctness 12s trial 3/8`),
    where a long progress text cut at 80 columns cannot take it away."""
    light = SPINNER[frame % len(SPINNER)] if gate.state == "running" else "●"
    seconds = f"{gate.seconds:6.2f}s" if gate.seconds is not None and gate.state in ("pass", "fail") else "       "
    if gate.state == "running" and elapsed is not None:
        seconds = f"{elapsed:6.0f}s"
    label = "not run" if blocked and gate.state == "waiting" else STATE_LABELS.get(gate.state, gate.state)
    line = f"{light} {gate.title:<12} {label:<8}{seconds}"
    if gate.state == "running" and gate.progress:  # `⠋ Correctness  trial 3/8`: where its work is, not just that it runs
        clock = f"{elapsed:.0f}s " if elapsed is not None else ""
        line = f"{light} {gate.title:<12} {clock}{gate.progress}"
    text = Text(line, no_wrap=True, overflow="ellipsis")
    reason = cpp_line_label(gate.reason).strip() if gate.state == "fail" else ""
    if gate.state == "pass" and gate.detail.get("reported"):
        reason = library_line(gate.detail) or gate.reason
    probes = gate.detail.get("probes") if gate.state == "pass" else None
    if isinstance(probes, list) and any(isinstance(r, dict) and r.get("status") != "pass" for r in probes):
        from core.verdicts import (
            probe_summary as summary,  # a probe skipped or refused is worth a line; all passing is not
        )

        reason = "probes: " + summary([r for r in probes if isinstance(r, dict)])
    if reason:
        first = reason.splitlines()[0]
        room = max(width - 4, 16) * 3  # at most three wrapped lines; Enter shows everything
        if len(first) > room:
            first = first[: room - 1] + "…"
        text.append("\n  " + first)
        text.no_wrap = False
    return text


class GatePanel(OptionList):
    """Gate lines in verifier order; selecting one asks for its full detail.

    Set `gates` (rebuilt in place so the highlight stays where it was, repainted on every assignment),
    `degenerate` (the trivial answers that pass this task: the title warns, since the correctness gate then
    judges answers relative to the output's spread) and `note` (the verdict's timing label, in the title).
    """

    DEFAULT_CSS = """
    GatePanel > .gate--waiting { color: $text-muted; }
    GatePanel > .gate--running { color: $warning; text-style: bold; }
    GatePanel > .gate--checking { color: $warning; text-style: italic; }
    GatePanel > .gate--pass { color: $success; }
    GatePanel > .gate--fail { color: $error; text-style: bold; }
    GatePanel > .gate--skip { color: $text-disabled; }
    """

    COMPONENT_CLASSES = {"gate--waiting", "gate--running", "gate--checking", "gate--pass", "gate--fail", "gate--skip"}

    gates: reactive[list[GateView]] = reactive(list, always_update=True, init=False, repaint=False)
    degenerate: reactive[list[str] | None] = reactive(None, always_update=True, init=False, repaint=False)
    note: reactive[str] = reactive("", always_update=True, init=False, repaint=False)
    #: why no gate will run ("" while they may): waiting gates then say `not run`, the subtitle says why
    blocked: reactive[str] = reactive("", init=False, repaint=False)

    @dataclass
    class GateSelected(Message):
        gate: GateView

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "Gates"
        self._frame = 0
        #: when each running gate started running (monotonic), for its elapsed seconds
        self._since: dict[str, float] = {}

    def on_mount(self) -> None:
        self._spinner = self.set_interval(0.1, self._tick, pause=True)

    def validate_gates(self, gates: list[GateView]) -> list[GateView]:
        return [GateView(g.name, g.state, g.seconds, g.reason, dict(g.detail), g.progress) for g in gates]

    def watch_degenerate(self) -> None:
        self.border_title = gates_title(self.degenerate, self.note)

    def watch_note(self) -> None:
        self.border_title = gates_title(self.degenerate, self.note)

    def watch_blocked(self) -> None:
        self._repaint()
        self._subtitle()

    def watch_gates(self, gates: list[GateView]) -> None:
        now = time.monotonic()
        self._since = {g.name: self._since.get(g.name, now) for g in gates if g.state == "running"}
        names = [g.name for g in gates]
        known = [str(self.get_option_at_index(i).id) for i in range(self.option_count)]
        if names != known:
            self.clear_options()
            self.add_options(Option(self._prompt(g), id=g.name) for g in gates)
            if gates and self.highlighted is None:
                self.highlighted = 0
        else:
            self._repaint()
        running = any(g.state == "running" for g in gates)
        if running:
            self._spinner.resume()
        else:
            self._spinner.pause()
        self._subtitle()

    def _subtitle(self) -> None:
        failed = [g.title for g in self.gates if g.state == "fail"]
        self.border_subtitle = f"failed: {', '.join(failed)}" if failed else self.blocked

    def gate(self, name: str) -> GateView | None:
        return next((g for g in self.gates if g.name == name), None)

    def _prompt(self, gate: GateView) -> Text:
        since = self._since.get(gate.name)
        text = gate_line(gate, self._frame, max(self.size.width - 2, 40), blocked=bool(self.blocked),
                         elapsed=time.monotonic() - since if since is not None else None)
        text.stylize(self.get_component_rich_style(f"gate--{gate.state}", partial=True), 0, 1)
        return text

    def _repaint(self) -> None:
        for gate in self.gates:
            self.replace_option_prompt(gate.name, self._prompt(gate))

    def _tick(self) -> None:
        self._frame += 1
        self._repaint()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        gate = self.gate(str(event.option.id))
        if gate is not None:
            self.post_message(self.GateSelected(gate))
