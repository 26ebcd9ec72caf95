"""What the panes show, folded from session events.

The session's state (stage, kernels, best, pending, current source, tokens and cost) comes from
`core.events.apply`, the one fold the session itself and the command line use, kept in
`SessionView.state`; this module adds only what is particular to the screen (gate lights, memory
rows with their last Q change, latency points, activity lines). Live mode and replay mode build the
screen from the same fold over the same `Event` records, so a replay shows exactly what the live
session showed. Payloads are read through the typed records of `core.events`, tolerantly, because
a recorded session outlives the code that wrote it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.events import (
    Accepted,
    BudgetChanged,
    ErrorEvent,
    GateEvent,
    GateProgress,
    HumanEdit,
    Insight,
    Kernel,
    MemoryAdded,
    MemoryMarked,
    ModelErrorEvent,
    ModelReply,
    NeedsHuman,
    PendingRefinement,
    Prompt,
    QUpdate,
    Rejected,
    Retrieved,
    Reward,
    SessionStarted,
    SessionState,
    StageChanged,
    Starter,
    StepDone,
    StepResumed,
    UnknownPayload,
    Verification,
    as_event,
    speed_text,
)
from core.events import apply as apply_state
from core.verdicts import GATE_ORDER, GATE_TITLES, VerificationResult

# "checking": the candidate reported the gate's phase done, the trusted verdict is not in yet (app.py)
GATE_STATES = ("waiting", "running", "checking", "pass", "fail", "skip")
STAGE_COLUMN = {"draft": "q1", "refine": "q2"}


@dataclass
class GateView:
    """One gate line: state, time taken, reason on failure and the full detail for the modal."""

    name: str
    state: str = "waiting"
    seconds: float | None = None
    reason: str = ""
    detail: dict[str, Any] = field(default_factory=dict)
    #: while running: where its work is ("trial 3/8", "timing round 4 (3 kept)"), from `GateProgress`
    progress: str = ""

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
    used: bool = False  # marked by the person as used for their next edit (only those are credited)


@dataclass
class LatencyPoint:
    step: int
    latency_ms: float
    feasible: bool
    reference_ms: float | None = None  # the eager time this measurement was compared with


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
    #: trivial answers that pass the task at its tolerance ("zeros", "a constant", ...): [] for a sound task
    degenerate: list[str] = field(default_factory=list)
    #: "cached, measured N min ago" (and/or "noisy") of the verdict the gates show; "" for a fresh one
    verdict_note: str = ""
    #: while a verification runs, the latest progress of its running gate ("v2 correctness: trial 3/8") for the
    #: Gates title; "" otherwise
    progress_note: str = ""
    #: the task checks after the first paint: "checking the task (probe)…", a problem they found, or ""
    task_note: str = ""
    #: why no gate will run (a task check failed): the gate lines say so instead of "waiting"
    blocked: str = ""
    #: the session as `core.events.apply` folds it; the fields above that it covers are copied from it
    state: SessionState = field(default_factory=SessionState)

    @property
    def best_source(self) -> str | None:
        return self.versions.get(self.best_version) if self.best_version is not None else None

    @property
    def cost(self) -> float | None:
        return None if self.cost_unknown else self.cost_known

    @property
    def best_ms(self) -> float | None:
        """The accepted best kernel's latency (the fold's best), not the fastest of every feasible try."""
        best = self.state.best
        return best.latency_ms if best is not None else None

    @property
    def speedup(self) -> float | None:
        """The accepted best kernel against eager, from its own paired measurement: the one definition
        of "best ×" that `sessions`, replay and bench use too."""
        best = self.state.best
        return best.speedup if best is not None else None

    @property
    def speed_text(self) -> str:
        """The header's "best ×" as every surface writes it: `≈1.84× (noisy)` when the accepted best's paired
        interval stayed wide, `1.84× (cached, measured 4 min ago)` for a cached verdict (`core.events.speed_text`)."""
        return speed_text(self.state.best)

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
        # is_dataclass also admits a dataclass class, which asdict refuses (TypeError), as it always has here
        return dataclasses.asdict(record)  # type: ignore[arg-type]
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


def apply_verification(view: SessionView, result: Mapping[str, Any], step: int | None, at: float | None = None) -> str:
    """Set every gate from a verification record and add its latency point; returns a summary line, whose
    speedup is marked the way the header marks it (≈ and "noisy"; "cached, measured N min ago", counted
    from `at`, the time the verdict was recorded)."""
    view.progress_note = ""
    for gate in result.get("gates", []):
        name = gate.get("name", "")
        view.gates[name] = GateView(
            name=name,
            state=gate.get("status", "waiting"),
            seconds=gate.get("seconds"),
            reason=gate.get("reason", ""),
            detail=dict(gate.get("detail") or {}),
        )
    view.degenerate = list(result.get("degenerate") or view.degenerate)
    view.verdict_note = _timing_note(result, at)
    view.reference_ms = result.get("reference_ms") or view.reference_ms
    view.compiled_ms = result.get("compiled_ms") or view.compiled_ms
    latency = result.get("latency_ms")
    feasible = bool(result.get("feasible", False))
    if latency is not None:
        view.points.append(LatencyPoint(step=step if step is not None else len(view.points), latency_ms=float(latency),
                                        feasible=feasible, reference_ms=result.get("reference_ms")))
    outcome = result.get("outcome") or ("feasible" if feasible else "failed")
    if latency is not None:
        speed = result.get("speedup")
        note = _timing_note(result, at)
        noisy = bool((result.get("timing") or {}).get("noisy"))
        extra = f", {'≈' if noisy else ''}{speed:.2f}× vs eager" if speed else ""
        sol = _bandwidth_note(result)
        return (f"verified: {outcome}, {float(latency):.4f} ms{extra}" + (f" ({note})" if note else "")
                + (f", {sol}" if sol else ""))
    failed = next((g for g in result.get("gates", []) if g.get("status") == "fail"), None)
    if failed:
        return f"verified: {outcome} at {GATE_TITLES.get(failed['name'], failed['name'])}: {failed.get('reason', '')}"
    return f"verified: {outcome}"


def apply_starter_verdict(view: SessionView, result: Any) -> str:
    """Show the starter's verdict from the background prebuild in the gates (no latency point, nothing
    recorded: it is not a version); returns its activity line."""
    record = result.to_dict() if hasattr(result, "to_dict") else dict(result or {})
    points = list(view.points)
    line = apply_verification(view, record, None)
    view.points = points
    view.verdict_note = " · ".join(part for part in ("starter's verdict, not recorded", view.verdict_note) if part)
    return "starter " + line


def _bandwidth_note(result: Mapping[str, Any]) -> str:
    """`86% of memory bandwidth` (speed of light: how far the kernel is from the machine's measured peak),
    "" without a fraction or for a noisy verdict."""
    try:
        return VerificationResult.from_dict({"backend": "", **dict(result)}).bandwidth_text()
    except (KeyError, TypeError, ValueError):
        return ""


def _timing_note(result: Mapping[str, Any], at: float | None) -> str:
    """`noisy`, `cached, measured N min ago`, `unisolated` of a stored verification record ("" if unreadable)."""
    try:
        return VerificationResult.from_dict(dict(result)).timing_label(now=at or None)
    except (KeyError, TypeError, ValueError):
        return ""


def _set_source(view: SessionView, source: str | None, author: str) -> None:
    if source is None:
        return
    if source == view.source:  # the same text recorded (the starter as written): only its author changes
        view.author = author
        return
    view.previous, view.source = view.source, source
    view.author = author


def _reset_gates(view: SessionView) -> None:
    view.gates = {g: GateView(g) for g in GATE_ORDER}
    view.verdict_note = ""
    view.progress_note = ""


def gate_phase_note(version: int | None, gate: str, status: str, text: str = "") -> str:
    """`v2 correctness: trial 3/8`: the Gates title's words for a running gate (`core.events.gate_phase`, the
    same as `verify`'s and `bench`'s phase lines), "" once it is not running."""
    from core.events import gate_phase

    phase = gate_phase(gate, status, text)
    if not phase:
        return ""
    return f"v{version} {phase}" if version is not None else phase


def apply_event(view: SessionView, event: Any) -> ActivityEntry | None:
    """Fold one event into `view`; returns the activity line it adds (also appended), if any."""
    ev = as_event(event)
    step = ev.step if _has_step(event) else None
    view.state = apply_state(view.state, ev)
    if step is not None:
        view.step = max(view.step, int(step))
    payload = ev.payload
    text = _fold(view, payload, step, ev.ts)
    if isinstance(payload, UnknownPayload):  # a kind this version does not know: name it, change nothing
        text = ev.kind.replace("_", " ") or None
    _copy_state(view, payload)
    if text is None:
        return None
    entry = ActivityEntry(step=step, kind=ev.kind, text=text)
    view.activity.append(entry)
    return entry


def _has_step(event: Any) -> bool:
    step = event.get("step") if isinstance(event, Mapping) else getattr(event, "step", None)
    return step is not None


def _copy_state(view: SessionView, payload: Any) -> None:
    """The fields the one fold decides, copied from `view.state`."""
    st = view.state
    if isinstance(payload, SessionStarted):
        view.task, view.backend = st.task or view.task, st.backend or view.backend
        view.manual, view.model = st.manual, str(st.model or "")
    view.stage = st.stage
    view.tokens, view.cost_known, view.cost_unknown = st.tokens, st.cost_known, st.cost_unknown
    if len(view.versions) != len(st.history):  # kernels are only ever appended
        view.versions = {a.version: a.source for a in st.history}
    view.best_version = st.best_version
    marked = dict(st.marked or {})
    for memory in view.memories:
        memory.used = bool(marked.get(memory.item_id))
    pending = st.pending
    view.pending = pending.source if pending is not None else None
    author = view.author
    if isinstance(payload, Starter):
        author = "starter"
    elif isinstance(payload, Kernel):
        author = payload.author
    _set_source(view, st.current_source or None, author)


def _fold(view: SessionView, p: Any, step: int | None, ts: float | None = None) -> str | None:
    """The screen-only update of one payload; returns the activity text (None for events that only change panes)."""
    if isinstance(p, SessionStarted):
        who = "manual mode" if p.manual else f"model {p.model or ''}"
        return f"session started: {p.task or view.task} on {p.backend or view.backend} ({who})"
    if isinstance(p, StageChanged):
        to = p.to or view.stage
        return f"stage → {to}" + (f" ({p.reason})" if p.reason else "")
    if isinstance(p, Retrieved):
        view.memories = [memory_row(i) for i in p.items]
        return f"retrieved {len(view.memories)} memories for {p.stage or view.stage}"
    if isinstance(p, Prompt):
        view.streaming = ""
        return f"prompt sent for {p.stage or view.stage}"
    if isinstance(p, ModelReply):
        view.streaming = ""
        return f"model replied ({p.purpose or 'kernel'}, {p.tokens:,} tokens)"
    if isinstance(p, ModelErrorEvent):
        view.streaming = ""
        return f"model error: {p.message or p.reason}"
    if isinstance(p, Starter):
        return "starter kernel: it builds and copies its input; edit it to compute the task (ctrl+s submits)"
    if isinstance(p, Kernel):
        _reset_gates(view)
        if p.author == "seed":
            return f"kernel v{p.version}: the starter as written (no memories credited)"
        return f"kernel v{p.version} from {p.author or 'model'}"
    if isinstance(p, GateEvent):
        if p.name == "anti_hacking" and p.status == "running":
            _reset_gates(view)
        gate = view.gates.setdefault(p.name, GateView(p.name))
        gate.state = p.status if p.status in GATE_STATES else "waiting"
        if gate.state != "running":
            gate.progress = ""
        view.progress_note = gate_phase_note(p.version, p.name, p.status)
        return None
    if isinstance(p, GateProgress):
        gate = view.gates.setdefault(p.gate, GateView(p.gate))
        if gate.state == "running":  # a late tick after the gate's verdict changes nothing
            gate.progress = p.text
            view.progress_note = gate_phase_note(p.version, p.gate, "running", p.text)
        return None
    if isinstance(p, Verification):
        result = p.result
        text = apply_verification(view, result, None if p.reverify else step, ts)
        if result.get("cached") or any("cached verdict" in note for note in (result.get("notes") or [])
                                       if isinstance(note, str)):
            text += "; cached verdict (same source, task and settings): press v to measure again"
        return ("re" + text) if p.reverify else text
    if isinstance(p, Reward):
        return f"reward {float(p.value):+.2f} ({p.stage or view.stage})" if p.value is not None else None
    if isinstance(p, QUpdate):
        for change in p.changes:
            apply_value_change(view, change)
        n = len(p.changes)
        return f"updated {n} memory value{'s' if n != 1 else ''}" if n else None
    if isinstance(p, MemoryAdded):
        return f"memory added: {p.title or p.id}"
    if isinstance(p, MemoryMarked):
        return f"memory {p.id} marked {'used' if p.used else 'not used'} for your next edit"
    if isinstance(p, PendingRefinement):
        extra = f" ({p.gain:.2f}× faster)" if p.gain else ""
        return f"refinement pending{extra}: accept (a) or reject (r)"
    if isinstance(p, Accepted):
        return f"accepted v{p.version} ({p.reason or p.by})"
    if isinstance(p, Rejected):
        return f"rejected v{p.version}"
    if isinstance(p, HumanEdit):
        view.author = "person"
        n = len(p.credited)
        return f"person's edit recorded; credits {n} memor{'y' if n == 1 else 'ies'}"
    if isinstance(p, StepDone):
        return f"step done: {p.outcome}" + (f" in {float(p.seconds):.1f}s" if p.seconds is not None else "")
    if isinstance(p, StepResumed):
        return f"finishing v{p.version}: the step stopped mid-way when the session last closed"
    if isinstance(p, Insight):
        return f"no insight: {p.skipped}" if p.skipped else f"insight saved: {p.title or ''}"
    if isinstance(p, NeedsHuman):
        return f"needs you: {p.message}"
    if isinstance(p, BudgetChanged):
        return f"{p.add} more {p.stage} steps"
    if isinstance(p, ErrorEvent):
        return f"error{f' in {p.where}' if p.where else ''}: {p.message}"
    return None


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


def read_events(session_dir: Path) -> list[dict[str, Any]]:
    """The recorded events of a session folder in their stored (dict) form, read by `core.events.read_events`
    (a torn last line is skipped); a log damaged elsewhere shows nothing rather than half a session."""
    from core.events import read_events as read_log

    try:
        return [event.to_dict() for event in read_log(Path(session_dir))]
    except (OSError, ValueError):
        return []
