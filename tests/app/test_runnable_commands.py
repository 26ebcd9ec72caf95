"""Issue 34: a message that prints a command prints one that runs. After `scripts/setup.sh` the command is
`.venv/bin/evokernel`, not on PATH: `evokernel tui --session ID` answered "command not found"."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.shell import evokernel_command, runnable

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def venv_script(tmp_path, monkeypatch):
    """A project folder with `.venv/bin/evokernel`, started from there with that script, PATH without it."""
    script = tmp_path / "proj" / ".venv" / "bin" / "evokernel"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.setattr(sys, "argv", [str(script), "tui"])
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.chdir(tmp_path / "proj")
    return script


def test_the_command_is_the_venv_script_when_it_is_not_on_path(venv_script):
    assert evokernel_command() == ".venv/bin/evokernel"
    assert (runnable("continue with: evokernel tui --session abc; or `evokernel resume abc`")
            == "continue with: .venv/bin/evokernel tui --session abc; or `.venv/bin/evokernel resume abc`")
    # a path or the program's own prefix is not a command
    for prose in ("evokernel: interrupted; see ~/.cache/evokernel/builds", "x.json is not an evokernel bench file"):
        assert runnable(prose) == prose


def test_the_command_is_plain_evokernel_when_path_finds_this_one(venv_script, monkeypatch):
    monkeypatch.setenv("PATH", f"{venv_script.parent}:/usr/bin:/bin")
    assert evokernel_command() == "evokernel"
    assert runnable("run `evokernel memory repair`") == "run `evokernel memory repair`"


def test_outside_the_project_the_command_is_absolute(venv_script, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    other = tmp_path / "elsewhere"
    other.mkdir()
    monkeypatch.chdir(other)
    assert evokernel_command() == str(venv_script)


def test_the_quit_message_prints_a_command_that_runs(venv_script, make_session):
    from evokernel_tui.app import EvoKernelApp

    s = make_session([])
    app = EvoKernelApp(session=s, watch_file=False)
    message = app.actions.exit_message()
    assert message is not None and f"continue with: .venv/bin/evokernel tui --session {s.id}" in message


def test_an_error_line_prints_the_venv_command(tmp_path):
    """The real script, started by its path with the venv not on PATH (as after setup): the repair hint
    of a damaged memory bank names `.venv/bin/evokernel memory repair`."""
    script = REPO / ".venv" / "bin" / "evokernel"
    if not script.is_file():
        pytest.skip("no .venv/bin/evokernel (scripts/setup.sh not run)")
    bank = tmp_path / "m.json"
    bank.write_text("{broken")
    env = {**os.environ, "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    res = subprocess.run([".venv/bin/evokernel", "memory", "--memory", str(bank), "list"], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 1
    assert "`.venv/bin/evokernel memory repair`" in res.stderr, res.stderr
