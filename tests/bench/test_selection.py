"""Which tasks a bench runs, and in what order."""

from __future__ import annotations

import pytest

from core.bench import BenchError, parse_levels, parse_names, select_tasks
from core.tasks import builtin_index, load_task


def test_builtin_levels_and_order():
    every = select_tasks()
    assert len(every) == len(builtin_index())
    assert [t.level for t in every] == sorted(t.level for t in every)
    l2 = select_tasks(levels=[2])
    assert l2 and {t.level for t in l2} == {2}
    assert [t.name for t in l2] == [m.name for m in builtin_index() if m.level == 2]


def test_names_keep_suite_order_and_unknown_names_fail():
    assert [t.name for t in select_tasks(names=["gemm_bias_relu", "relu"])] == ["relu", "gemm_bias_relu"]
    with pytest.raises(BenchError, match="unknown task.*nosuch"):
        select_tasks(names=["relu", "nosuch"])
    with pytest.raises(BenchError, match="no tasks selected"):
        select_tasks(levels=[9])


def test_parse_helpers():
    assert parse_levels("2,1, 2") == [1, 2]
    assert parse_levels("") is None
    with pytest.raises(BenchError, match="numbers separated by commas"):
        parse_levels("one")
    assert parse_names(["a,b", " c "]) == ["a", "b", "c"]


def _kernelbench(tmp_path):
    relu, gelu, gemm = (load_task(n).source for n in ("relu", "gelu", "gemm_bias_relu"))
    (tmp_path / "KernelBench" / "level1").mkdir(parents=True)
    (tmp_path / "KernelBench" / "level2").mkdir()
    (tmp_path / "KernelBench" / "level1" / "10_GELU.py").write_text(gelu)
    (tmp_path / "KernelBench" / "level1" / "2_ReLU.py").write_text(relu)
    (tmp_path / "KernelBench" / "level2" / "1_Gemm_Bias_ReLU.py").write_text(gemm)
    return tmp_path


def test_kernelbench_checkout_by_level_then_problem_number(tmp_path):
    root = _kernelbench(tmp_path)
    assert [(t.name, t.level) for t in select_tasks(kernelbench=root)] == [
        ("2_ReLU", 1), ("10_GELU", 1), ("1_Gemm_Bias_ReLU", 2)]
    assert [t.name for t in select_tasks(kernelbench=root, levels=[1], names=["10"])] == ["10_GELU"]
    with pytest.raises(BenchError, match="no KernelBench problems"):
        select_tasks(kernelbench=root, levels=[3])


def test_folder_suite_and_missing_folder(tmp_path):
    (tmp_path / "level2").mkdir()
    (tmp_path / "level2" / "b.py").write_text(load_task("gelu").source)
    (tmp_path / "a.py").write_text(load_task("relu").source)
    assert [(t.name, t.level) for t in select_tasks(str(tmp_path))] == [("a", 1), ("b", 2)]
    with pytest.raises(BenchError, match="no such folder"):
        select_tasks(str(tmp_path / "missing"))
    (tmp_path / "broken.py").write_text("x = 1\n")
    with pytest.raises(BenchError, match="no `Model` class"):
        select_tasks(str(tmp_path))
