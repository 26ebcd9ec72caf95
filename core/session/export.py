"""Trajectories for training: one JSON record per model turn, built from a session's events.

Nothing is re-run: the records come from `events.jsonl` alone, walked in order with the one fold
(`core.events.apply`) alongside, so the memories in context, the verdict and the reward of a turn are
exactly what the session recorded. The schema is `SCHEMA_VERSION` (docs/trajectories.md describes it);
a reader should check `schema_version` and ignore keys it does not know.

A model turn is a `model_reply` whose purpose is "kernel" (the draft/refine calls; the lesson and insight
calls that write memories are not turns). A turn whose reply held no code has `kernel: null`; a kernel
whose verification was never recorded has `verdict: null`; one never rewarded has `reward: null`.
A step a crash cut short and `resume` finished is joined to its turn by the kernel's version.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from core.events import (
    Accepted,
    Event,
    Kernel,
    ModelErrorEvent,
    ModelReply,
    PendingRefinement,
    Prompt,
    Rejected,
    Reward,
    SessionState,
    Verification,
    apply,
    read_events,
)
from core.session.folder import load_meta
from core.session.records import SessionError

#: Bump on any change a reader must know about (a key removed, renamed or given another meaning).
SCHEMA_VERSION = 1
FORMATS = ("jsonl",)


def _memory(item: Any) -> dict[str, Any]:
    return {"id": item.id, "kind": item.kind, "title": item.title, "q1": item.q1, "q2": item.q2,
            "visits1": item.visits1, "visits2": item.visits2, "similarity": item.similarity,
            "score": item.score, "chosen_by": item.chosen_by}


def _verdict(result: dict[str, Any], payload: Verification) -> dict[str, Any]:
    """The verdict as recorded: gates, figures with their noise label, the policy that judged it."""
    res = payload.verification_result()
    timing = dict(result.get("timing") or {})
    label = res.timing_label(now=result.get("measured_at")) if res is not None else ""
    return {
        "outcome": result.get("outcome", res.outcome if res else ""),
        "feasible": bool(result.get("feasible", res.feasible if res else False)),
        "gates": [{"name": g.get("name"), "status": g.get("status"), "reason": g.get("reason", ""),
                   "seconds": g.get("seconds", 0.0), "detail": g.get("detail") or {}}
                  for g in result.get("gates") or []],
        "figures": {
            "latency_ms": result.get("latency_ms"),
            "reference_ms": result.get("reference_ms"),
            "compiled_ms": result.get("compiled_ms"),
            "speedup": result.get("speedup"),
            "speedup_interval": [timing["lo"], timing["hi"]] if timing.get("lo") is not None
            and timing.get("hi") is not None else None,
            "noisy": bool(timing.get("noisy")),
            "noise_label": label,
            "cached": bool(result.get("cached")),
            "isolated": bool(result.get("isolated", True)),
        },
        "policy": dict(result.get("policy") or {}),
        "tolerance": result.get("tolerance", ""),
        "device": result.get("device", ""),
        "feedback": payload.feedback,
    }


def _reward(p: Reward) -> dict[str, Any]:
    return {"value": p.value, "scheme": p.scheme, "raw": p.raw, "outcome": p.outcome, "stage": p.stage,
            "improved": p.improved, "latency_ms": p.latency_ms, "best_ms": p.best_ms,
            "credited": list(p.credited), "deferred": list(p.deferred) if p.deferred is not None else None}


def trajectory_records(events: Iterable[Event], meta: dict[str, Any]) -> list[dict[str, Any]]:
    """The model turns of one session's events, in order (see the module docstring)."""
    state = SessionState()
    turns: list[dict[str, Any]] = []
    by_version: dict[int, dict[str, Any]] = {}
    prompt: Prompt | None = None
    prompt_step = 0
    open_turn: dict[str, Any] | None = None
    for ev in events:
        before = state
        state = apply(state, ev)
        p = ev.payload
        if isinstance(p, Prompt):
            prompt, prompt_step, open_turn = p, ev.step, None
        elif isinstance(p, ModelReply) and p.purpose == "kernel":
            open_turn = {
                "schema_version": SCHEMA_VERSION,
                "session_id": meta.get("id", ""),
                "task": meta.get("task", ""),
                "backend": meta.get("backend", ""),
                "device": "",
                "model": p.model or state.model or "",
                "stage": p.stage or (prompt.stage if prompt else ""),
                "step": ev.step or prompt_step,
                "turn": len(turns),
                "messages": list(prompt.messages) if prompt is not None else [],
                "memories": [_memory(i) for i in before.retrieved],
                "credit_ids": list(before.credit_ids),
                "reply": p.text,
                "usage": {"prompt_tokens": p.prompt_tokens, "completion_tokens": p.completion_tokens,
                          "estimated": p.tokens_estimated, "cost": p.cost, "seconds": p.seconds},
                "kernel": None,
                "extract_error": None,
                "verdict": None,
                "reward": None,
                "decision": None,
            }
            turns.append(open_turn)
        elif isinstance(p, ModelErrorEvent) and p.reason == "no_code" and open_turn is not None:
            open_turn["extract_error"] = p.message
            open_turn = None
        elif isinstance(p, Kernel) and p.author == "model" and open_turn is not None:
            open_turn["kernel"] = {"version": p.version, "file": p.file, "source": p.source}
            by_version[int(p.version)] = open_turn
            open_turn = None
        elif isinstance(p, Verification) and not p.reverify and p.version in by_version:
            turn = by_version[p.version]
            turn["verdict"] = _verdict(p.result, p)
            turn["device"] = turn["verdict"]["device"]
        elif isinstance(p, Reward) and p.version in by_version:
            by_version[p.version]["reward"] = _reward(p)
        elif isinstance(p, Accepted) and p.version in by_version:
            by_version[p.version]["decision"] = {"accepted": True, "by": p.by, "reason": p.reason}
        elif isinstance(p, PendingRefinement) and p.version in by_version:
            by_version[p.version]["decision"] = {"pending": True, "gain": p.gain}
        elif isinstance(p, Rejected) and p.version in by_version:
            by_version[p.version]["decision"] = {"accepted": False, "by": p.by, "reason": "rejected"}
    device = next((t["device"] for t in turns if t["device"]), "")
    for t in turns:
        t["device"] = t["device"] or device
    return turns


def export_session(path: Path) -> list[dict[str, Any]]:
    """The trajectory records of the session folder `path` (SessionError when it cannot be read)."""
    path = Path(path)
    meta = load_meta(path)
    try:
        events = read_events(path / "events.jsonl")
    except (OSError, ValueError) as exc:
        raise SessionError(f"{path.name}: events.jsonl cannot be read ({exc})") from None
    task = meta.task_name
    return trajectory_records(events, {"id": meta.id, "task": task, "backend": meta.backend})


def session_folders(ref: Path) -> list[Path]:
    """The session folders a path names: a session itself, or a bench output folder (`OUT/sessions/*`),
    or a folder of sessions. Empty when it names none."""
    ref = Path(ref)
    if (ref / "session.json").exists():
        return [ref]
    for root in (ref / "sessions", ref):
        if root.is_dir():
            found = sorted(d for d in root.iterdir() if (d / "session.json").exists())
            if found:
                return found
    return []


def iter_records(paths: Iterable[Path]) -> Iterator[dict[str, Any]]:
    for path in paths:
        yield from export_session(path)
