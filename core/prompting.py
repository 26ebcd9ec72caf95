"""Build chat messages for each stage from the template files in `core/prompts/`.

Templates use `string.Template` ($name) so kernel source with braces needs no escaping. A file
`<stage>_<backend>.md` overrides `<stage>.md` when present, so a backend can reword a stage.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import Any

PROMPTS_DIR = Path(__file__).with_name("prompts")
BACKENDS = ("cpu", "cuda", "triton")
DEFAULT_TOLERANCE = "kernelbench: fp32 atol=rtol=1e-4, fp16/bf16 1e-2"  # the verifier's default rule


@dataclass
class Tried:
    """One earlier refinement, summarised for the next prompt."""

    version: int
    outcome: str
    latency_ms: float | None = None
    note: str = ""


@dataclass
class PromptContext:
    """Everything a prompt can mention; fields not relevant to a stage stay empty."""

    task_name: str
    category: str
    level: int | None
    description: str
    reference: str
    backend: str
    memories: list[Any] = field(default_factory=list)  # memory.Retrieved (or anything with .item)
    feedback: str = ""
    previous_source: str = ""
    #: refine: the kernel to refine (the start point, else the session best) and its own evidence:
    #: latency, the reference time paired with it, and its profile
    best_source: str = ""
    best_latency_ms: float | None = None
    reference_ms: float | None = None
    profile: list[dict[str, Any]] = field(default_factory=list)
    refine_version: int | None = None
    #: refine: the session's best kernel, the target to beat (it may differ from the kernel to refine)
    session_best_version: int | None = None
    session_best_ms: float | None = None
    session_best_reference_ms: float | None = None
    tried: list[Tried] = field(default_factory=list)
    #: the correctness rule the kernel will be checked at (`core.verifying.tolerance_text`)
    tolerance: str = DEFAULT_TOLERANCE
    #: the anti-hacking preset in force (`verifier.policy.rules`): what the kernel may leave to libraries
    policy: str = "kernelbench"
    #: the device class this session runs on (`core.device`): a memory learnt on another is marked as such
    device_class: str = ""


def template(name: str, backend: str | None = None) -> Template:
    """Load `<name>_<backend>.md` if it exists, else `<name>.md`."""
    if backend:
        specific = PROMPTS_DIR / f"{name}_{backend}.md"
        if specific.exists():
            return Template(specific.read_text(encoding="utf-8"))
    return Template((PROMPTS_DIR / f"{name}.md").read_text(encoding="utf-8"))


def system_prompt(backend: str, tolerance: str = DEFAULT_TOLERANCE, policy: str = "kernelbench") -> str:
    """The contract for `backend`, naming the tolerance the kernel's outputs are checked at and the
    anti-hacking policy in force (what may be left to libraries)."""
    notes_path = PROMPTS_DIR / f"backend_{backend}.md"
    notes = notes_path.read_text(encoding="utf-8") if notes_path.exists() else ""
    rules_path = PROMPTS_DIR / f"policy_{policy}.md"
    if not rules_path.exists():
        raise ValueError(f"unknown policy {policy!r}; expected kernelbench or strict")
    return template("system").substitute(backend_notes="\n" + notes if notes else "",
                                         tolerance=tolerance or DEFAULT_TOLERANCE, policy=policy,
                                         policy_rules=rules_path.read_text(encoding="utf-8").rstrip("\n")).strip() + "\n"


def build_messages(stage: str, ctx: PromptContext) -> list[dict[str, str]]:
    """System + user messages for a draft or refine step."""
    if stage not in ("draft", "refine"):
        raise ValueError(f"unknown stage {stage!r}; expected draft or refine")
    values = {
        "task_name": ctx.task_name,
        "category": ctx.category or "unknown",
        "level": ctx.level if ctx.level is not None else "?",
        "description": ctx.description or "",
        "reference": ctx.reference.strip(),
        "backend": ctx.backend,
        "memories": render_memories(ctx.memories, here=ctx.device_class),
        "previous": render_previous(ctx.previous_source, ctx.feedback),
        "best_source": ctx.best_source.strip(),
        "best_latency": _ms(ctx.best_latency_ms),
        "best_speedup": _speedup(ctx.reference_ms, ctx.best_latency_ms),
        "profile": render_profile(ctx.profile),
        "session_best": render_session_best(ctx),
        "tried": render_tried(ctx.tried),
    }
    user = template(stage, ctx.backend).safe_substitute(values)
    return [{"role": "system", "content": system_prompt(ctx.backend, ctx.tolerance, ctx.policy)}, {"role": "user", "content": user.strip() + "\n"}]


def learnt_elsewhere_note(item: object, here: str) -> str:
    """" (learnt on X, another device)" for a memory learnt on a device class other than `here`, else ""."""
    mine = str(getattr(item, "learnt_on", "") or "")
    return f" (learnt on {mine}, another device)" if here and mine and mine != here else ""


def render_memories(memories: Sequence[object], here: str = "") -> str:
    """Contract knowledge (fetched by rule) first under its own heading, then the ranked notes; a note
    learnt on another device class than `here` says so."""
    if not memories:
        return ""
    rules = [h for h in memories if getattr(h, "chosen_by", "") == "rule"]
    ranked = [h for h in memories if getattr(h, "chosen_by", "") != "rule"]
    parts: list[str] = []
    for heading, hits in (("## The kernel contract (always applies)", rules),
                          ("## Notes from memory (chosen by how useful they have been)", ranked)):
        if not hits:
            continue
        parts += ["", heading, ""]
        for hit in hits:
            item = getattr(hit, "item", hit)
            parts.append(f"### {getattr(item, 'title', 'note')}{learnt_elsewhere_note(item, here)}")
            parts.append(str(getattr(item, "text", "")).strip())
            parts.append("")
    return "\n".join(parts)


def render_previous(source: str, feedback: str) -> str:
    if not feedback and not source:
        return ""
    parts = ["", "## Your previous attempt", ""]
    if source:
        parts += ["```python", source.strip(), "```", ""]
    if feedback:
        parts += ["What the verifier said:", "", feedback.strip(), ""]
    parts.append("Fix the problem above.")
    parts.append("")
    return "\n".join(parts)


def render_profile(profile: list[dict[str, Any]]) -> str:
    if not profile:
        return "(no profile recorded)"
    rows = [f"- {r.get('name')}: {float(r.get('self_ms', 0)):.4f} ms self, {r.get('calls', 1)} call(s)" for r in profile[:8]]
    return "\n".join(rows)


def render_session_best(ctx: PromptContext) -> str:
    """One line naming the session's best kernel, the target to beat ("" when none is known)."""
    if ctx.session_best_version is None and ctx.session_best_ms is None:
        return ""
    if ctx.refine_version is not None and ctx.refine_version == ctx.session_best_version:
        return "This is the session's best kernel so far; the new one must beat its latency.\n\n"
    version = f" (v{ctx.session_best_version})" if ctx.session_best_version is not None else ""
    return (f"Not the session's best: the best so far{version} runs at {_ms(ctx.session_best_ms)}, "
            f"{_speedup(ctx.session_best_reference_ms, ctx.session_best_ms)}; the new one must beat that.\n\n")


def render_tried(tried: list[Tried]) -> str:
    if not tried:
        return ""
    lines = ["", "## Already tried in this session", ""]
    for t in tried[-8:]:
        lat = f", {_ms(t.latency_ms)}" if t.latency_ms is not None else ""
        note = f": {t.note}" if t.note else ""
        lines.append(f"- v{t.version} {t.outcome}{lat}{note}")
    lines.append("")
    return "\n".join(lines)


def _ms(value: float | None) -> str:
    return f"{value:.4f} ms" if value is not None else "latency unknown"


def _speedup(reference_ms: float | None, latency_ms: float | None) -> str:
    if reference_ms and latency_ms:
        return f"{reference_ms / latency_ms:.2f}x vs eager PyTorch"
    return "speedup unknown"
