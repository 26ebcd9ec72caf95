"""Issue 24: a task file opens at once. The starter kernel comes from the task's source text; running
the task (memory estimate, probe, degeneracy) happens afterwards in named workers that report into the
panes, and bad input is still one line before the full screen starts."""

from __future__ import annotations

import threading
import time

import pytest
from click.testing import CliRunner

import core.tasks
from core.tasks import load_task
from core.verifying import make_config
from evokernel_tui.app import EvoKernelApp
from evokernel_tui.cli import cli
from evokernel_tui.commands.tui import session_opener, task_checks
from evokernel_tui.widgets.gate_panel import GatePanel
from evokernel_tui.widgets.kernel_pane import KernelPane

BROKEN_LAYER = '''"""My layer: a ReLU whose forward reads a weight it never made."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) * self.scale


def get_inputs():
    return [torch.randn(16, 32)]


def get_init_inputs():
    return []
'''


async def wait_until(pilot, condition, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await pilot.pause(0.05)


def log_text(app) -> str:
    return "\n".join(entry.text for entry in app.view.activity) + "\n" + "\n".join(
        str(line) for line in app.activity.lines)


@pytest.mark.slow
async def test_a_task_file_shows_its_starter_before_the_probe_and_a_later_probe_failure_in_the_panes(
        tmp_path, monkeypatch, verifier):
    path = tmp_path / "my_layer.py"
    path.write_text(BROKEN_LAYER)
    task = load_task(str(path))
    release, entered = threading.Event(), threading.Event()
    real_degeneracy = core.tasks.task_degeneracy

    def slow_probe(*args, **kwargs):  # the real probe (it runs the task), held until the test lets it go
        entered.set()
        release.wait(60)
        return real_degeneracy(*args, **kwargs)

    monkeypatch.setattr(core.tasks, "task_degeneracy", slow_probe)
    monkeypatch.setattr(core.tasks, "check_task_memory", lambda *a, **k: None)  # no torch import for the estimate
    monkeypatch.setenv("EVOKERNEL_WARM_WORKER", "0")
    opener = session_opener("cpu", None, None, str(tmp_path / "sessions"), 1, 0, memory=None, first_task=task,
                            verify_config=make_config("kernelbench"))

    def open_session(ref):
        session = opener(ref)
        session.verify_fn = verifier
        return session

    app = EvoKernelApp(open_session=open_session, task=task.name, watch_file=False, task_checks=task_checks(None))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: app.session is not None and entered.is_set())
        await pilot.pause(0.1)
        pane = app.screen.query_one(KernelPane)
        assert "Starter kernel for `my_layer`" in pane.editor.text       # on screen while the probe runs
        assert "def forward(self, x)" in pane.editor.text
        assert app.checking == "task probe" and not app.checks_done.is_set()
        assert "checking the task (task probe)" in str(app.screen.query_one(GatePanel).border_title)
        assert "checking the task" in app.sub_title
        assert "task check (memory estimate)" in log_text(app)
        await pilot.press("escape", "v")                                  # verify waits for the probe
        await pilot.pause(0.1)
        assert "waiting for the task check (task probe)" in log_text(app)
        assert verifier.calls == []
        release.set()
        await wait_until(pilot, lambda: app.checks_done.is_set() and app.running is None)
        await pilot.pause(0.1)
        assert app.task_problem and "scale" in app.task_problem           # the probe's own line
        title = str(app.screen.query_one(GatePanel).border_title)
        assert "task check failed (task probe)" in title, title
        assert "task problem" in app.sub_title
        text = log_text(app)
        assert "Task check (task probe) found a problem" in text and "not run:" in text
        assert verifier.calls == []                                      # nothing verified against a broken task
        assert app.prebuild_thread is None
        app.action_step()
        await pilot.pause(0.05)
    app.session.close()


@pytest.mark.slow
async def test_a_sound_task_file_passes_its_checks_and_verifies_after_them(tmp_path, monkeypatch, verifier):
    path = tmp_path / "good_layer.py"
    path.write_text(BROKEN_LAYER.replace(" * self.scale", ""))
    task = load_task(str(path))
    monkeypatch.setattr(core.tasks, "check_task_memory", lambda *a, **k: None)
    monkeypatch.setattr(core.tasks, "task_degeneracy", lambda *a, **k: core.tasks.Degeneracy(["zeros"], []))
    opener = session_opener("cpu", None, None, str(tmp_path / "sessions"), 1, 0, memory=None, first_task=task,
                            verify_config=make_config("kernelbench"))

    def open_session(ref):
        session = opener(ref)
        session.verify_fn = verifier
        return session

    app = EvoKernelApp(open_session=open_session, task=task.name, watch_file=False, task_checks=task_checks(None))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: app.session is not None and app.checks_done.is_set() and not app.checking)
        await pilot.pause(0.1)
        assert app.task_problem is None
        assert app.session.verify_config.degenerate == ["zeros"]
        title = str(app.screen.query_one(GatePanel).border_title)
        assert "degenerate" in title and "checking" not in title, title
        await pilot.press("escape", "v")
        await wait_until(pilot, lambda: verifier.calls and app.running is None)
    app.session.close()


def test_bad_input_is_one_line_before_the_screen_and_a_good_file_opens_without_running_it(tmp_path, monkeypatch):
    started = []
    monkeypatch.setattr(EvoKernelApp, "run", lambda self, *a, **k: started.append(self))
    ran = []
    monkeypatch.setattr(core.tasks, "_run_probe", lambda *a, **k: ran.append(a) or {"ok": False})
    (tmp_path / "no_model.py").write_text("import torch\n\ndef get_inputs():\n    return []\n\n"
                                          "def get_init_inputs():\n    return []\n")
    (tmp_path / "syntax.py").write_text("class Model(:\n    pass\n")
    (tmp_path / "layer.py").write_text(BROKEN_LAYER)
    base = ["--unsafe-no-isolation", "tui", "--no-memory", "--sessions-dir", str(tmp_path / "sessions")]
    cases = {
        str(tmp_path / "missing.py"): "no such file",
        str(tmp_path / "no_model.py"): "has no `Model` class",
        str(tmp_path / "syntax.py"): "syntax error at line 1",
    }
    for arg, said in cases.items():
        result = CliRunner().invoke(cli, [*base, arg])
        assert result.exit_code == 1 and "Traceback" not in result.output, result.output
        line = result.output.strip()
        assert len(line.splitlines()) == 1 and said in line, line
    assert not started and not (tmp_path / "sessions").exists()
    good = CliRunner().invoke(cli, [*base, str(tmp_path / "layer.py")])
    assert good.exit_code == 0, good.output
    assert len(started) == 1 and not ran                                  # the task is run after the paint
    assert started[0].checks._checks_for is not None                    # the task checks given to the app


@pytest.mark.slow
async def test_a_too_big_problem_opens_and_the_memory_check_says_so(tmp_path, monkeypatch):
    """What `tui` used to refuse before the screen (issue 11) is now the first task check's finding."""
    monkeypatch.setenv("EVOKERNEL_AVAILABLE_GB", "64")  # a machine with room for the advice
    from pathlib import Path

    kb = Path(__file__).resolve().parents[1] / "candidates" / "kernelbench"
    task = load_task(kernelbench=kb, level=1, problem=100)
    probed = []
    monkeypatch.setattr(core.tasks, "task_degeneracy",
                        lambda *a, **k: probed.append(a) or core.tasks.Degeneracy([], []))
    opener = session_opener("cpu", None, None, str(tmp_path / "sessions"), 1, 0, memory=None, first_task=task)
    session = opener(None)
    app = EvoKernelApp(session, watch_file=False, task_checks=task_checks(None))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: app.checks_done.is_set() and not app.checking, timeout=120)
        await pilot.pause(0.1)
        assert "about 12.0 GiB" in app.task_problem and "--memory-gb 15" in app.task_problem
        assert not probed                                                 # the probe is not run after it
        assert "Starter kernel" in app.screen.query_one(KernelPane).editor.text
        await pilot.press("escape", "v")
        await pilot.pause(0.1)
        assert "Refused: verify the starter" in log_text(app)
    session.close()


@pytest.mark.slow
async def test_the_starter_is_on_screen_at_the_first_paint_and_edits_before_the_session_opens_are_kept(
        tmp_path, verifier):
    from core.starter import starter_kernel

    path = tmp_path / "my_layer.py"
    path.write_text(BROKEN_LAYER)
    task = load_task(str(path))
    opener = session_opener("cpu", None, None, str(tmp_path / "sessions"), 1, 0, memory=None, first_task=task,
                            verify_config=make_config("kernelbench"))
    release = threading.Event()

    def slow_open(ref):  # a session that takes its time to open (a loaded machine)
        release.wait(30)
        session = opener(ref)
        session.verify_fn = verifier
        return session

    starter = starter_kernel(task.name, task.source, "cpu")
    app = EvoKernelApp(open_session=slow_open, task=task.name, watch_file=False, starter=starter)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.1)
        pane = app.screen.query_one(KernelPane)
        assert app.session is None and pane.editor.text == starter        # editable before the session exists
        assert pane.editor.has_focus
        await pilot.press("ctrl+s")
        await pilot.pause(0.05)
        assert "Still opening my_layer" in log_text(app) or any(
            "Still opening" in str(n.message) for n in app._notifications)
        pane.editor.insert("# mine\n", (0, 0))
        release.set()
        await wait_until(pilot, lambda: app.session is not None)
        await pilot.pause(0.1)
        assert app.session.current_source == starter                      # the session's starter: the same text
        assert pane.editor.text.startswith("# mine\n") and pane.edited    # the person's edit is kept
    app.session.close()
