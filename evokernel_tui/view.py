"""What the panes show, folded from session events.

Live mode and replay mode build the screen from the same fold over the same `Event` records, so a
replay shows exactly what the live session showed. Event payloads are read tolerantly (missing keys
fall back to defaults) because a recorded session outlives the code that wrote it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from verifier.result import GATE_ORDER, GATE_TITLES

GATE_STATES = ("waiting", "running", "pass", "fail", "skip")
STAGE_COLUMN = {"draft": "q1", "refine": "q2"}


@dataclass
class GateView:
    """One gate line: state, time taken, reason on failure and the full detail for the modal."""

    name: str
    state: str = "waiting"
    seconds: float | None = None
    reason: str = ""
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def title(self) -> str:
        return GATE_TITLES.get(self.name, self.name)


@dataclass
class MemoryView:
    """One retrieved memory row; `delta1`/`delta2` hold the last change of Q1/Q2 from a reward.

    Q values are None when unknown (recordings made before `retrieved` events carried item values).
    """

    item_id: str
    kind: str = ""
    title: str = ""
    text: str = ""
    q1: float | None = None
    q2: float | None = None
    visits1: int = 0
    visits2: int = 0
    similarity: float = 0.0
    score: float = 0.0
    delta1: float | None = None
    delta2: float | None = None


@dataclass
class LatencyPoint:
    step: int
    latency_ms: float
    feasible: bool


@dataclass
class ActivityEntry:
    step: int | None
    kind: str
    text: str


@dataclass
class SessionView:
    """Everything on screen at one moment of a session."""

    task: str = ""
    backend: str = ""
    stage: str = "draft"
    manual: bool = False
    model: str = ""
    source: str = ""
    previous: str = ""
    pending: str | None = None
    author: str = ""
    gates: dict[str, GateView] = field(default_factory=lambda: {g: GateView(g) for g in GATE_ORDER})
    memories: list[MemoryView] = field(default_factory=list)
    points: list[LatencyPoint] = field(default_factory=list)
    reference_ms: float | None = None
    compiled_ms: float | None = None
    activity: list[ActivityEntry] = field(default_factory=list)
    streaming: str = ""
    tokens: int = 0
    cost_known: float = 0.0
    cost_unknown: bool = False
    step: int = 0
    versions: dict[int, str] = field(default_factory=dict)
    best_version: int | None = None

    @property
    def best_source(self) -> str | None:
        return self.versions.get(self.best_version) if self.best_version is not None else None

    @property
    def cost(self) -> float | None:
        return None if self.cost_unknown else self.cost_known

    @property
    def best_ms(self) -> float | None:
        feasible = [p.latency_ms for p in self.points if p.feasible]
        return min(feasible) if feasible else None

    @property
    def speedup(self) -> float | None:
        best = self.best_ms
        if best and self.reference_ms:
            return self.reference_ms / best
        return None

    def gate_list(self) -> list[GateView]:
        return [self.gates[name] for name in GATE_ORDER if name in self.gates]


def event_parts(event: Any) -> tuple[str, dict[str, Any], int | None]:
    """(kind, data, step) of an `Event` or of its `to_dict()` form."""
    if isinstance(event, Mapping):
        return str(event.get("kind", "")), dict(event.get("data") or {}), event.get("step")
    return str(getattr(event, "kind", "")), dict(getattr(event, "data", None) or {}), getattr(event, "step", None)


def as_dict(record: Any) -> dict[str, Any]:
    """A plain dict from a record that may be a dict, a dataclass or have `to_dict()`."""
    if record is None:
        return {}
    if isinstance(record, Mapping):
        return dict(record)
    if hasattr(record, "to_dict"):
        return dict(record.to_dict())
    if dataclasses.is_dataclass(record):
        return dataclasses.asdict(record)
    return dict(vars(record))


def source_of(record: Any) -> str | None:
    """The kernel source carried by a str, a dict with `source`, or an object with `.source`."""
    if record is None:
        return None
    if isinstance(record, str):
        return record
    value = record.get("source") if isinstance(record, Mapping) else getattr(record, "source", None)
    return value if isinstance(value, str) else None


def memory_row(retrieved: Any) -> MemoryView:
    """A table row from a `Retrieved` (object or dict with an `item`) or a flat item dict."""
    r = as_dict(retrieved)
    item = as_dict(r.get("item")) if "item" in r else r
    return MemoryView(
        item_id=str(item.get("id", item.get("item_id", ""))),
        kind=str(item.get("kind", "")),
        title=str(item.get("title", "")),
        text=str(item.get("text", "")),
        q1=_maybe_float(item.get("q1")),
        q2=_maybe_float(item.get("q2")),
        visits1=int(item.get("visits1", 0) or 0),
        visits2=int(item.get("visits2", 0) or 0),
        similarity=float(r.get("similarity", 0.0) or 0.0),
        score=float(r.get("score", 0.0) or 0.0),
    )


def _maybe_float(value: Any) -> float | None:
    return None if value is None else float(value)


def apply_value_change(view: SessionView, change: Any) -> MemoryView | None:
    """Update the row a `ValueChange` names in place; returns that row, or None if it is not on screen."""
    c = as_dict(change)
    row = next((m for m in view.memories if m.item_id == str(c.get("item_id"))), None)
    if row is None:
        return None
    new, old = float(c.get("new", 0.0)), float(c.get("old", 0.0))
    visits = c.get("visits")
    if c.get("stage", "draft") == "refine":
        row.q2, row.delta2 = new, new - old
        row.visits2 = int(visits) if visits is not None else row.visits2 + 1
    else:
        row.q1, row.delta1 = new, new - old
        row.visits1 = int(visits) if visits is not None else row.visits1 + 1
    return row


def apply_verification(view: SessionView, result: Mapping[str, Any], step: int | None) -> str:
    """Set every gate from a verification record and add its latency point; returns a summary line."""
    for gate in result.get("gates", []):
        name = gate.get("name", "")
        view.gates[name] = GateView(
            name=name,
            state=gate.get("status", "waiting"),
            seconds=gate.get("seconds"),
            reason=gate.get("reason", ""),
            detail=dict(gate.get("detail") or {}),
        )
    view.reference_ms = result.get("reference_ms") or view.reference_ms
    view.compiled_ms = result.get("compiled_ms") or view.compiled_ms
    latency = result.get("latency_ms")
    feasible = bool(result.get("feasible", False))
    if latency is not None:
        view.points.append(LatencyPoint(step=step if step is not None else len(view.points), latency_ms=float(latency), feasible=feasible))
    outcome = result.get("outcome") or ("feasible" if feasible else "failed")
    if latency is not None:
        speed = result.get("speedup")
        extra = f", {speed:.2f}× vs eager" if speed else ""
        return f"verified: {outcome}, {float(latency):.4f} ms{extra}"
    failed = next((g for g in result.get("gates", []) if g.get("status") == "fail"), None)
    if failed:
        return f"verified: {outcome} at {GATE_TITLES.get(failed['name'], failed['name'])}: {failed.get('reason', '')}"
    return f"verified: {outcome}"


def _set_source(view: SessionView, source: str | None, author: str) -> None:
    if source is None or source == view.source:
        return
    view.previous, view.source = view.source, source
    view.author = author


def _reset_gates(view: SessionView) -> None:
    view.gates = {g: GateView(g) for g in GATE_ORDER}


def apply_event(view: SessionView, event: Any) -> ActivityEntry | None:
    """Fold one event into `view`; returns the activity line it adds (also appended), if any."""
    kind, data, step = event_parts(event)
    if step is not None:
        view.step = max(view.step, int(step))
    text = _fold(view, kind, data, step)
    if text is None:
        return None
    entry = ActivityEntry(step=step, kind=kind, text=text)
    view.activity.append(entry)
    return entry


def _version_source(view: SessionView, data: Mapping[str, Any]) -> str | None:
    version = data.get("version")
    return view.versions.get(int(version)) if version is not None else source_of(data)


def _fold(view: SessionView, kind: str, data: dict[str, Any], step: int | None) -> str | None:
    """The per-kind update; returns the activity text (None for events that only change panes)."""
    if kind == "session_started":
        view.task = str(data.get("task", view.task))
        view.backend = str(data.get("backend", view.backend))
        view.manual = bool(data.get("manual", view.manual))
        view.model = str(data.get("model") or "")
        who = "manual mode" if view.manual else f"model {view.model}"
        return f"session started: {view.task} on {view.backend} ({who})"
    if kind == "stage_changed":
        view.stage = str(data.get("to", data.get("stage", view.stage)))
        reason = data.get("reason")
        return f"stage → {view.stage}" + (f" ({reason})" if reason else "")
    if kind == "retrieved":
        view.memories = [memory_row(r) for r in data.get("items", [])]
        return f"retrieved {len(view.memories)} memories for {data.get('stage', view.stage)}"
    if kind == "prompt":
        view.streaming = ""
        return f"prompt sent for {data.get('stage', view.stage)}"
    if kind == "model_reply":
        view.streaming = ""
        _add_usage(view, data)
        tokens = int(data.get("prompt_tokens", 0) or 0) + int(data.get("completion_tokens", 0) or 0)
        purpose = data.get("purpose", "kernel")
        return f"model replied ({purpose}, {tokens:,} tokens)"
    if kind == "model_error":
        view.streaming = ""
        return f"model error: {data.get('message', data.get('reason', ''))}"
    if kind == "starter":
        _set_source(view, source_of(data), "starter")
        return "starter kernel: it builds and copies its input; edit it to compute the task (ctrl+s submits)"
    if kind == "kernel":
        _reset_gates(view)
        source = source_of(data)
        if source is not None and data.get("version") is not None:
            view.versions[int(data["version"])] = source
        _set_source(view, source, str(data.get("author", "model")))
        version = f" v{data['version']}" if data.get("version") is not None else ""
        return f"kernel{version} from {data.get('author', 'model')}"
    if kind == "gate":
        name = str(data.get("name", ""))
        status = str(data.get("status", "running"))
        if name == "anti_hacking" and status == "running":
            _reset_gates(view)
        view.gates.setdefault(name, GateView(name)).state = status if status in GATE_STATES else "waiting"
        return None
    if kind == "verification":
        result = data.get("result", data)
        text = apply_verification(view, result, None if data.get("reverify") else step)
        if any("cached verdict" in note for note in (result.get("notes") or []) if isinstance(note, str)):
            text += " (cached verdict: same source, task and settings; press v to measure again)"
        return ("re" + text) if data.get("reverify") else text
    if kind == "reward":
        value = data.get("value", data.get("reward"))
        return f"reward {float(value):+.2f} ({data.get('stage', view.stage)})" if value is not None else None
    if kind == "q_update":
        changes = data.get("changes", [])
        for change in changes:
            apply_value_change(view, change)
        return f"updated {len(changes)} memory value{'s' if len(changes) != 1 else ''}" if changes else None
    if kind == "memory_added":
        return f"memory added: {data.get('title', data.get('id', ''))}"
    if kind == "pending_refinement":
        view.pending = _version_source(view, data)
        gain = data.get("gain")
        extra = f" ({gain:.2f}× faster)" if gain else ""
        return f"refinement pending{extra}: accept (a) or reject (r)"
    if kind == "accepted":
        source = _version_source(view, data)
        if data.get("version") is not None:
            view.best_version = int(data["version"])
        _set_source(view, source, view.author)
        if view.pending is not None and view.pending == source:
            view.pending = None
        return f"accepted v{data.get('version', '?')} ({data.get('reason', data.get('by', ''))})"
    if kind == "rejected":
        view.pending = None
        if view.best_version is not None:
            _set_source(view, view.versions.get(view.best_version), view.author)
        return f"rejected v{data.get('version', '?')}"
    if kind == "human_edit":
        view.author = "person"
        credited = data.get("credited") or []
        return f"person's edit recorded; credits {len(credited)} memor{'y' if len(credited) == 1 else 'ies'}"
    if kind == "step_done":
        seconds = data.get("seconds")
        took = f" in {float(seconds):.1f}s" if seconds is not None else ""
        return f"step done: {data.get('outcome', '')}{took}"
    if kind == "insight":
        if data.get("skipped"):
            return f"no insight: {data['skipped']}"
        return f"insight saved: {data.get('title', '')}"
    if kind == "needs_human":
        return f"needs you: {data.get('message', '')}"
    if kind == "budget_changed":
        return f"{data.get('add', '?')} more {data.get('stage', '')} steps"
    if kind == "error":
        where = data.get("where")
        return f"error{f' in {where}' if where else ''}: {data.get('message', '')}"
    return kind.replace("_", " ") if kind else None


def _add_usage(view: SessionView, data: Mapping[str, Any]) -> None:
    """Token and cost totals the way the session counts them (an unknown price makes the cost unknown)."""
    view.tokens += int(data.get("prompt_tokens", 0) or 0) + int(data.get("completion_tokens", 0) or 0)
    if data.get("cost") is None:
        view.cost_unknown = True
    else:
        view.cost_known += float(data["cost"])


def fold(events: Iterable[Any], view: SessionView | None = None) -> SessionView:
    """A fresh view after applying `events` in order."""
    view = view or SessionView()
    for event in events:
        apply_event(view, event)
    return view


def timeline(events: list[Any]) -> list[int]:
    """The distinct step numbers of a recording, in order: the positions replay moves through."""
    steps: list[int] = []
    for event in events:
        step = event_parts(event)[2]
        if step is not None and (not steps or int(step) > steps[-1]):
            steps.append(int(step))
    return steps or [0]


def view_at(events: list[Any], step: int) -> SessionView:
    """The screen as it stood once every event of `step` (and earlier) had arrived."""
    return fold(e for e in events if (event_parts(e)[2] or 0) <= step)
