"""Issue 34, "panes that wait for nothing": a ready verdict is shown, a failed check is in the title, and
gates that will not run say so instead of `waiting`."""

from __future__ import annotations

import time

import core.tasks
from core.tasks import TaskError, load_task
from evokernel_tui.app import EvoKernelApp
from evokernel_tui.commands.tui import task_checks
from evokernel_tui.widgets.gate_panel import GatePanel

SIZE = (120, 40)
LAYER = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(16, 32)]


def get_init_inputs():
    return []
'''


async def wait_until(pilot, condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await pilot.pause(0.05)


def gate_text(app) -> str:
    panel = app.screen.query_one(GatePanel)
    lines = [str(panel.get_option_at_index(i).prompt) for i in range(panel.option_count)]
    return "\n".join([str(panel.border_title), *lines, str(panel.border_subtitle)])


async def test_the_starters_verdict_is_shown_when_ready_without_a_key_and_not_recorded(make_session, verifier):
    s = make_session(None)
    app = EvoKernelApp(s, watch_file=False, prebuild_starter=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.prebuild_thread is not None and not app.prebuild_thread.is_alive())
        await wait_until(pilot, lambda: app.view.gates["correctness"].state != "waiting")
        await pilot.pause(0.1)
        shown = gate_text(app)
        assert "waiting" not in shown and "pass" in shown, shown
        assert "starter's verdict, not recorded" in shown
        assert verifier.calls == [s.current_source]
        assert not s.history and app.view.points == []                   # not a version, no latency point
        assert "starter verified:" in "\n".join(e.text for e in app.view.activity) + "\n".join(
            str(line) for line in app.activity.lines)
    s.close()


async def test_while_the_starter_is_checked_the_gates_title_says_so_and_clears_after(make_session, verifier):
    """A bare `waiting` for a minute looked like a hang (issue 34): while the background check of the
    starter runs, the Gates title says what the gates wait for; once its verdict is in, that note goes."""
    from evokernel_tui.task_checks import STARTER_NOTE

    hold = verifier.block()
    s = make_session(None)
    app = EvoKernelApp(s, watch_file=False, prebuild_starter=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: verifier.entered.is_set())
        await pilot.pause(0.1)
        assert STARTER_NOTE in gate_text(app)
        hold.set()
        await wait_until(pilot, lambda: app.view.gates["correctness"].state != "waiting")
        await pilot.pause(0.1)
        shown = gate_text(app)
        assert STARTER_NOTE not in shown and "starter's verdict, not recorded" in shown, shown
    s.close()


async def test_a_failed_memory_estimate_replaces_checking_in_the_gates_title(tmp_path, monkeypatch, make_session):
    path = tmp_path / "big_layer.py"
    path.write_text(LAYER)

    def too_big(*a, **k):
        raise TaskError("the reference needs about 12.0 GiB, over the 8 GiB memory limit; raise it with --memory-gb")

    monkeypatch.setattr(core.tasks, "check_task_memory", too_big)
    from core.session import Session

    s = Session.create(load_task(str(path)), model=None, memory=None, root=tmp_path / "sessions",
                       verify_fn=lambda *a, **k: None)
    app = EvoKernelApp(s, watch_file=False, task_checks=task_checks(None))
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.checks_done.is_set() and app.task_problem is not None)
        await pilot.pause(0.1)                                           # no key pressed
        shown = gate_text(app)
        assert "checking the task" not in shown, shown
        assert "task check failed (memory estimate): the reference needs about 12.0 GiB" in shown
        assert "waiting" not in shown and "not run" in shown
    s.close()


async def test_a_cuda_session_on_a_machine_without_a_gpu_shows_the_error_in_the_gates(tmp_path, monkeypatch):
    import verifier.backends.cuda
    from core.session import Session

    monkeypatch.setattr(verifier.backends.cuda.CudaBackend, "availability",
                        lambda self: "no GPU: torch is a CPU-only build; use --backend cpu")
    s = Session.create(load_task("relu"), backend="cuda", model=None, memory=None, root=tmp_path / "sessions",
                       verify_fn=lambda *a, **k: None)
    app = EvoKernelApp(s, watch_file=False, task_checks=task_checks(None))
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.checks_done.is_set() and app.task_problem is not None)
        await pilot.pause(0.1)
        shown = gate_text(app)
        assert "task check failed (backend): no GPU" in shown, shown
        assert "waiting" not in shown and "not run" in shown
        assert "task problem" in app.sub_title
    s.close()
