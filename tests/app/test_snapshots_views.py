"""The views added for issue 14 at 80×24 and 120×40: the C++ view, the Task view, the versions table
and the profile table, over the frozen session (stable across runs)."""

from __future__ import annotations

import pytest
from support import StaticSession

from evokernel_tui.app import EvoKernelApp

SIZES = [(80, 24), (120, 40)]
size_ids = lambda s: f"{s[0]}x{s[1]}"  # noqa: E731


def _starter() -> str:
    from core.starter import starter_kernel
    from core.tasks import load_task

    task = load_task("relu")
    return starter_kernel(task.name, task.source, "cpu")


@pytest.mark.parametrize("size", SIZES, ids=size_ids)
def test_cpp_view(snap_compare, tmp_path, size):
    session = StaticSession(tmp_path / "session")
    session.current_source = _starter()
    app = EvoKernelApp(session, theme_name="dark", watch_file=False)

    async def show(pilot):
        from evokernel_tui.widgets.kernel_pane import KernelPane

        await pilot.pause()
        # the app shows the folded events' kernel; this frozen session's log ends on another, so put the
        # starter on screen as a fold that ended on it would
        app.view.previous, app.view.source = app.view.source, session.current_source
        app._show()
        pane = app.screen.query_one(KernelPane)
        pane.diagnostics = ["kernel.cpp:12: error: 'in' was not declared in this scope [file line 18]"]
        await pilot.press("z")
        pane.show_cpp = True
        await pilot.pause(0.1)

    assert snap_compare(app, terminal_size=size, run_before=show)


def _fake_info():
    from core.tasks import TaskInfo, TensorSpec

    return TaskInfo(inputs=[TensorSpec("x", [2048, 4096], "float32")], outputs=[TensorSpec("out", [2048, 4096], "float32")],
                    init_args=[], reference_ms=48.3, parameters=0, degenerate=[])


@pytest.mark.parametrize("size", SIZES, ids=size_ids)
def test_task_view(snap_compare, tmp_path, size):
    from core.tasks import load_task
    from evokernel_tui.screens.task_view import TaskViewScreen

    app = EvoKernelApp(StaticSession(tmp_path / "session"), theme_name="dark", watch_file=False)

    async def show(pilot):
        await pilot.pause()
        screen = TaskViewScreen(load_task("relu"), eager_ms=2.0, probe=False)
        await app.push_screen(screen)
        screen.show_info(_fake_info(), None)
        await pilot.pause(0.1)

    assert snap_compare(app, terminal_size=size, run_before=show)


@pytest.mark.parametrize("size", SIZES, ids=size_ids)
def test_versions_table(snap_compare, tmp_path, size):
    from evokernel_tui.screens.versions import VersionRow, VersionsScreen

    rows = [VersionRow(1, "model", "draft", "compile_fail", None, None, None, None, "", "a"),
            VersionRow(2, "model", "draft", "feasible", 1.25, 0.03, 412, 1.6, "best · accepted (loop)", "b"),
            VersionRow(3, "person", "refine", "feasible", 1.31, 0.05, 398, 1.53, "", "c"),
            VersionRow(4, "model", "refine", "feasible", 0.98, 0.02, 455, 2.04, "rejected (person)", "d")]
    app = EvoKernelApp(StaticSession(tmp_path / "session"), theme_name="dark", watch_file=False)

    async def show(pilot):
        await pilot.pause()
        await app.push_screen(VersionsScreen(rows, "b"))
        await pilot.pause(0.1)

    assert snap_compare(app, terminal_size=size, run_before=show)


@pytest.mark.parametrize("size", SIZES, ids=size_ids)
def test_profile_table(snap_compare, tmp_path, size):
    from evokernel_tui.screens.detail import GateDetailScreen
    from evokernel_tui.view import GateView

    gate = GateView("profile", "pass", 0.31, "", {
        "top_ops": [{"name": "kernel::relu_forward", "self_ms": 3.1, "calls": 40},
                    {"name": "aten::empty_like", "self_ms": 0.4, "calls": 40},
                    {"name": "aten::contiguous", "self_ms": 0.1, "calls": 40}],
        "reference_top_ops": [{"name": "aten::relu", "self_ms": 4.9, "calls": 40},
                              {"name": "aten::clamp_min", "self_ms": 4.7, "calls": 40}]})
    app = EvoKernelApp(StaticSession(tmp_path / "session"), theme_name="dark", watch_file=False)

    async def show(pilot):
        await pilot.pause()
        await app.push_screen(GateDetailScreen(gate))
        await pilot.pause(0.1)

    assert snap_compare(app, terminal_size=size, run_before=show)
