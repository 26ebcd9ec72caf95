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
