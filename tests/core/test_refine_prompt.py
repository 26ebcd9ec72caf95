"""The refine prompt shows the evidence of the kernel it asks the model to refine, not another's."""

from __future__ import annotations

import re

from core.events import read_events
from core.llm import ScriptedModel
from core.session import Budgets, Session
from core.tasks import load_task
from memory import MemoryStore, RetrievalPolicy
from tests.fakes.verdicts import fake_verify, reply

LESSON = "Vectorise the row loop\nKeeping the inner loop branch-free lets the compiler emit SIMD code for rows."


def verify_with_named_profile(reference_source, candidate_source, **kw):
    """`fake_verify`, with a profile row named after the kernel's tag, so each kernel's profile is its own."""
    result = fake_verify(reference_source, candidate_source, **kw)
    tag = re.search(r"^    # (\w*)$", candidate_source, re.M)
    for row in result.profile:
        row["name"] = f"op_{tag.group(1) or 'draft'}"
    return result


class OldestStart(RetrievalPolicy):
    """Q2's choice made deterministic for the test: always refine the oldest feasible kernel."""

    def choose_start(self, points):
        return points[0][0], False


def test_refine_prompt_carries_the_start_points_profile_not_the_bests(tmp_path):
    # v1 (draft, 1.0 ms, profile op_draft) then v2 (refinement, 0.8 ms, profile op_fast) becomes the best.
    # The start point chosen for the next refinement is v1, which is not the best.
    replies = [reply("feasible", 1.0), reply("feasible", 0.8, "fast"), LESSON, reply("incorrect", tag="x")]
    store = MemoryStore(tmp_path / "memory.json", fsync=False)
    try:
        s = Session.create(load_task("softmax_rows"), model=ScriptedModel(replies), memory=store,
                           root=tmp_path / "sessions", verify_fn=verify_with_named_profile, auto_accept=True,
                           policy=OldestStart(k=2, epsilon=0.0), budgets=Budgets(draft_steps=1, refine_steps=2))
        s.run()
        events = read_events(s.path)
    finally:
        store.close()
    start = [e.data["start_point"] for e in events if e.kind == "retrieved" and e.data["stage"] == "refine"][-1]
    best = [e.data["version"] for e in events if e.kind == "accepted"][-1]
    assert start["version"] == 1 and best == 2, "the setup needs a start point that is not the best"
    prompt = [e.data["messages"][-1]["content"] for e in events if e.kind == "prompt"][-1]

    # v1's profile is in the prompt and v2's (the best's) is nowhere in it
    assert "op_draft: 0.9000 ms self" in prompt and "op_fast" not in prompt
    kernel = prompt[prompt.index("## Kernel to refine"):prompt.index("## Profile of the kernel to refine")]
    assert "(correct; 1.0000 ms, 1.00x vs eager PyTorch)" in kernel and "# verdict: feasible 1.0" in kernel
    profile = prompt[prompt.index("## Profile of the kernel to refine"):]
    assert "op_draft: 0.9000 ms self" in profile
    assert "Profile of the current best" not in prompt
    # the best stays in view as the target to beat, on its own line
    assert "the best so far (v2) runs at 0.8000 ms, 1.25x vs eager PyTorch; the new one must beat that." in kernel
