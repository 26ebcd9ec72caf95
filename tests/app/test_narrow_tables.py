"""Issue 34: tables people read at 80 columns. `sessions` keeps every id whole (what `resume` and
`tui --session` take) and `memory list` keeps one line an item, its title cut with an ellipsis."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from core.llm import ScriptedModel
from core.session import Budgets, Session
from core.tasks import load_task
from evokernel_tui.cli import cli
from memory import MemoryStore
from tests.fakes.verdicts import fake_verify, reply

WIDTH = {"COLUMNS": "80", "NO_COLOR": "1"}


def _lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.strip()]


LONG_ID = "20261127-171012-level1_23_softmax_rows_kb-60d5"  # a KernelBench task's slug can be 40 characters


@pytest.mark.parametrize("ids_given", [(None, None), (None, LONG_ID)], ids=["table", "long-id-stacked"])
def test_sessions_at_80_columns_keep_every_id_whole(tmp_path, ids_given):
    root = tmp_path / "sessions"
    ids = []
    for task, sid in zip(("softmax_rows", "relu"), ids_given, strict=True):
        s = Session.create(load_task(task), model=ScriptedModel([reply("feasible", 0.5)],
                                                                 name="openrouter/anthropic/claude-sonnet-4.5"),
                           root=root, verify_fn=fake_verify, budgets=Budgets(draft_steps=1, refine_steps=0),
                           session_id=sid)
        s.run()
        s.close()
        ids.append(s.id)
    res = CliRunner().invoke(cli, ["sessions", "--sessions-dir", str(root)], env=WIDTH, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    lines = _lines(res.output)
    assert max(len(line) for line in lines) <= 80
    for sid in ids:
        assert any(line.split()[0] == sid for line in lines), (sid, res.output)
    assert "$0.0000" in res.output and "2.00x" in res.output  # figures are never cut either


def test_memory_list_at_80_columns_is_one_line_an_item(tmp_path):
    path = tmp_path / "memory.json"
    store = MemoryStore(path, fsync=False)
    ids = sorted(i.id for i in store.items(None))
    store.close()
    res = CliRunner().invoke(cli, ["memory", "--memory", str(path), "list", "--limit", "8"], env=WIDTH,
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rows = [line for line in _lines(res.output) if line.startswith(("seed-", "traj-", "ins-"))]
    assert len(rows) == 8 and max(len(line) for line in _lines(res.output)) <= 80
    assert all(row.split()[0] in ids for row in rows)  # ids whole: `memory show ID` takes them as printed
    assert any("…" in row for row in rows)  # long titles are cut, not wrapped over lines


# ----- the app's versions (latency history) table at 80×24 ------------------------------------------------

def _history_rows():
    from evokernel_tui.screens.versions import VersionRow

    return [VersionRow(1, "model", "draft", "verifier_error", None, None, None, None, "", "a"),
            VersionRow(2, "model", "draft", "feasible", 1.25, 0.03125, 412, 1.6, "best · accepted (person)", "b",
                       noisy=True),
            VersionRow(3, "person", "refine", "feasible", 1.3125, 0.05, 398, 1.53, "rejected (person)", "c"),
            VersionRow(4, "model", "refine", "feasible", 0.9844, 0.02, 1455, 2.04, "accepted (loop)", "d")]


def _table_lines(table) -> list[str]:
    return [table.render_line(y).text for y in range(table.row_count + 1)]


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_history_table_keeps_every_figure_and_decision_whole(tmp_path, size):
    from support import StaticSession
    from textual.widgets import DataTable, Label

    from evokernel_tui.app import EvoKernelApp
    from evokernel_tui.screens.detail import TextModal
    from evokernel_tui.screens.versions import VersionsScreen

    rows = _history_rows()
    app = EvoKernelApp(StaticSession(tmp_path / "session"), theme_name="dark", watch_file=False)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await app.push_screen(VersionsScreen(rows, "b"))
        await pilot.pause(0.1)
        table = app.screen.query_one(DataTable)
        lines = _table_lines(table)
        header, body = lines[0], lines[1:]
        assert all(len(line.rstrip()) <= table.content_region.width for line in lines)
        labels = [str(c.label) for c in table.columns.values()]
        assert " ".join(header.split()) == " ".join(labels)  # every column on screen, none past the edge
        for row, line in zip(rows, body, strict=True):
            cells = dict(zip((str(c.label) for c in table.columns.values()), (str(c) for c in table.get_row_at(rows.index(row))), strict=True))
            for name in ("v", "author", "outcome", "ms", "IQR ms", "speedup", "status"):
                assert cells[name] in line, (name, cells[name], line)  # every cell whole on screen
        status = [str(table.get_row_at(i)[-1]) for i in range(len(rows))]
        if size == (80, 24):
            assert status == ["", "best ✓ person", "✗ person", "✓ loop"]
            assert "≈1.60×" in body[1] and "0.03125" in body[1] and "1.312" in body[2]
            title = str(app.screen.query_one(".modal-title", Label).render())
            assert "enter: source, diff vs best, stage, runs" in title and title.rstrip().endswith("esc: close")
            table.move_cursor(row=1)
            await pilot.press("enter")
            await pilot.pause()
            assert isinstance(app.screen, TextModal)
            # the version's own view names what the narrow table left out, and the speedup marked noisy
            assert str(app.screen.query_one(".modal-title", Label).render()) == \
                "v2 · model · draft · feasible · 412 runs · ≈1.60× noisy"
        else:
            assert "stage" in header and "runs" in header


def test_bench_summary_headers_whole_at_80_columns():
    """Issue 34: at 80 columns the bench summary cut its headers to `compi…`, `fast_…` (fast_1.5 or
    fast_2?), `rejec…`: every header and figure is whole."""
    from rich.console import Console

    from core.bench.records import TaskOutcome
    from evokernel_tui.commands.bench import TABLE_HEADERS, summary_table

    outcomes = [TaskOutcome(f"task_{i}", level, compiled=True, feasible=True, speedup=12.5 + i, first_feasible_ms=2.0,
                            best_ms=1.0).to_dict() for i, level in enumerate((1, 2, 3))]
    console = Console(width=80, record=True)
    console.print(summary_table({"outcomes": outcomes}, "Bench run"))
    text = console.export_text()
    assert "…" not in text, text
    header = next(line for line in text.splitlines() if line.startswith("level"))
    assert header.split() == list(TABLE_HEADERS)
    assert all(len(line) <= 80 for line in text.splitlines())
