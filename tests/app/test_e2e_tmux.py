"""End to end: `evokernel tui relu` in a real terminal (tmux), keys in, screen text out."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

BIN = Path(sys.executable).with_name("evokernel")


def screen(name: str) -> str:
    return subprocess.run(["tmux", "capture-pane", "-p", "-t", name], capture_output=True, text=True).stdout


def wait_for(name: str, text: str, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    shown = ""
    while time.monotonic() < deadline:
        shown = screen(name)
        if text in shown:
            return shown
        time.sleep(0.2)
    raise AssertionError(f"{text!r} never appeared; the screen was:\n{shown}")


def test_tui_in_tmux(tmp_path):
    command = [str(BIN), "tui", "relu"] if BIN.exists() else [sys.executable, "-m", "evokernel_tui.cli", "tui", "relu"]
    env = {
        "EVOKERNEL_CONFIG_DIR": str(tmp_path / "cfg"),
        "EVOKERNEL_CONFIG": str(tmp_path / "cfg" / "config.toml"),
        "EVOKERNEL_MEMORY": str(tmp_path / "memory.json"),
        "EVOKERNEL_SESSIONS": str(tmp_path / "sessions"),
        "TERM": "xterm-256color",
    }
    exports = " ".join(f"{k}={v}" for k, v in env.items())
    name = f"ek-e2e-{os.getpid()}"
    shell = f"cd {tmp_path} && env -u EVOKERNEL_MODEL {exports} {' '.join(command)}; echo EXITED; sleep 30"
    subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", "120", "-y", "40", shell], check=True)
    try:
        shown = wait_for(name, "starter kernel")
        assert "Manual mode" in shown and "Gates" in shown and "Memories" in shown and "Activity" in shown
        subprocess.run(["tmux", "send-keys", "-t", name, "Escape"], check=True)  # manual mode starts in the editor
        time.sleep(0.3)
        subprocess.run(["tmux", "send-keys", "-t", name, "s"], check=True)
        wait_for(name, "A step needs a model")
        subprocess.run(["tmux", "send-keys", "-t", name, "t"], check=True)
        deadline = time.monotonic() + 10
        while not (tmp_path / "cfg" / "tui.json").exists():
            assert time.monotonic() < deadline, "the theme switch was not remembered"
            time.sleep(0.1)
        assert '"light"' in (tmp_path / "cfg" / "tui.json").read_text()
        subprocess.run(["tmux", "send-keys", "-t", name, "q"], check=True)
        wait_for(name, "EXITED")
        assert list((tmp_path / "sessions").glob("*/events.jsonl")), "the session was not recorded"
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)


@pytest.mark.slow
def test_readme_first_command_in_a_fresh_home_reaches_a_built_starter(tmp_path):
    """`evokernel tui relu` with a fresh HOME (cold build caches, no config): the starter kernel builds
    and gets the verifier's verdict (it copies its input, so correctness is where it stops), and q
    prints how to resume."""
    command = [str(BIN), "tui", "relu"] if BIN.exists() else [sys.executable, "-m", "evokernel_tui.cli", "tui", "relu"]
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "TERM": "xterm-256color", "XDG_CONFIG_HOME": str(home / ".config"),
           "XDG_CACHE_HOME": str(home / ".cache"), "XDG_DATA_HOME": str(home / ".local" / "share")}
    exports = " ".join(f"{k}={v}" for k, v in env.items())
    unset = "-u EVOKERNEL_MODEL -u EVOKERNEL_CONFIG -u EVOKERNEL_CONFIG_DIR -u EVOKERNEL_MEMORY -u EVOKERNEL_SESSIONS"
    name = f"ek-e2e-home-{os.getpid()}"
    shell = f"cd {tmp_path} && env {unset} -u EVOKERNEL_BUILD_DIR {exports} {' '.join(command)}; echo EXITED; sleep 30"
    subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", "120", "-y", "40", shell], check=True)
    try:
        wait_for(name, "starter kernel")
        subprocess.run(["tmux", "send-keys", "-t", name, "Escape"], check=True)
        time.sleep(0.3)
        subprocess.run(["tmux", "send-keys", "-t", name, "v"], check=True)
        shown = wait_for(name, "step done:", timeout=400)  # stays on screen (the verdict line may scroll by)
        assert "Compile      pass" in shown, shown
        assert "step done: compile_fail" not in shown
        subprocess.run(["tmux", "send-keys", "-t", name, "q"], check=True)
        shown = wait_for(name, "EXITED")
        assert "evokernel tui --session" in shown.replace("\n", "")
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)
