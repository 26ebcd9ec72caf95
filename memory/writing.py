"""Turning attempts into memories: trajectory items, and insights distilled from refinements."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from typing import Any

from memory.items import AUTHORS, MemoryItem, TaskSignature, check_stage, new_id
from memory.values import OUTCOMES

#: How much of a kernel's source goes into the searchable text (the full code stays in `data`).
CODE_EXCERPT = 1500
#: A failed attempt's lesson is at most this long: gate, rule and first error line, not a code dump.
LESSON_CHARS = 400
#: An insight needs at least this many words of substance (title and text together).
MIN_INSIGHT_WORDS = 8


def compact_lesson(outcome: str, feedback: str = "", gates: dict[str, str] | None = None, lesson: str = "") -> str:
    """The short lesson a failed attempt leaves: which gate failed, why, and the first error line.

    `lesson` (a model-written lesson, when a model is configured) is used as it is, trimmed.
    """
    if lesson.strip():
        return lesson.strip()[:LESSON_CHARS]
    failed = next((name for name, status in (gates or {}).items() if status == "fail"), "")
    lines = [ln.strip() for ln in feedback.splitlines() if ln.strip()]
    first = lines[0] if lines else ""
    rule = next((ln for ln in lines[1:] if ln.lower().startswith(("rule", "error", "line"))), "")
    parts = [f"Outcome: {outcome}" + (f" at the {failed} gate" if failed else "")]
    parts += [p for p in (first, rule) if p]
    return "\n".join(parts)[:LESSON_CHARS]


def lesson_prompt(sig: TaskSignature, stage: str, outcome: str, feedback: str, code: str) -> str:
    """The request for a model-written lesson from one failed attempt (its code is cut to an excerpt)."""
    return (
        f"A {stage} attempt at a {sig.backend} kernel for the task '{sig.task}' ({sig.category}) failed "
        f"with the outcome '{outcome}'.\n\nVERIFIER FEEDBACK:\n{feedback.strip()[:2000]}\n\n"
        f"KERNEL (excerpt):\n{code[:CODE_EXCERPT]}\n\n"
        f"In at most three sentences ({LESSON_CHARS} characters), state what went wrong and what to do "
        "differently next time, general enough to help another attempt at a similar kernel. No code."
    )


def model_lesson(sig: TaskSignature, stage: str, outcome: str, feedback: str, code: str,
                 write: Callable[[str], str]) -> str:
    """A model-written lesson for a failed attempt (`write` is a model call), trimmed to `LESSON_CHARS`;
    "" when the reply is empty or too short to teach anything (the rule-based lesson is used then)."""
    text = (write(lesson_prompt(sig, stage, outcome, feedback, code)) or "").strip()
    if len(re.findall(r"[A-Za-z]{2,}", text)) < MIN_INSIGHT_WORDS:
        return ""
    return text[:LESSON_CHARS]


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
    lesson: str = "",
    source: dict[str, Any] | None = None,
    device: dict[str, Any] | None = None,
) -> MemoryItem:
    """One attempt as a memory: its task, stage, code (or diff), gate outcomes, feedback and author.

    A feasible attempt keeps a code excerpt in its searchable text (it is a start point to refine
    from); a failed one keeps only a compact lesson (`compact_lesson`), the code stays in `data`.
    `source` is provenance (session, version, model) kept in `data["source"]`; `device` is where it was
    measured ({"backend", "name", "capability", "class"}, given by the caller), kept in `data["device"]`.
    """
    check_stage(stage)
    if outcome not in OUTCOMES:
        raise ValueError(f"unknown outcome {outcome!r}; expected one of {', '.join(OUTCOMES)}")
    if author not in AUTHORS:
        raise ValueError(f"unknown author {author!r}; expected one of {', '.join(AUTHORS)}")
    timing = f" in {latency_ms:.3g} ms" if latency_ms is not None else ""
    title = f"{stage} {outcome}{timing}: {sig.task} ({sig.backend})"
    body = diff if diff else code
    tail: tuple[str, ...]
    if outcome == "feasible":
        tail = (feedback.strip()[:LESSON_CHARS], body[:CODE_EXCERPT])
    else:
        tail = (compact_lesson(outcome, feedback, gates, lesson),)
    text = "\n".join(p for p in (sig.text, f"shapes: {sig.shapes}" if sig.shapes else "", *tail) if p)
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
        "source": dict(source or {}),
    }
    if device:
        data["device"] = dict(device)
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
    source: dict[str, Any] | None = None,
    device: dict[str, Any] | None = None,
) -> MemoryItem:
    """Distil a successful refinement into an insight; `summarise` is a model call (or any function).

    Raises ValueError for a refinement that was not faster or a summary that is empty or trivial
    (fewer than `MIN_INSIGHT_WORDS` words, e.g. "Variant 1."), so no content-free insight enters
    the bank. Duplicates are refused by `is_duplicate_insight` before the item is stored.
    """
    if not speedup > 1.0:
        raise ValueError(f"an insight needs a refinement that was faster (speedup > 1), got {speedup!r}")
    summary = (summarise(insight_prompt(sig, before, after, speedup)) or "").strip()
    if not summary:
        raise ValueError("the summariser returned no text; no insight was written")
    if len(re.findall(r"[A-Za-z]{2,}", summary)) < MIN_INSIGHT_WORDS:
        raise ValueError(f"the summary is too short to be a reusable lesson ({summary[:60]!r}); no insight was written")
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
            "source": dict(source or {}),
            **({"device": dict(device)} if device else {}),
        },
    )


def _words(text: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[A-Za-z0-9]{3,}", text)}


def is_duplicate_insight(new: MemoryItem, existing: list[MemoryItem], threshold: float = 0.8) -> MemoryItem | None:
    """The stored insight `new` repeats (same content, or word overlap (Jaccard) >= `threshold`)."""
    mine = _words(new.title + " " + new.text)
    for item in existing:
        if item.kind != "insight":
            continue
        if item.fingerprint() == new.fingerprint():
            return item
        theirs = _words(item.title + " " + item.text)
        if mine and theirs and len(mine & theirs) / len(mine | theirs) >= threshold:
            return item
    return None
