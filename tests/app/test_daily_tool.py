"""Issue 14: the app as a kernel engineer's daily tool — the bugs found in use, each driven through Pilot."""

from __future__ import annotations

import asyncio
import io
import threading

from support import kernel, reply
from test_controls import SIZE, app_for, log_text, settle

from evokernel_tui.app import EvoKernelApp
from evokernel_tui.widgets.gate_panel import GatePanel
from verifier.result import GATE_ORDER, GateResult, VerificationResult


def plain(renderable) -> str:
    from rich.console import Console

    console = Console(width=200, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


class CandidateSaysPass:
    """A verify_fn whose candidate reports every phase as passed before the parent's verdict says
    correctness failed: the order in which the real verifier's progress marks and verdict arrive."""

    def __init__(self) -> None:
        self.reported = threading.Event()
        self.release = threading.Event()

    def __call__(self, reference_source, candidate_source, backend="cpu", config=None, on_gate=None):
        for name in ("anti_hacking", "compile", "correctness"):
            on_gate(name, "running")
            on_gate(name, "pass")  # the candidate's own progress report, not a verdict
        self.reported.set()
        self.release.wait(10)
        gates = [GateResult("anti_hacking", "pass", 0.01), GateResult("compile", "pass", 0.5),
                 GateResult("correctness", "fail", 0.2, "max abs error 0.5 at [3]", {"mismatch": "[3]"}),
                 GateResult("latency", "skip", 0.0), GateResult("profile", "skip", 0.0)]
        for g in gates:
            on_gate(g.name, g.status)
        return VerificationResult(backend="cpu", gates=gates, source_hash="x")


async def test_gate_shows_pass_only_once_the_verdict_arrives(make_session):
    s = make_session([reply("incorrect")])
    fake = CandidateSaysPass()
    s.verify_fn = fake
    app = app_for(s)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("s")
        await asyncio.get_running_loop().run_in_executor(None, fake.reported.wait, 10)
        await pilot.pause(0.1)
        panel = app.screen.query_one(GatePanel)
        assert panel.gate("correctness").state == "checking", "a candidate-reported pass is painted as pass"
        assert all(g.state != "pass" for g in panel.gates)
        fake.release.set()
        await settle(app, pilot)
        assert panel.gate("correctness").state == "fail"
        assert panel.gate("compile").state == "pass"
        assert [g.name for g in panel.gates] == list(GATE_ORDER)


async def test_run_stops_at_a_pending_refinement_and_keeps_it(make_session):
    """A faster pending refinement is never silently replaced by a later, slower one."""
    insight = "Fewer passes over memory."  # accepting asks the model to distil an insight
    s = make_session([reply("feasible", 30.0), reply("feasible", 20.4, "faster"), insight, reply("feasible", 32.3, "slower")], draft=2, refine=4)
    app = app_for(s)
    async with app.run_test(size=SIZE) as pilot:
        app.calls.run_steps(3)
        await settle(app, pilot)
        assert s.pending is not None and s.pending.latency_ms == 20.4
        assert s.used["refine"] == 1, "the run went on past a pending refinement"
        text = log_text(app)
        assert "Run stopped after 2 of 3 steps: the refinement v2 (20.4 ms) is pending" in text
        assert "refining from the best kernel v1 (30 ms)" in text
        await pilot.press("s")
        await settle(app, pilot)
        assert s.used["refine"] == 1 and s.pending.version == 2
        assert "A step refused: the refinement v2 (20.4 ms) is pending" in log_text(app)
        await pilot.press("a")
        await settle(app, pilot)
        assert s.best.version == 2 and s.pending is None
        await pilot.press("s")
        await settle(app, pilot)
        assert s.used["refine"] == 2 and s.history[-1].latency_ms == 32.3
        assert s.best.version == 2 and s.pending is None  # 32.3 ms is no improvement on 20.4 ms


async def test_v_at_first_launch_verifies_the_starter(make_session, verifier):
    s = make_session(None)  # manual mode: the starter kernel is on screen, nothing recorded yet
    app = app_for(s)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("escape")  # manual mode starts in the editor
        await pilot.press("v")
        await settle(app, pilot)
        assert "no kernel to verify" not in log_text(app)
        assert len(verifier.calls) == 1 and verifier.calls[0] == s.history[0].source
        assert "Verifying the starter kernel as written" in log_text(app)
        assert s.history[0].author == "seed" and "person's edit" not in log_text(app)
        assert "reward" not in log_text(app) and "no memories credited" in log_text(app)


async def test_a_save_during_a_call_is_queued_with_a_readable_message(make_session, verifier):
    s = make_session([reply("feasible", 1.0)])
    hold = verifier.block()
    app = app_for(s)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("s")
        await asyncio.get_running_loop().run_in_executor(None, verifier.entered.wait, 10)
        app.post_message(app.KernelFileChanged(kernel("feasible", 0.7, "saved meanwhile")))
        await pilot.pause(0.1)
        assert ("Picked up a save of current_kernel.py; it will be verified once the running call (step) "
                "has finished.") in log_text(app)
        hold.set()
        await settle(app, pilot)
        await settle(app, pilot)
        assert any("saved meanwhile" in a.source for a in s.history if a.author == "person")


async def test_export_defaults_to_the_best_feasible_kernel(make_session, tmp_path):
    s = make_session([reply("feasible", 0.5, "best"), reply("compile_fail")])
    app = app_for(s)
    target = tmp_path / "best.py"
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("s")
        await settle(app, pilot)
        from evokernel_tui.widgets.kernel_pane import KernelPane

        pane = app.screen.query_one(KernelPane)
        pane.editor.load_text("this does not build")
        await pilot.press("x")
        await pilot.pause()
        assert "not submitted (ctrl+s); they are not saved" in "\n".join(app.activity.lines)
        assert "the best feasible kernel v1 (0.5 ms)" in str(app.screen.query_one(".modal-title").render())
        app.screen.query_one("#prompt-input").value = str(target)
        await pilot.press("enter")
        await pilot.pause()
        assert target.read_text() == s.best.source and "best" in target.read_text()


async def test_export_warns_when_nothing_passed_yet(make_session, tmp_path):
    s = make_session(None)
    app = app_for(s)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        source, what, warning = app.actions.export_choice()
        assert source == s.current_source and what == "the current kernel"
        assert "No kernel has passed the gates yet" in warning


async def test_quit_with_a_pending_refinement_asks_and_says_how_to_resume(make_session, capsys):
    from evokernel_tui.screens.prompts import ConfirmPrompt

    s = make_session([reply("feasible", 1.0), reply("feasible", 0.5, "faster")])
    app = app_for(s)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("s")
        await settle(app, pilot)
        await pilot.press("s")
        await settle(app, pilot)
        assert s.pending is not None
        await pilot.press("q")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmPrompt), "quit did not ask about the pending refinement"
        await pilot.press("n")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmPrompt) and app.is_running
        await pilot.press("q")
        await pilot.pause()
        await pilot.press("y")
        await pilot.pause()
    message = capsys.readouterr().err.replace("\n", "")  # printed once the screen is gone
    assert f"Session {s.id} saved" in message and f"evokernel tui --session {s.id}" in message
    assert "is still pending" in message


async def test_quit_without_pending_prints_the_session(make_session, capsys):
    s = make_session([])
    app = app_for(s)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("q")
        await pilot.pause()
    assert f"evokernel tui --session {s.id}" in capsys.readouterr().err.replace("\n", "")


def test_compile_summary_numbers_lines_like_the_cpp_view():
    from evokernel_tui.view import GateView
    from evokernel_tui.widgets.gate_panel import cpp_line_label, gate_line

    gate = GateView("compile", "fail", 1.2, "compile error: kernel.cpp:12: error: expected ';' [file line 40]")
    assert "C++ line 12: error: expected ';' [file line 40]" in gate_line(gate, width=120).plain
    assert cpp_line_label("x kernel.cpp:7: warning: y") == "x C++ line 7: warning: y"


def test_a_passing_gate_under_kernelbench_names_the_library_ops_and_their_share():
    """The Gates pane's anti-hacking line says what the kernelbench policy let a library do (issue 23)."""
    from evokernel_tui.view import GateView
    from evokernel_tui.widgets.gate_panel import gate_line

    detail = {"reported": [{"rule": "torch-op", "line": 12, "message": "torch.matmul does the work in torch"}],
              "library_ops": [{"op": "aten::mm", "ms": 1.0, "share": 0.93}, {"op": "aten::add", "ms": 0.01, "share": 0.01}],
              "policy": {"preset": "kernelbench", "allowed": []}}
    line = gate_line(GateView("anti_hacking", "pass", 0.1, "passes under the kernelbench policy, reported: torch-op",
                              detail), width=120).plain
    assert "library: aten::mm 93%, aten::add 1% of forward (kernelbench policy)" in line
    plain = gate_line(GateView("anti_hacking", "pass", 0.1, "", {}), width=120).plain
    assert "library" not in plain and "\n" not in plain, "a clean pass stays one line"
    probes = [{"probe": "magnitude", "name": "inputs x100", "status": "pass"},
              {"probe": "shape", "name": "held-out shapes #1", "status": "refused", "shapes": "509x509"}]
    line = gate_line(GateView("correctness", "pass", 1.0, "", {"probes": probes}), width=120).plain
    assert "probes: inputs x100 pass, shapes 509x509 refused" in line


async def test_starter_is_prebuilt_in_the_background_without_recording(make_session, verifier):
    s = make_session(None)
    app = EvoKernelApp(s, watch_file=False, prebuild_starter=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.prebuild_thread is not None
        app.prebuild_thread.join(10)
        assert verifier.calls == [s.current_source]
        assert not s.history, "the prebuild must not record a version"


async def test_cpp_view_numbers_lines_like_the_diagnostics_and_marks_the_failing_one(make_session, verifier):
    from evokernel_tui.widgets.kernel_pane import KernelPane

    s = make_session(None)
    app = app_for(s)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        app.submit_edit(s.current_source + "\n# verdict: compile_fail\n", "test")
        await settle(app, pilot)
        assert app.view.gates["compile"].state == "fail"
        pane = app.screen.query_one(KernelPane)
        await pilot.press("escape")  # manual mode starts in the editor
        await pilot.press("c")
        await pilot.pause()
        assert pane.show_cpp and not pane.editor.display
        shown = plain(pane.cpp_shown)
        cpp_lines = s.current_source.split('r"""', 1)[1].split('"""', 1)[0].splitlines()
        assert f" 3 ▶ {cpp_lines[2]}" in shown and "└ error: expected ';'" in shown
        assert f" 4   {cpp_lines[3]}" in shown
        assert "-O3 -fopenmp -c kernel.cpp" in shown
        await pilot.press("d")
        await pilot.pause()
        assert pane.show_diff and not pane.show_cpp
        await pilot.press("d")
        await pilot.pause()
        assert pane.editor.display


def test_embedded_cpp_follows_names_lists_and_concatenation():
    from evokernel_tui.widgets.cpp_view import embedded_cpp

    src = (
        'from torch.utils.cpp_extension import load_inline\n'
        'HEAD = "#include <torch/extension.h>\\n"\n'
        'BODY = HEAD + "int f() { return 1; }"\n'
        'ext = load_inline("m", [BODY, "int g();"], functions=["f"], extra_cflags=["-O2"])\n'
    )
    found = embedded_cpp(src)
    assert found.name == "m" and found.functions == ["f"] and found.cflags == ["-O2"]
    assert found.cpp == "#include <torch/extension.h>\nint f() { return 1; }\nint g();"
    built = 'import torch.utils.cpp_extension as c\nX = "".join(["a"])\nc.load_inline(name="m", cpp_sources=X)\n'
    assert embedded_cpp(built).cpp is None  # assembled at run time: not shown as if it were known
    assert embedded_cpp("x = 1\n") is None


def _fake_info():
    from core.tasks import TaskInfo, TensorSpec

    return TaskInfo(inputs=[TensorSpec("x", [2048, 4096], "float32")], outputs=[TensorSpec("out", [2048, 4096], "float32")],
                    init_args=[], reference_ms=48.3, parameters=0, degenerate=[])


async def test_task_view_shows_reference_shapes_tolerance_and_eager_time(make_session, monkeypatch):
    import core.tasks
    from evokernel_tui.screens.task_view import TaskViewScreen

    monkeypatch.setattr(core.tasks, "validate_task", lambda task, timeout_s=60: _fake_info())
    s = make_session([reply("feasible", 0.5)])
    app = app_for(s)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("s")
        await settle(app, pilot)
        await pilot.press("i")
        await pilot.pause()
        assert isinstance(app.screen, TaskViewScreen)
        await settle(app, pilot)
        body = str(app.screen.query_one(".modal-body").render())
        assert "inputs      x: 2048x4096 f32" in body and "outputs     out: 2048x4096 f32" in body
        assert "kernelbench: fp32 atol=rtol=1e-4, fp16/bf16 1e-2, 5 trials" in body
        assert f"{app.view.reference_ms:.4g} ms eager (the verifier's median in this session)" in body
        assert "return torch.relu(x)" in body and "def get_inputs():" in body
        await pilot.press("i")
        await pilot.pause()
        assert not isinstance(app.screen, TaskViewScreen)
        titles = {c.title for c in app.get_system_commands(app.main_screen)}
        assert "Task view" in titles and "Toggle C++ view" in titles


def test_tasks_show_prints_the_task(monkeypatch):
    import json

    from click.testing import CliRunner

    import core.tasks
    from evokernel_tui.cli import cli

    monkeypatch.setattr(core.tasks, "validate_task", lambda task, timeout_s=60: _fake_info())
    res = CliRunner().invoke(cli, ["tasks", "show", "relu"])
    assert res.exit_code == 0, res.output
    assert "x: 2048x4096 f32" in res.stdout and "fp32 atol=rtol=1e-4" in res.stdout and "torch.relu(x)" in res.stdout
    record = json.loads(CliRunner().invoke(cli, ["tasks", "show", "relu", "--json"]).stdout)
    assert record["inputs"] == [{"name": "x", "shape": [2048, 4096], "dtype": "float32"}] and record["atol"] is None  # None: the precision-aware KernelBench rule
    listed = CliRunner().invoke(cli, ["tasks", "--level", "1", "--json"])
    assert listed.exit_code == 0 and "relu" in [r["name"] for r in json.loads(listed.stdout)]
    missing = CliRunner().invoke(cli, ["tasks", "show", "nope"])
    assert missing.exit_code == 1 and "unknown task 'nope'" in missing.stderr


def test_profile_detail_is_a_sorted_table_with_the_kernels_share():
    from evokernel_tui.screens.detail import gate_detail_body
    from evokernel_tui.view import GateView

    gate = GateView("profile", "pass", 0.3, "", {
        "top_ops": [{"name": "aten::empty_like", "self_ms": 1.0, "calls": 10},
                    {"name": "kernel::relu_forward", "self_ms": 3.0, "calls": 10}],
        "reference_top_ops": [{"name": "aten::relu", "self_ms": 4.0, "calls": 10}]})
    text = plain(gate_detail_body(gate))
    assert "top_ops" not in text, "raw JSON of the profile is shown"
    ours, other = text.index("★ kernel::relu_forward"), text.index("aten::empty_like")
    assert ours < other, "not sorted by self time"
    assert "75.0%" in text and "25.0%" in text and "your kernel: 75.0% of the profiled self time" in text
    assert "Reference (eager PyTorch)" in text and "aten::relu" in text


async def test_versions_table_lists_every_version_and_saves_the_best(make_session, tmp_path):
    from textual.widgets import DataTable

    from evokernel_tui.screens.detail import TextModal
    from evokernel_tui.screens.prompts import PathPrompt
    from evokernel_tui.screens.versions import VersionsScreen

    s = make_session([reply("compile_fail"), reply("feasible", 1.0, "first"), reply("feasible", 0.5, "faster")])
    app = app_for(s)
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(3):
            await pilot.press("s")
            await settle(app, pilot)
        await pilot.press("r")
        await settle(app, pilot)
        await pilot.press("h")
        await pilot.pause()
        assert isinstance(app.screen, VersionsScreen)
        table = app.screen.query_one(DataTable)
        rows = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
        assert [r[0] for r in rows] == ["v1", "v2", "v3"]
        assert rows[0][3] == "compile_fail" and rows[0][4] == "-"
        assert rows[1][4] == "1" and rows[1][8].startswith("best") and "accepted (loop)" in rows[1][8]
        assert rows[2][4] == "0.5" and rows[2][8] == "rejected (person)" and rows[2][7] == "2.00×"
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, TextModal) and "diff against the best" in str(app.screen.query_one(".modal-body").render())
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("x")
        await pilot.pause()
        assert isinstance(app.screen, PathPrompt)
        target = tmp_path / "best.py"
        app.screen.query_one("#prompt-input").value = str(target)
        await pilot.press("enter")
        await pilot.pause()
        assert target.read_text() == s.best.source and s.best.version == 2


async def test_manual_mode_starts_in_the_editor_and_ctrl_s_keeps_the_cursor(make_session, verifier):
    from evokernel_tui.widgets.kernel_pane import KernelPane

    s = make_session(None)
    app = app_for(s)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        pane = app.screen.query_one(KernelPane)
        assert app.focused is pane.editor, "manual mode should start in the editor"
        shown = {key: b.binding.description for key, b in app.screen.active_bindings.items() if b.binding.show}
        assert shown.get("escape") == "Leave editor", "no footer hint that esc leaves the editor"
        pane.editor.move_cursor((12, 4))
        pane.editor.insert("# my note\n")
        cursor = pane.editor.cursor_location
        await pilot.press("ctrl+s")
        await settle(app, pilot)
        assert s.history and "# my note" in s.history[-1].source
        assert pane.editor.cursor_location == cursor, "ctrl+s moved the cursor"


async def test_zoom_gives_the_kernel_the_whole_screen_at_80x24(make_session):
    from evokernel_tui.widgets.gate_panel import GatePanel as Gates
    from evokernel_tui.widgets.kernel_pane import KernelPane

    s = make_session([])
    app = app_for(s)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        pane = app.screen.query_one(KernelPane)
        assert pane.size.width < 40
        await pilot.press("z")
        await pilot.pause()
        assert app.screen.maximized is pane and pane.size.width >= 78
        assert app.focused is pane.editor
        await pilot.press("escape")  # leave the editor, then z restores the layout
        await pilot.press("z")
        await pilot.pause()
        assert app.screen.maximized is None and app.screen.query_one(Gates).display


async def test_footer_keeps_the_loop_keys_at_80x24(make_session):
    s = make_session([])
    app = app_for(s)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        app.screen.query_one(GatePanel).focus()
        await pilot.pause()
        from textual.widgets import Footer

        footer = app.screen.query_one(Footer)
        keys = [w for w in footer.query("FooterKey") if w.description != "palette"]
        palette = [w for w in footer.query("FooterKey") if w.description == "palette"]
        assert keys and palette
        right = max(k.region.right for k in keys)
        assert right <= palette[0].region.x, "footer keys run under the palette key at 80 columns"
        labels = {k.description for k in keys}
        assert {"Step", "Run", "Accept", "Reject", "Verify", "Diff", "C++", "Zoom", "Quit"} <= labels


def test_latency_eager_line_follows_each_measurement():
    from evokernel_tui.view import LatencyPoint
    from evokernel_tui.widgets.latency_plot import eager_series, ms_ticks

    points = [LatencyPoint(1, 3.0, True, 4.0), LatencyPoint(2, 2.5, True, None), LatencyPoint(3, 2.0, True, 5.0)]
    assert eager_series(points, 5.0) == ([1.0, 2.0, 3.0], [4.0, 4.0, 5.0])
    values, labels = ms_ticks(2.0, 5.0)
    assert labels[0] == "2 ms" and labels[-1] == "5 ms" and all(label.endswith(" ms") for label in labels)


async def test_textual_theme_picker_and_t_agree_and_both_are_remembered(make_session):
    from evokernel_tui.themes import load_theme_name

    s = make_session([])
    app = app_for(s, theme_name="dark")
    async with app.run_test(size=SIZE) as pilot:
        app.theme = "evokernel-high-contrast"  # what Textual's own theme picker does
        await pilot.pause()
        assert app.theme_name == "high-contrast" and load_theme_name() == "high-contrast"
        await pilot.press("t")  # t continues the cycle from the picked theme
        await pilot.pause()
        assert app.theme == "evokernel-dark" and load_theme_name() == "dark"
        app.theme = "nord"  # a Textual theme that is not ours is remembered too
        await pilot.pause()
        assert load_theme_name() == "nord"
        gates = app.screen.query_one(GatePanel)
        assert gates.get_component_rich_style("gate--fail").color is not None, "gate colours lost in another theme"
    again = app_for(s)
    async with again.run_test(size=SIZE):
        assert again.theme == "nord"


async def test_versions_compare_two_retimes_them_paired(make_session):
    from textual.widgets import Label

    from evokernel_tui.screens.versions import VersionsScreen

    s = make_session([reply("feasible", 1.0, "first"), reply("feasible", 0.5, "faster")])
    calls = []

    def fake_compare(a, b):
        calls.append((a, b))
        return {"speedup": 1.9, "lo": 1.8, "hi": 2.0, "a_ms": 1.0, "b_ms": 0.52, "noisy": False}

    app = app_for(s)
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(2):
            await pilot.press("s")
            await settle(app, pilot)
        await pilot.press("h")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, VersionsScreen) and screen._compare is not None  # wired to the verifier
        screen._compare = fake_compare
        screen.query_one("DataTable").move_cursor(row=0)
        await pilot.press("m")
        screen.query_one("DataTable").move_cursor(row=1)
        await pilot.press("p")
        await settle(app, pilot)
        assert calls == [(s.history[0].source, s.history[1].source)]
        title = str(screen.query_one(".modal-title", Label).render())
        assert "v2 vs v1 (paired re-timing): v2 is 1.90× as fast (95% 1.80–2.00); 1 → 0.52 ms" in title


def test_tasks_shapes_column(monkeypatch):
    import json
    from types import SimpleNamespace

    from click.testing import CliRunner

    import core.tasks
    from core.tasks import TensorSpec
    from evokernel_tui.cli import cli

    def fake_estimates(tasks):
        return [SimpleNamespace(inputs=[TensorSpec("x", [i + 1, 8], "float32")], outputs=[TensorSpec("out", [i + 1], "float32")])
                for i, _ in enumerate(tasks)]

    monkeypatch.setattr(core.tasks, "estimate_many", fake_estimates)
    res = CliRunner().invoke(cli, ["tasks", "--shapes", "--level", "1", "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert rows[0]["inputs"] == ["x: 1x8 f32"] and rows[1]["outputs"] == ["out: 2 f32"]
    assert all(r["level"] == 1 for r in rows)
    table = CliRunner().invoke(cli, ["tasks", "--shapes", "--level", "1"])
    assert "inputs" in table.stdout and "x: 1x8 f32" in table.stdout


async def test_memory_titles_get_the_room_the_pane_has(make_session):
    """At 80×24 the memories pane drops sim and score (Enter shows them) so titles are not cut to 14
    characters; at 120×40 every column shows. A title that does not fit ends in an ellipsis."""
    from evokernel_tui.widgets.memory_table import MemoryTable, columns_for, title_width

    assert [k for k, _ in columns_for(48)] == ["kind", "title", "q1", "q2", "visits"]
    assert [k for k, _ in columns_for(80)][-2:] == ["sim", "score"]
    assert title_width(48, columns_for(48)) >= 20 and title_width(10) == 14
    for size, columns in (((80, 24), 5), ((120, 40), 7)):
        s = make_session(None)  # manual mode retrieves at once
        app = app_for(s)
        async with app.run_test(size=size) as pilot:
            await settle(app, pilot)
            table = app.screen.query_one(MemoryTable)
            assert table.row_count and len(table.columns) == columns, size
            titles = [str(table.get_cell_at((row, 1))) for row in range(table.row_count)]
            full = [m.title for m in table._rows.values()]
            assert max(len(t) for t in titles) >= 20, titles
            for shown, title in zip(titles, full, strict=True):
                assert shown == title or (shown.endswith("…") and title.startswith(shown[:-1])), (shown, title)
        s.close()


def _luminance(color) -> float:
    def channel(c: int) -> float:
        c = c / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    return 0.2126 * channel(color.r) + 0.7152 * channel(color.g) + 0.0722 * channel(color.b)


def _contrast(a, b) -> float:
    hi, lo = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


async def test_light_activity_is_readable_and_high_contrast_keeps_numbers_whole(make_session):
    """The light theme's activity text meets WCAG AA contrast (4.5:1) and is never dim; the high-contrast
    theme marks the stage's Q column without a background, so a `0.52▲.12` cell is not split in two."""
    from evokernel_tui.widgets.activity_log import entry_text
    from evokernel_tui.widgets.memory_table import MemoryTable

    s = make_session(None)
    app = EvoKernelApp(s, watch_file=False, theme_name="light")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        log = app.screen.query_one("#activity-log")
        _, _, background, color = log.colors
        assert _contrast(color, background) >= 4.5, (color, background)
        assert all(not (span.style and "dim" in str(span.style)) for span in entry_text(app.view.activity[0]).spans)
        app.apply_theme("high-contrast")
        await pilot.pause()
        stage = app.screen.query_one(MemoryTable).get_component_rich_style("memory--stage", partial=True)
        assert stage.bgcolor is None and stage.color is not None
    s.close()


async def test_manual_banner_fits_80_columns(make_session):
    from evokernel_tui.widgets.mode_banner import MANUAL_SHORT, MANUAL_TEXT, ModeBanner

    for size, text in (((80, 24), MANUAL_SHORT), ((120, 40), MANUAL_TEXT)):
        s = make_session(None)
        app = app_for(s)
        async with app.run_test(size=size) as pilot:
            await settle(app, pilot)
            banner = app.screen.query_one(ModeBanner)
            assert str(banner.render()) == text and len(text) <= banner.content_size.width, size
        s.close()


async def test_after_zoom_then_escape_letters_reach_the_app_not_the_kernel(make_session):
    """Issue 34: z zooms into the editor; esc leaves it, so the next letters typed are the app's keys
    (t switches the theme, z restores the layout), never text in the kernel."""
    from evokernel_tui.widgets.kernel_pane import KernelPane

    s = make_session([])
    app = app_for(s)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        pane = app.screen.query_one(KernelPane)
        before, theme = pane.editor.text, app.theme
        await pilot.press("z")
        await pilot.pause()
        assert app.focused is pane.editor
        await pilot.press("escape")
        await pilot.pause()
        assert app.focused is not pane.editor
        await pilot.press("t")
        await pilot.pause()
        assert app.theme != theme, "t went somewhere other than the app's theme key"
        await pilot.press("z")
        await pilot.pause()
        assert pane.editor.text == before, "letters typed after esc went into the kernel"
        assert app.screen.maximized is None


def test_gate_detail_is_a_table_with_floats_at_four_significant_figures():
    """Issue 34: `enter` on a gate shows its detail as a table, not raw JSON with 15-digit floats."""
    from evokernel_tui.screens.detail import gate_detail_body
    from evokernel_tui.view import GateView

    gate = GateView("latency", "pass", 1.2, "", {
        "median_ms": 0.123456789012345, "iqr_ms": 0.0123456789,
        "timing": {"lo": 1.23456789, "hi": 4.1, "noisy": False, "threads": 2},
        "rounds": [0.5123456789, 0.61, 0.7], "max_abs": 3.14159265358979e-05})
    text = plain(gate_detail_body(gate))
    assert "{" not in text and "[" not in text and "0.123456789" not in text, text
    assert "0.1235" in text and "0.01235" in text and "3.142e-05" in text
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines() if line.split()}
    assert rows["timing.lo"] == ["1.235"] and rows["timing.noisy"] == ["no"] and rows["timing.threads"] == ["2"]
    assert rows["rounds"] == ["0.5123,", "0.61,", "0.7"]
