"""Modals with the full text behind one line: a gate's detail, a memory's text."""

from __future__ import annotations

import json
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from evokernel_tui.view import GateView, MemoryView
from evokernel_tui.widgets.gate_panel import cpp_line_label


def gate_detail_text(gate: GateView) -> str:
    """Compiler diagnostics, the mismatch report, or the hack rule and line, then any other detail."""
    seconds = f" in {gate.seconds:.2f}s" if gate.seconds is not None else ""
    lines = [f"{gate.title}: {gate.state}{seconds}"]
    if gate.reason:
        lines += ["", cpp_line_label(gate.reason)]
    detail = dict(gate.detail)
    diagnostics = detail.pop("diagnostics", None)
    if diagnostics:
        lines += ["", "Compiler diagnostics (C++ line N = line N of your C++ source; c shows it numbered):"]
        lines += [f"  {cpp_line_label(d)}" for d in diagnostics]
    log = detail.pop("log", None)
    if log:
        lines += ["", "Compiler log (kernel.cpp as compiled: line 1 is the shim's #include, so its line "
                  "numbers are one more than the C++ line):", str(log)[-4000:]]
    if "rule" in detail or "line" in detail:
        lines += ["", f"Rule: {detail.pop('rule', '?')}", f"Line: {detail.pop('line', '?')}"]
    detail.pop("top_ops", None)  # shown as a table (gate_detail_body)
    detail.pop("reference_top_ops", None)
    mismatch = detail.pop("mismatch", None)
    if mismatch:
        lines += ["", "Mismatch:", str(mismatch)]
    for key in ("max_abs", "max_rel"):
        if key in detail:
            lines.append(f"{key}: {_value(detail.pop(key))}")
    if len(lines) == 1 and not detail and not gate.detail.get("top_ops"):
        lines += ["", "No detail recorded for this gate yet."]
    return "\n".join(lines)


#: what `gate_detail_text` shows itself; the rest of a gate's detail goes in the detail table
_SHOWN_AS_TEXT = ("diagnostics", "log", "rule", "line", "top_ops", "reference_top_ops", "mismatch", "max_abs", "max_rel")


def detail_rows(detail: Any, prefix: str = "") -> list[tuple[str, str]]:
    """A gate's remaining detail as (key, value) rows: nested records flattened to `a.b`, lists of
    numbers on one line, floats at 4 significant figures, yes/no for flags (never raw JSON)."""
    rows: list[tuple[str, str]] = []
    for key, value in detail.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            rows += detail_rows(value, f"{name}.") if value else [(name, "—")]
        elif isinstance(value, list | tuple) and any(isinstance(v, dict) for v in value):
            for i, item in enumerate(value):
                rows += detail_rows(item, f"{name}[{i}].") if isinstance(item, dict) else [(f"{name}[{i}]", _value(item))]
        elif isinstance(value, list | tuple):
            rows.append((name, ", ".join(_value(v) for v in value) or "—"))
        else:
            rows.append((name, _value(value)))
    return rows


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    if value is None:
        return "—"
    return _short(value)


def memory_detail_text(memory: MemoryView) -> str:
    header = (
        f"{memory.kind} · {memory.item_id}\n"
        f"Q1 {_q(memory.q1)} ({memory.visits1} visits) · Q2 {_q(memory.q2)} ({memory.visits2} visits) · "
        f"similarity {memory.similarity:.3f} · score {memory.score:.3f}"
    )
    return f"{header}\n\n{memory.text or '(no text)'}"


def _q(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.3f}"


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) < 2000 else text[:2000] + "…"


class TextModal(ModalScreen[None]):
    """A scrollable block of text with a title; escape or q closes it."""

    BINDINGS = [Binding("escape", "dismiss", "Close"), Binding("q", "dismiss", "Close", show=False)]

    def __init__(self, title: str, body: Any) -> None:
        super().__init__()
        self._title, self._body = title, body

    def compose(self) -> ComposeResult:
        with Vertical(classes="modal"):
            yield Label(self._title, classes="modal-title")
            with VerticalScroll():
                yield Static(self._body, markup=False, classes="modal-body")

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)


def gate_detail_body(gate: GateView) -> Any:
    """The modal's body: the text above, and for the profile gate the candidate's and the reference's
    top ops as sorted tables with each op's share of the self time."""
    text = gate_detail_text(gate)
    top, ref = gate.detail.get("top_ops"), gate.detail.get("reference_top_ops")
    rest = {k: v for k, v in gate.detail.items() if k not in _SHOWN_AS_TEXT}
    if not top and not ref and not rest:
        return text
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from evokernel_tui.commands.render import profile_table

    parts: list[Any] = [Text(text), Text("")]
    if rest:
        table = Table(box=None, show_header=False, padding=(0, 2, 0, 0), title="Detail", title_justify="left")
        table.add_column("key", style="bold", no_wrap=True)
        table.add_column("value", overflow="fold")
        for key, value in detail_rows(rest):
            table.add_row(key, Text(value))
        parts += [table, Text("")]
    if top:
        parts += [profile_table(top, "Your kernel: top ops by self time"), Text("")]
    if ref:
        parts.append(profile_table(ref, "Reference (eager PyTorch): top ops by self time"))
    return Group(*parts)


class GateDetailScreen(TextModal):
    def __init__(self, gate: GateView) -> None:
        super().__init__(f"Gate · {gate.title}", gate_detail_body(gate))


class MemoryDetailScreen(TextModal):
    def __init__(self, memory: MemoryView) -> None:
        super().__init__(f"Memory · {memory.title}", memory_detail_text(memory))
