"""Kernel extraction from model replies, and the prompt templates' contract text."""

from __future__ import annotations

import pytest

from core.extract import ExtractError, code_blocks, extract_kernel
from core.prompting import PromptContext, build_messages
from core.tasks import load_task

K1 = "import torch\n\nclass ModelNew(torch.nn.Module):\n    version = 1\n"
K2 = "import torch\n\nclass ModelNew(torch.nn.Module):\n    version = 2\n"


def test_single_fenced_block():
    assert extract_kernel(f"Here you go:\n```python\n{K1}```\nDone.") == K1


def test_last_modelnew_block_wins_and_other_languages_are_skipped():
    reply = f"```cpp\nint f();\n```\nfirst try\n```python\n{K1}```\nfixed:\n```py\n{K2}```\n```\npip install x\n```"
    assert extract_kernel(reply) == K2
    assert [b.lang for b in code_blocks(reply)] == ["cpp", "python", "py", ""]


def test_truncated_reply_and_tilde_fence_and_bare_module():
    assert extract_kernel(f"```python\n{K1}    extra = 3") == K1 + "    extra = 3\n"
    assert extract_kernel(f"~~~python\n{K2}~~~") == K2
    assert extract_kernel(K1) == K1


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ("", "empty"),
        ("I cannot help with that.", "no code block"),
        ("```cpp\nint main() {}\n```", "1 code block(s) (cpp) but none defines `class ModelNew`"),
        ("```python\nclass Model:\n    pass\n```", "none defines `class ModelNew`"),
    ],
)
def test_unusable_replies_give_a_reason(reply, message):
    with pytest.raises(ExtractError, match=message.replace("(", r"\(").replace(")", r"\)")):
        extract_kernel(reply)


@pytest.mark.parametrize("backend", ["cpu", "cuda", "triton"])
def test_prompts_state_the_contract_per_backend(backend):
    task = load_task("softmax_rows")
    ctx = PromptContext(task.name, task.category, task.level, task.description, task.source, backend,
                        feedback="The Compile gate failed: boom", previous_source=K1)
    system, user = build_messages("draft", ctx)
    assert "class ModelNew" in system["content"] and "anti-hacking" in system["content"]
    assert {"cpu": "load_inline", "cuda": "cuda_sources", "triton": "@triton.jit"}[backend] in system["content"]
    assert task.source.strip() in user["content"] and "The Compile gate failed: boom" in user["content"]
    ctx.best_source, ctx.best_latency_ms, ctx.reference_ms = K2, 0.5, 1.0
    ctx.profile = [{"name": "aten::exp", "self_ms": 0.3, "calls": 2}]
    refine_user = build_messages("refine", ctx)[1]["content"]
    assert "0.5000 ms" in refine_user and "2.00x" in refine_user and "aten::exp" in refine_user and K2.strip() in refine_user
