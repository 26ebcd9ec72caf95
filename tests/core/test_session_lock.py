"""One writer per session: a second `resume` (or `tui --session`) is refused naming the process that has it,
readers are never refused, and a lock left by a dead process is taken over."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from core.llm import ScriptedModel
from core.session import Budgets, Session, SessionError, list_sessions
from core.tasks import load_task
from evokernel_tui.cli import cli
from tests.fakes.verdicts import fake_verify, reply

REPO = Path(__file__).resolve().parents[2]

HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    sys.path[:0] = [{repo!r}]
    from core.session import Session
    s = Session.open({path!r})
    Path({flag!r}).write_text("open")
    time.sleep(120)
""")


def _make(tmp_path) -> Session:
    s = Session.create(load_task("relu"), model=ScriptedModel([reply("feasible", 1.0), reply("feasible", 0.5)]),
                       root=tmp_path / "sessions", verify_fn=fake_verify, budgets=Budgets(1, 1), session_id="held")
    s.close()
    return s


@pytest.fixture
def holder(tmp_path):
    """A second process that has the session open for writing."""
    path = _make(tmp_path).path
    flag = tmp_path / "flag"
    proc = subprocess.Popen([sys.executable, "-c", HOLDER.format(repo=str(REPO), path=str(path), flag=str(flag))])
    deadline = time.monotonic() + 60
    while not flag.exists():
        assert proc.poll() is None, "the holder exited before opening the session"
        assert time.monotonic() < deadline
        time.sleep(0.05)
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def test_second_writer_is_refused_naming_the_holder_then_takes_over_when_it_dies(tmp_path):
    s = _make(tmp_path)
    path = s.path
    del s
    proc = None
    try:
        proc = subprocess.Popen([sys.executable, "-c", HOLDER.format(repo=str(REPO), path=str(path),
                                                                     flag=str(tmp_path / "flag"))])
        deadline = time.monotonic() + 60
        while not (tmp_path / "flag").exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        with pytest.raises(SessionError) as err:
            Session.open(path, verify_fn=fake_verify)
        message = str(err.value)
        assert f"process {proc.pid}" in message and "held" in message and "\n" not in message
        # readers are not refused
        assert Session.open(path, lock=False).stage == "draft"
        assert [r["id"] for r in list_sessions(path.parent)] == ["held"]
        # a session opened to read cannot write behind the holder's back
        reader = Session.open(path, lock=False, verify_fn=fake_verify)
        with pytest.raises(SessionError, match=f"process {proc.pid}"):
            reader.step()
        assert [e for e in reader.history] == []

        os.kill(proc.pid, signal.SIGKILL)  # the holder dies without releasing anything
        proc.wait()
        assert (path / ".lock").read_text().startswith(str(proc.pid))
        s = Session.open(path, verify_fn=fake_verify)  # its lock is taken over
        assert (path / ".lock").read_text().split()[0] == str(os.getpid())
        s.step()
        assert s.best is not None and s.best.version == 1
        s.close()
        assert (path / ".lock").read_text() == ""
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()


def test_resume_of_a_session_open_elsewhere_is_one_line(tmp_path, holder, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(cli, ["resume", "held", "--sessions-dir", str(tmp_path / "sessions"), "--no-memory"])
    assert res.exit_code == 1
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and f"process {holder.pid}" in lines[0], res.output
    assert "Traceback" not in res.output


def test_lock_file_naming_a_dead_process_is_taken_over(tmp_path):
    s = _make(tmp_path)
    path = s.path
    del s
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (path / ".lock").write_text(f"{dead.pid} evokernel resume held\n")
    s = Session.open(path, verify_fn=fake_verify)
    assert (path / ".lock").read_text().split()[0] == str(os.getpid())
    s.close()


def test_same_process_may_reopen_and_close_releases(tmp_path):
    s = _make(tmp_path)
    a = Session.open(s.path)
    b = Session.open(s.path)  # one process: shared, counted
    a.close()
    assert (s.path / ".lock").read_text().split()[0] == str(os.getpid())
    b.close()
    assert (s.path / ".lock").read_text() == ""


def test_tui_session_open_elsewhere_is_refused_before_the_app_starts(tmp_path, holder, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(cli, ["tui", "--session", "held", "--sessions-dir", str(tmp_path / "sessions"),
                                   "--no-memory"])
    assert res.exit_code == 1, res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and f"process {holder.pid}" in lines[0], res.output


def test_a_released_lock_is_free_while_a_forked_child_still_holds_the_descriptor(tmp_path):
    """A subprocess forked while the lock is held keeps a copy of its descriptor until it execs (or, here,
    exits): release unlocks the file itself, so the folder opens again at once (found in CI: a session
    closed and reopened while the prewarm was starting a compiler)."""
    import os
    import time

    from core.fsutil import FolderLock

    first = FolderLock(tmp_path)
    first.acquire()
    child = os.fork()
    if child == 0:  # holds the inherited descriptor for a while, as a child between fork and exec does
        time.sleep(3)
        os._exit(0)
    try:
        first.release()
        again = FolderLock(tmp_path)
        again.acquire()  # raised LockHeld("another process") while the child lived
        assert again.held
        again.release()
    finally:
        os.kill(child, 9)
        os.waitpid(child, 0)
