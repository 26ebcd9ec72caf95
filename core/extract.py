"""Pull the kernel (a KernelBench `ModelNew` module) out of a model's reply."""

from __future__ import annotations

import re
from dataclasses import dataclass

_FENCE = re.compile(r"^[ \t]*(```+|~~~+)[ \t]*([\w+.#-]*)[^\n]*\n(.*?)(?:^[ \t]*\1[ \t]*$|\Z)", re.S | re.M)
_PY_LANGS = {"", "python", "py", "python3", "py3"}
_MODELNEW = re.compile(r"^\s*class\s+ModelNew\b", re.M)


class ExtractError(Exception):
    """The reply holds no usable kernel; the message says why in one line (fed back to the model)."""


@dataclass
class CodeBlock:
    lang: str
    code: str


def code_blocks(reply: str) -> list[CodeBlock]:
    """Fenced blocks in order; an unclosed last fence (a truncated reply) runs to the end."""
    return [CodeBlock(m.group(2).lower(), m.group(3).rstrip() + "\n") for m in _FENCE.finditer(reply)]


def extract_kernel(reply: str) -> str:
    """The Python source that defines `class ModelNew`.

    Preference: the last fenced Python block defining ModelNew (models often show a draft and then
    the fix), else any block defining it, else an unfenced reply that is itself such a module.
    """
    if not reply or not reply.strip():
        raise ExtractError("the reply was empty")
    blocks = code_blocks(reply)
    with_model = [b for b in blocks if _MODELNEW.search(b.code)]
    python = [b for b in with_model if b.lang in _PY_LANGS]
    if python:
        return python[-1].code
    if with_model:
        return with_model[-1].code
    if not blocks and _MODELNEW.search(reply) and re.search(r"^\s*(import|from)\s+\w", reply, re.M):
        return reply.strip() + "\n"
    if blocks:
        langs = ", ".join(sorted({b.lang or "plain" for b in blocks}))
        raise ExtractError(f"the reply has {len(blocks)} code block(s) ({langs}) but none defines `class ModelNew`")
    raise ExtractError("the reply contains no code block; answer with one ```python block defining `class ModelNew`")
