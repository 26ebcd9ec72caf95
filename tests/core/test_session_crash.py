"""Kill a process mid-session with SIGKILL; reopening finishes the step that was in flight."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from core.events import read_events
from core.session import Session
from memory import MemoryStore
from tests.fakes.verdicts import fake_verify

REPO = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    sys.path[:0] = [{repo!r}]
    from tests.fakes.verdicts import fake_verify, reply
    from core.llm import ScriptedModel
    from core.session import Budgets, Session
    from core.tasks import load_task
    from memory import MemoryStore

    def verify(ref, cand, **kw):
        if "second" in cand:
            Path({flag!r}).write_text("in flight")
            time.sleep(60)
        return fake_verify(ref, cand, **kw)

    replies = [reply("compile_fail", tag="first"), reply("incorrect", tag="second"), reply("feasible", 0.5, "third"),
               reply("feasible", 0.25, "fourth")]
    s = Session.create(load_task("softmax_rows"), model=ScriptedModel(replies), root=Path({root!r}),
                       verify_fn=verify, budgets=Budgets(3, 1), session_id="crash", auto_accept=True,
                       memory=MemoryStore(Path({root!r}) / "memory.json", fsync=False))
    s.run()
    """
)


def test_sigkill_mid_step_then_resume(tmp_path):
    flag = tmp_path / "flag"
    code = CHILD.format(repo=str(REPO), flag=str(flag), root=str(tmp_path))
    proc = subprocess.Popen([sys.executable, "-c", code])
    deadline = time.monotonic() + 30
    while not flag.exists():
        assert proc.poll() is None, "child exited before the step in flight"
        assert time.monotonic() < deadline
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()

    path = tmp_path / "crash"
    events = read_events(path / "events.jsonl")
    assert events[-1].kind == "kernel"  # killed while verifying the kernel of step 2
    credit = list([e for e in events if e.kind == "retrieved"][-1].payload.credit_ids())  # what the live step credits
    assert credit
    memory = MemoryStore(tmp_path / "memory.json", fsync=False)
    try:
        s = Session.open(path, verify_fn=fake_verify, auto_accept=True, memory=memory)
        assert s.used["draft"] == 1  # the finished step counts; the one in flight is not finished yet
        assert [a.outcome for a in s.history] == ["compile_fail", "unverified"]
        assert s.interrupted is not None and s.interrupted.version == 2
        visits_before = {i: memory.get(i).visits1 for i in credit}

        finished = s.step()  # the next action finishes the interrupted step, nothing else
        kinds = [e.kind for e in finished]
        assert kinds[:2] == ["step_resumed", "gate"] and "kernel" not in kinds
        assert all(e.step == 2 for e in finished if e.kind != "stage_changed")
        reward = next(e for e in finished if e.kind == "reward")
        assert reward.data["version"] == 2 and reward.data["credited"] == credit
        assert {i: memory.get(i).visits1 for i in credit} == {k: v + 1 for k, v in visits_before.items()}
        assert "q_update" in kinds and "memory_added" in kinds and kinds[-1] == "step_done"
        assert [a.outcome for a in s.history] == ["compile_fail", "incorrect"] and s.interrupted is None
        assert s.used["draft"] == 2

        s.run()
        assert s.stage == "done" and s.best is not None and s.best.latency_ms == 0.25
        assert s.used == {"draft": 3, "refine": 1}
        assert "third" in (path / "kernels" / "0003_model_draft.py").read_text()
        assert s.kernel_path.read_text() == (path / s.best.file).read_text()
        # each reply became one kernel: finishing the step in flight did not ask the model again
        tags = ["first", "second", "third", "fourth"]
        assert [next(t for t in tags if t in a.source) for a in s.history] == tags
    finally:
        memory.close()
