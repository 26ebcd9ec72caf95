"""Turning attempts into memories: trajectory items, and insights distilled from refinements."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from memory.items import AUTHORS, MemoryItem, TaskSignature, check_stage, new_id
from memory.values import OUTCOMES

#: How much of a kernel's source goes into the searchable text (the full code stays in `data`).
CODE_EXCERPT = 1500


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def trajectory_item(
    sig: TaskSignature,
    stage: str,
    code: str,
    outcome: str,
    feedback: str = "",
    latency_ms: float | None = None,
    author: str = "model",
    diff: str | None = None,
    gates: dict[str, str] | None = None,
    speedup: float | None = None,
) -> MemoryItem:
    """One attempt as a memory: its task, stage, code (or diff), gate outcomes, feedback and author."""
    check_stage(stage)
    if outcome not in OUTCOMES:
        raise ValueError(f"unknown outcome {outcome!r}; expected one of {', '.join(OUTCOMES)}")
    if author not in AUTHORS:
        raise ValueError(f"unknown author {author!r}; expected one of {', '.join(AUTHORS)}")
    timing = f" in {latency_ms:.3g} ms" if latency_ms is not None else ""
    title = f"{stage} {outcome}{timing}: {sig.task} ({sig.backend})"
    body = diff if diff else code
    text = "\n".join(
        p
        for p in (
            sig.text,
            f"shapes: {sig.shapes}" if sig.shapes else "",
            feedback.strip(),
            body[:CODE_EXCERPT],
        )
        if p
    )
    data: dict[str, Any] = {
        "task": sig.task,
        "shapes": sig.shapes,
        "stage": stage,
        "outcome": outcome,
        "feedback": feedback,
        "latency_ms": latency_ms,
        "speedup": speedup,
        "code": code,
        "code_hash": _digest(code),
        "diff": diff,
        "gates": dict(gates or {}),
        "author": author,
    }
    return MemoryItem(
        id=new_id("trajectory"),
        kind="trajectory",
        backends=[sig.backend],
        category=sig.category,
        title=title,
        text=text,
        tags=[sig.category, stage, outcome, author],
        provenance=author,
        data=data,
    )


def insight_prompt(sig: TaskSignature, before: str, after: str, speedup: float) -> str:
    """The request given to the summariser: what changed between two kernels and why it helped."""
    return (
        f"A {sig.backend} kernel for the task '{sig.task}' ({sig.category}; {sig.shapes}) became "
        f"{speedup:.2f}x faster after a refinement.\n\nBEFORE:\n{before}\n\nAFTER:\n{after}\n\n"
        "State in at most four sentences the reusable optimisation practice behind the speed-up, "
        "general enough to apply to other kernels. The first line is a short title."
    )


def insight_from_refinement(
    sig: TaskSignature,
    before: str,
    after: str,
    speedup: float,
    summarise: Callable[[str], str],
    author: str = "model",
) -> MemoryItem:
    """Distil a successful refinement into an insight; `summarise` is a model call (or any function).

    Raises ValueError for a refinement that was not faster or a summary that is empty, so no
    content-free insight enters the bank.
    """
    if not speedup > 1.0:
        raise ValueError(f"an insight needs a refinement that was faster (speedup > 1), got {speedup!r}")
    summary = (summarise(insight_prompt(sig, before, after, speedup)) or "").strip()
    if not summary:
        raise ValueError("the summariser returned no text; no insight was written")
    first, _, rest = summary.partition("\n")
    title = first.strip().strip("#*").strip()[:100] or f"Refinement insight for {sig.category}"
    return MemoryItem(
        id=new_id("insight"),
        kind="insight",
        backends=[sig.backend],
        category=sig.category,
        title=title,
        text=rest.strip() or summary,
        tags=[sig.category, "insight", "refine"],
        provenance=author,
        data={
            "task": sig.task,
            "speedup": speedup,
            "before_hash": _digest(before),
            "after_hash": _digest(after),
        },
    )
