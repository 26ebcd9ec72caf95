"""One human line per event, for the command line (progress displays, `evokernel replay`)."""

from __future__ import annotations

from core.events.payloads import (
    Accepted,
    BudgetChanged,
    ErrorEvent,
    EventLike,
    HumanEdit,
    Insight,
    Kernel,
    ModelErrorEvent,
    ModelReply,
    NeedsHuman,
    PendingRefinement,
    Rejected,
    Retrieved,
    Reward,
    SessionStarted,
    StageChanged,
    Starter,
    StepResumed,
    Verification,
    as_event,
)


def describe_event(ev: EventLike) -> str | None:
    """One human line for an event (progress displays, replay); None for events too fine to show."""
    ev = as_event(ev)
    p = ev.payload
    if isinstance(p, SessionStarted):
        return f"session for {p.task} on {p.backend} with {p.model or 'no model (manual)'}"
    if isinstance(p, StageChanged):
        return f"stage {p.from_} -> {p.to}: {p.reason}"
    if isinstance(p, Retrieved):
        return f"retrieved {len(p.items)} memories for {p.stage}"
    if isinstance(p, ModelReply):
        cost = "unknown cost" if p.cost is None else f"${p.cost:.4f}"
        return f"model replied ({p.purpose}): {p.tokens} tokens, {cost}, {p.seconds or 0:.1f} s"
    if isinstance(p, ModelErrorEvent):
        return f"model step failed ({p.reason}): {p.message}"
    if isinstance(p, Starter):
        return "starter kernel written: it builds and copies its input; make it compute the task"
    if isinstance(p, Kernel):
        return f"kernel v{p.version} by {p.author} ({p.stage}) -> {p.file}"
    if isinstance(p, Verification):
        r = p.result
        lat = f", {r['latency_ms']:.4f} ms" if r.get("latency_ms") is not None else ""
        sp = f", {r['speedup']:.2f}x" if r.get("speedup") else ""
        again = " (re-verified)" if p.reverify else ""
        return f"v{p.version}{again}: {r.get('outcome')}{lat}{sp}"
    if isinstance(p, Reward):
        value = f"{p.value:+.3f}" if p.value is not None else "?"
        return f"reward {value} ({p.stage}, {len(p.credited)} memories credited)"
    if isinstance(p, PendingRefinement):
        gain = f" ({p.gain:.2f}x faster than the best)" if p.gain else ""
        return f"v{p.version} is a pending refinement{gain}"
    if isinstance(p, Accepted | Rejected):
        return f"v{p.version} {ev.kind} by {p.by}"
    if isinstance(p, HumanEdit):
        return f"person's edit v{p.version} ({p.stage})"
    if isinstance(p, Insight):
        return f"insight skipped: {p.skipped}" if p.skipped is not None else f"insight stored: {p.title}"
    if isinstance(p, NeedsHuman | ErrorEvent):
        return str(p.message)
    if isinstance(p, BudgetChanged):
        return f"{p.add} more {p.stage} steps"
    if isinstance(p, StepResumed):
        return f"finishing step {ev.step} (v{p.version}), cut short when the session last stopped"
    return None


#: What a gate is doing while it runs, before (or without) finer progress: the phase line's words.
GATE_WORK = {
    "anti_hacking": "anti-hacking: scanning the source",
    "compile": "compile: building the kernel",
    "correctness": "correctness: trials",
    "latency": "latency: timing rounds",
    "profile": "profile: one profiled call",
}


def gate_phase(gate: str, status: str, progress_text: str = "") -> str | None:
    """`correctness: trial 3/8`, `compile: building the kernel`: the phase line for a gate that runs, with
    its progress when there is some; None once the gate is no longer running."""
    if progress_text:
        return f"{gate.replace('_', '-')}: {progress_text}"
    return GATE_WORK.get(gate, gate) if status == "running" else None


def phase_text(ev: EventLike) -> str | None:
    """The phase a session is in, as one line (`asking the model for a draft`, `verifying v2: correctness:
    trial 3/8`), from the event that starts it; None for events that start no phase. One vocabulary for
    every display of long work: `draft`'s bar, `bench`'s per-task lines and the app's status."""
    from core.events.payloads import GateEvent, GateProgress, Prompt

    ev = as_event(ev)
    p = ev.payload
    if isinstance(p, Prompt):
        return f"asking the model for a {'refinement' if p.stage == 'refine' else 'draft'}"
    if isinstance(p, Kernel):
        return f"verifying v{p.version}"
    if isinstance(p, GateProgress):
        return f"verifying v{p.version}: {gate_phase(p.gate, 'running', p.text)}"
    if isinstance(p, GateEvent):
        phase = gate_phase(p.name, p.status)
        return f"verifying v{p.version}: {phase}" if phase else None
    return None
