"""Starter kernels: every built-in task gets a ModelNew that mirrors its signatures and passes the static gate."""

from __future__ import annotations

import ast

import pytest

from core.starter import starter_kernel
from core.tasks import builtin_tasks
from verifier.policy.static_scan import scan


def _init_args(source: str, cls: str) -> list[str]:
    tree = ast.parse(source)
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    init = next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
    return [a.arg for a in init.args.args][1:] if init else []


@pytest.mark.parametrize("backend", ["cpu", "cuda", "triton"])
def test_every_builtin_task_has_a_clean_starter(backend):
    for task in builtin_tasks():
        source = starter_kernel(task.name, task.source, backend)
        assert scan(source, backend) == [], (task.name, backend)
        assert _init_args(source, "ModelNew") == _init_args(task.source, "Model"), task.name


def test_starter_names_a_valid_extension_and_function():
    source = starter_kernel("3d-thing", "class Model:\n    def forward(self, a, b):\n        return a\n")
    assert 'name="evk_t_3d_thing"' in source
    tree = ast.parse(source)
    fwd = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "forward")
    assert [a.arg for a in fwd.args.args] == ["self", "a", "b"]
    assert "torch::Tensor t_3d_thing_forward(torch::Tensor a, torch::Tensor b)" in source


def test_manual_session_starts_with_the_starter_and_draft_memories(tmp_path):
    from core.session import Session
    from core.tasks import load_task
    from memory import MemoryStore

    store = MemoryStore(tmp_path / "bank.json")
    session = Session.create(load_task("softmax_rows"), memory=store, root=tmp_path / "sessions")
    assert session.manual
    assert "class ModelNew" in session.current_source
    assert session.kernel_path.read_text() == session.current_source
    assert session.retrieved, "manual mode shows the draft memories from the start"
    from core.events import read_events

    assert "starter" in [e.kind for e in read_events(session.path / "events.jsonl")]
    session.kernel_path.write_text("# the person's unsaved edit\n")
    reopened = Session.open(session.path)
    assert reopened.current_source == session.current_source
    assert session.kernel_path.read_text() == "# the person's unsaved edit\n", "reopening must not overwrite the file"
