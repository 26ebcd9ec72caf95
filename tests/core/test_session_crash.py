"""Kill a process mid-session with SIGKILL; reopening loses at most the step in flight."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from session_fakes import fake_verify  # noqa: E402

from core.events import read_events  # noqa: E402
from core.session import Session  # noqa: E402

REPO = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    sys.path[:0] = [{repo!r}, {here!r}]
    from session_fakes import fake_verify, reply
    from core.llm import ScriptedModel
    from core.session import Budgets, Session
    from core.tasks import load_task

    def verify(ref, cand, **kw):
        if "second" in cand:
            Path({flag!r}).write_text("in flight")
            time.sleep(60)
        return fake_verify(ref, cand, **kw)

    replies = [reply("compile_fail", tag="first"), reply("incorrect", tag="second"), reply("feasible", 0.5, "third"),
               reply("feasible", 0.25, "fourth")]
    s = Session.create(load_task("softmax_rows"), model=ScriptedModel(replies), root=Path({root!r}),
                       verify_fn=verify, budgets=Budgets(3, 1), session_id="crash", auto_accept=True)
    s.run()
    """
)


def test_sigkill_mid_step_then_resume(tmp_path):
    flag = tmp_path / "flag"
    code = CHILD.format(repo=str(REPO), here=str(Path(__file__).parent), flag=str(flag), root=str(tmp_path))
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
    s = Session.open(path, verify_fn=fake_verify, auto_accept=True)
    assert s.used["draft"] == 1  # the finished step counts, the one in flight does not
    assert [a.outcome for a in s.history] == ["compile_fail", "unverified"]
    s.run()
    assert s.stage == "done" and s.best is not None and s.best.latency_ms == 0.25
    assert s.used == {"draft": 2, "refine": 1}
    assert "third" in (path / "kernels" / "0003_model_draft.py").read_text()
    assert s.kernel_path.read_text() == (path / s.best.file).read_text()
