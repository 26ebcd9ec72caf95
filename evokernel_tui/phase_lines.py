"""The phase line of long work on the command line (`verify`, `bench`): what runs now and for how long.

On a terminal it is one live line (a spinner, the phase, its elapsed time) drawn under whatever else is
live; anywhere else (a pipe, a CI log) each new phase is one plain line with the seconds since the start,
so a log shows where the time went and nothing draws spinners into it. The words come from
`core.events` (`gate_phase`, `phase_text`), the same ones `draft`'s bar and the app use.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.spinner import Spinner
from rich.table import Table

from core.events import gate_phase


class PhaseLine:
    """`say(text)` starts a phase; `on_gate` is a verifier watcher (`(gate, state[, progress])`) that says
    each gate's work and its progress. `live=False`: plain lines on `console`, each phase once; `silent`:
    nothing printed (`--json`), the phase only kept for the line an interrupt prints."""

    def __init__(self, console: Console, live: bool, prefix: str = "", silent: bool = False):
        self.console, self.live, self.prefix, self.silent = console, live, prefix, silent
        self.text = ""
        self.started = self.since = time.monotonic()
        self._spinner = Spinner("dots", style="yellow")

    def say(self, text: str) -> None:
        if not text or text == self.text:
            return
        self.text, self.since = text, time.monotonic()
        if not self.live and not self.silent:
            self.console.print(f"{self.prefix}{text} [{self.since - self.started:.1f}s]", markup=False,
                               highlight=False, soft_wrap=True)

    def where(self) -> str:
        """`compile: building the kernel, 12 s in`: what ran when the command was stopped."""
        return f"{self.text or 'starting'}, {time.monotonic() - self.started:.0f} s in"

    def on_gate(self, name: str, state: str, progress: Any = None) -> None:
        phase = gate_phase(name, state, getattr(progress, "text", "") if progress is not None else "")
        if phase:
            self.say(phase)

    def __rich__(self) -> RenderableType:
        """The live line: spinner, phase, seconds in it (read when drawn, so the clock moves on its own)."""
        grid = Table.grid(padding=(0, 1))
        grid.add_row(self._spinner, f"{self.prefix}{self.text or 'starting'}", f"[dim]{time.monotonic() - self.since:.0f}s[/]")
        return grid


class TaskPhases:
    """`bench`: the phase each running task is in (`asking the model for a draft`, `verifying v2: correctness:
    trial 3/8`), from its session's events (`core.events.phase_text`). On a terminal, one live line per
    running task; elsewhere a plain line per phase change, without the per-trial and per-round ticks
    (a bench of many tasks would fill a log with them; the phases still say where each task is)."""

    def __init__(self, console: Console, live: bool):
        self.console, self.live = console, live
        self.lines: dict[str, PhaseLine] = {}
        self._lock = threading.Lock()

    def on_event(self, task: str, event: Any) -> None:
        from core.events import phase_text

        if not self.live and getattr(event, "kind", "") == "gate_progress":
            return
        text = phase_text(event)
        if not text:
            return
        with self._lock:
            line = self.lines.setdefault(task, PhaseLine(self.console, self.live, prefix=f"  {task}: "))
        line.say(text)

    def finished(self, task: str) -> None:
        with self._lock:
            self.lines.pop(task, None)

    def __rich__(self) -> RenderableType:
        with self._lock:
            lines = list(self.lines.values())
        return Group(*lines)
