"""A full disk or a read-only sessions root gives one line saying what to do, never a traceback."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

import core.events
import core.session.models
from core.llm import ScriptedModel
from core.session import Budgets, Session, SessionError
from core.tasks import load_task
from evokernel_tui.cli import cli
from tests.fakes.verdicts import fake_verify, reply, write_replies

FULL = Path("/dev/full")


def _one_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in output, output
    return lines[0]


@pytest.mark.skipif(not FULL.exists(), reason="no /dev/full here")
def test_a_full_disk_while_stepping_is_one_line_and_the_log_stays_readable(tmp_path):
    s = Session.create(load_task("relu"), model=ScriptedModel([reply("feasible", 1.0)]), root=tmp_path,
                       verify_fn=fake_verify, budgets=Budgets(1, 0))
    log = s.path / "events.jsonl"
    saved = log.read_bytes()
    log.unlink()
    log.symlink_to(FULL)  # every write to the log now fails with ENOSPC, as on a full disk
    with pytest.raises(SessionError) as err:
        s.step()
    message = str(err.value)
    assert "No space left on device" in message and "free some space" in message and "\n" not in message
    assert f"evokernel resume {s.id}" in message
    assert not s.busy  # the step's lock was let go
    log.unlink()
    log.write_bytes(saved)
    s.close()
    again = Session.open(s.path, verify_fn=fake_verify)
    assert again.stage == "draft" and again.history == ()


def test_draft_on_a_full_disk_prints_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(core.session.models, "default_verify", fake_verify)
    appended = []
    real_append = core.events.EventLog.append

    def append(self, event):
        if len(appended) >= 4:  # the disk fills up during the first step
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        appended.append(event.kind)
        real_append(self, event)

    monkeypatch.setattr(core.events.EventLog, "append", append)
    replies = write_replies(tmp_path / "r.json", [reply("feasible", 0.5)])
    res = CliRunner().invoke(cli, ["draft", "relu", "--model", f"scripted:{replies}", "--no-memory", "--steps", "1",
                                   "--sessions-dir", str(tmp_path / "sessions")])
    assert res.exit_code == 1
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert "Traceback" not in res.output and [x for x in lines if x.startswith("Error")] == lines[-1:]
    assert "No space left on device" in lines[-1] and "evokernel resume" in lines[-1]  # after the progress lines


def test_read_only_sessions_root_is_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    real_mkdir = Path.mkdir

    def mkdir(self, *a, **kw):
        if tmp_path / "ro" in (self, *self.parents):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))
        return real_mkdir(self, *a, **kw)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    replies = write_replies(tmp_path / "r.json", [reply("feasible", 0.5)])
    res = CliRunner().invoke(cli, ["draft", "relu", "--model", f"scripted:{replies}", "--no-memory",
                                   "--sessions-dir", str(tmp_path / "ro")])
    assert res.exit_code == 1
    line = _one_line(res.output)
    assert "Read-only file system" in line and "cannot be written" in line


def test_reading_a_session_in_a_read_only_folder_needs_no_lock(tmp_path, monkeypatch):
    s = Session.create(load_task("relu"), model=None, root=tmp_path, verify_fn=fake_verify)
    s.close()
    real_open = os.open

    def no_create(path, flags, *a, **kw):
        if str(path).endswith("/.lock"):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), path)
        return real_open(path, flags, *a, **kw)

    monkeypatch.setattr(os, "open", no_create)
    opened = Session.open(s.path)  # a read-only copy can still be opened and read ...
    assert opened.current_source and opened.stage == "draft"
    with pytest.raises(SessionError, match="Read-only file system"):  # ... and writing says why it cannot
        opened.submit_human_edit("import torch\n")
