"""Task layer: built-in suite, loading (name, path, KernelBench dir), child-process validation."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from core.tasks import (
    BUILTIN_DIR,
    CATEGORIES,
    Task,
    TaskError,
    TaskInfo,
    builtin_index,
    builtin_tasks,
    check_task_source,
    forward_arg_names,
    load_task,
    task_signature_text,
    validate_task,
)
from evokernel_tui.cli import cli

REPO = Path(__file__).resolve().parents[2]

GOOD = textwrap.dedent(
    '''
    """Adds one to a vector."""
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def __init__(self, offset):
            super().__init__()
            self.offset = offset

        def forward(self, x):
            return x + self.offset


    def get_inputs():
        return [torch.randn(8, 16)]


    def get_init_inputs():
        return [1.0]
    '''
)


def _variant(old: str, new: str) -> str:
    assert old in GOOD
    return GOOD.replace(old, new)


def _task(source: str, name: str = "bad") -> Task:
    return Task(name=name, level=1, category="other", description="", source=source, path=None)


def _one_line_error(excinfo: pytest.ExceptionInfo) -> str:
    message = str(excinfo.value)
    assert "\n" not in message and message.strip() == message and message
    assert "Traceback" not in message
    return message


# --- built-in suite --------------------------------------------------------------------------


def test_index_matches_task_files():
    index = builtin_index()
    names = [m.name for m in index]
    assert len(names) == len(set(names)) >= 24
    files_on_disk = {p.name for p in BUILTIN_DIR.glob("*.py")} - {"__init__.py"}
    assert {m.file for m in index} == files_on_disk
    for meta in index:
        assert re.fullmatch(r"[a-z][a-z0-9_]*", meta.name), meta.name
        assert meta.file == f"{meta.name}.py"
        assert meta.level in (1, 2, 3)
        assert meta.category in CATEGORIES
        assert meta.description and "\n" not in meta.description
    assert {m.level for m in index} == {1, 2, 3}
    assert sum(m.level == 1 for m in index) >= 10 and sum(m.level == 2 for m in index) >= 5


def test_every_builtin_parses_with_required_names():
    tasks = builtin_tasks()
    assert [t.name for t in tasks] == [m.name for m in builtin_index()]
    for task in tasks:
        tree = check_task_source(task.source, task.name)
        assert forward_arg_names(tree), f"{task.name}: forward takes no named inputs"
        assert task.path and Path(task.path).is_file()


def test_builtin_sources_do_not_use_randomness_outside_inputs_and_init():
    # shapes must be deterministic: no random sizes drawn at import time
    for task in builtin_tasks():
        assert "random." not in task.source and "randint(" not in task.source, task.name


@pytest.mark.parametrize(
    ("name", "signature", "out_shape"),
    [
        ("relu", "x: 2048x4096 f32", [2048, 4096]),
        ("scale_add", "x: 1024x4096 f32; y: 1024x4096 f32", [1024, 4096]),
        ("gemm_bias_relu", "x: 512x1024 f32", [512, 1024]),
        ("argmax_rows", "x: 1024x4096 f32", [1024]),
    ],
)
def test_validate_builtin_reports_shapes(name, signature, out_shape):
    task = load_task(name)
    info = validate_task(task)
    assert task_signature_text(task, info) == signature
    assert info.output_shape == out_shape
    assert info.reference_ms is not None and info.reference_ms > 0
    assert TaskInfo.from_dict(json.loads(json.dumps(info.to_dict()))) == info


def test_argmax_output_dtype_is_int64():
    info = validate_task(load_task("argmax_rows"))
    assert info.outputs[0].dtype == "int64"


def test_validate_counts_parameters():
    info = validate_task(load_task("gemm_bias_relu"))
    assert info.parameters == 1024 * 1024 + 1024
    assert info.init_args == ["1024", "1024"]


# --- loading ---------------------------------------------------------------------------------


def test_load_builtin_by_name_round_trips():
    task = load_task("softmax_rows")
    assert (task.name, task.level, task.category) == ("softmax_rows", 1, "softmax")
    assert "class Model" in task.source
    assert Task.from_dict(json.loads(json.dumps(task.to_dict()))) == task


def test_load_task_from_path(tmp_path):
    path = tmp_path / "add_one.py"
    path.write_text(GOOD)
    task = load_task(str(path))
    assert task.name == "add_one"
    assert task.path == str(path)
    assert task.description == "Adds one to a vector"
    assert task.source == GOOD


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        (None, "no task given"),
        ("   ", "no task given"),
        ("definitely_not_a_task", "unknown task 'definitely_not_a_task'"),
    ],
)
def test_load_task_bad_spec(spec, needle):
    with pytest.raises(TaskError) as excinfo:
        load_task(spec)
    assert needle in _one_line_error(excinfo)


def test_load_task_directory_is_rejected(tmp_path):
    with pytest.raises(TaskError) as excinfo:
        load_task(str(tmp_path))
    assert "is a directory" in _one_line_error(excinfo)


def test_load_task_checks_statically_without_running(tmp_path):
    marker = tmp_path / "ran"
    path = tmp_path / "sneaky.py"
    path.write_text(f"open({str(marker)!r}, 'w').close()\n" + GOOD.replace("def get_inputs", "def get_stuff"))
    with pytest.raises(TaskError) as excinfo:
        load_task(str(path))
    assert "get_inputs()" in _one_line_error(excinfo)
    assert not marker.exists()


def _kernelbench(tmp_path: Path, nested: bool = False) -> Path:
    root = tmp_path / "kb"
    level_dir = root / ("KernelBench" if nested else "") / "level1"
    level_dir.mkdir(parents=True)
    (level_dir / "23_Softmax.py").write_text(load_task("softmax_rows").source)
    (level_dir / "19_ReLU.py").write_text(load_task("relu").source)
    return root


@pytest.mark.parametrize("nested", [False, True])
def test_load_kernelbench_problem(tmp_path, nested):
    root = _kernelbench(tmp_path, nested)
    task = load_task(kernelbench=root, level=1, problem=23)
    assert (task.name, task.level, task.category) == ("23_Softmax", 1, "softmax")
    assert task.path.endswith("23_Softmax.py")
    relu = load_task(kernelbench=str(root), level=1, problem=19)
    assert relu.category == "activation"


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"level": 1, "problem": 2}, "no problem 2 in"),
        ({"level": 1, "problem": 99}, "looked for 99_*.py"),
        ({"level": 2, "problem": 1}, "no level2 folder"),
        ({"level": 1}, "needs both a level and a problem"),
    ],
)
def test_load_kernelbench_missing(tmp_path, kwargs, needle):
    root = _kernelbench(tmp_path)
    with pytest.raises(TaskError) as excinfo:
        load_task(kernelbench=root, **kwargs)
    assert needle in _one_line_error(excinfo)


def test_load_kernelbench_missing_dir(tmp_path):
    with pytest.raises(TaskError) as excinfo:
        load_task(kernelbench=tmp_path / "nowhere", level=1, problem=1)
    assert "does not exist" in _one_line_error(excinfo)


def test_load_kernelbench_and_spec_together(tmp_path):
    with pytest.raises(TaskError) as excinfo:
        load_task("relu", kernelbench=_kernelbench(tmp_path), level=1, problem=19)
    assert "not both" in _one_line_error(excinfo)


# --- bad tasks -------------------------------------------------------------------------------

STATIC_BAD = [
    ("syntax", _variant("return x + self.offset", "return x +"), "syntax error at line 13"),
    ("no_model", _variant("class Model(", "class Net("), "no `Model` class"),
    ("no_forward", _variant("def forward(self, x)", "def run(self, x)"), "no forward method"),
    ("no_get_inputs", _variant("def get_inputs", "def make_inputs"), "no `get_inputs()`"),
    ("no_get_init", _variant("def get_init_inputs", "def init_inputs"), "no `get_init_inputs()`"),
]

RUNTIME_BAD = [
    (
        "get_inputs_raises",
        _variant("return [torch.randn(8, 16)]", "raise ValueError('no data today')"),
        "get_inputs() raised ValueError: no data today (line 17)",
    ),
    (
        "not_tensor",
        _variant("return [torch.randn(8, 16)]", "return [torch.randn(8, 16), 3]"),
        "get_inputs() item 1 is int, not a torch.Tensor",
    ),
    (
        "not_list",
        _variant("return [torch.randn(8, 16)]", "return torch.randn(8, 16)"),
        "get_inputs() returned Tensor; it must return a list",
    ),
    (
        "wrong_init_args",
        _variant("return [1.0]", "return [1.0, 2.0]"),
        "Model(*get_init_inputs()) failed with TypeError",
    ),
    (
        "init_raises",
        _variant("self.offset = offset", "self.offset = offset / 0"),
        "Model(*get_init_inputs()) failed with ZeroDivisionError",
    ),
    (
        "forward_fails",
        _variant("return x + self.offset", "return x @ torch.ones(3, 3)"),
        "Model.forward(*get_inputs()) raised RuntimeError",
    ),
    (
        "forward_not_tensor",
        _variant("return x + self.offset", "return 'nope'"),
        "Model.forward returned str; it must return a tensor",
    ),
    (
        "import_fails",
        _variant("import torch.nn as nn", "import torch.nn as nn\nimport not_a_real_module_xyz"),
        "importing the task file raised ModuleNotFoundError",
    ),
    (
        "crash",
        _variant("return [torch.randn(8, 16)]", "import os; os._exit(3)"),
        "crashed the probe process (exit 3)",
    ),
]


@pytest.mark.parametrize(("label", "source", "needle"), STATIC_BAD, ids=[c[0] for c in STATIC_BAD])
def test_static_problems_are_one_line_errors(label, source, needle, monkeypatch):
    def no_child(*args, **kwargs):
        raise AssertionError("static problems must be caught before running a child process")

    monkeypatch.setattr(subprocess, "run", no_child)
    with pytest.raises(TaskError) as excinfo:
        validate_task(_task(source, label))
    message = _one_line_error(excinfo)
    assert needle in message and label in message


@pytest.mark.parametrize(("label", "source", "needle"), RUNTIME_BAD, ids=[c[0] for c in RUNTIME_BAD])
def test_runtime_problems_are_one_line_errors(label, source, needle):
    with pytest.raises(TaskError) as excinfo:
        validate_task(_task(source, label))
    message = _one_line_error(excinfo)
    assert needle in message and label in message


def test_good_custom_task_validates():
    info = validate_task(_task(GOOD, "good"))
    assert task_signature_text(_task(GOOD), info) == "x: 8x16 f32"
    assert info.init_args == ["1.0"]


def test_timeout_is_reported():
    source = _variant("return [torch.randn(8, 16)]", "import time; time.sleep(60)")
    with pytest.raises(TaskError) as excinfo:
        validate_task(_task(source, "slow"), timeout_s=4)
    assert "did not finish within 4s" in _one_line_error(excinfo)


def test_task_printing_to_stdout_does_not_confuse_the_probe():
    source = _variant("return [torch.randn(8, 16)]", "print('{not json'); return [torch.randn(8, 16)]")
    assert validate_task(_task(source, "chatty")).inputs[0].shape == [8, 16]


# --- `evokernel tasks` -----------------------------------------------------------------------


def test_tasks_command_table_lists_every_task():
    result = CliRunner().invoke(cli, ["tasks"], terminal_width=160)
    assert result.exit_code == 0, result.output
    for meta in builtin_index():
        assert meta.name in result.output
    assert "category" in result.output


def test_tasks_command_json_and_level_filter():
    result = CliRunner().invoke(cli, ["tasks", "--json", "--level", "2"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    expected = [m for m in builtin_index() if m.level == 2]
    assert [r["name"] for r in rows] == [m.name for m in expected]
    assert set(rows[0]) == {"name", "level", "category", "description"}
    assert all(r["level"] == 2 for r in rows)


def test_tasks_command_rejects_bad_level():
    result = CliRunner().invoke(cli, ["tasks", "--level", "7"])
    assert result.exit_code != 0
    assert "Traceback" not in result.output and "--level" in result.output


def test_tasks_command_does_not_import_torch():
    code = (
        "import sys\n"
        "from evokernel_tui.cli import cli\n"
        "cli.main(['tasks', '--json'], standalone_mode=False)\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)) == len(builtin_index())
