"""The device-memory plan of a GPU verification, refused up front in one line when the card cannot hold it
(core.tasks.device_memory_plan / device_memory_refusal / check_device_memory)."""

from __future__ import annotations

import pytest

import core.device
from core.tasks import (
    MemoryEstimate,
    TaskError,
    check_device_memory,
    device_memory_plan,
    device_memory_refusal,
    load_task,
)

GIB = 1024**3


def _relu_head() -> MemoryEstimate:
    """KernelBench level1/19 at head size: 6.4 GB in, 6.4 GB out, no weights."""
    n = 4096 * 393216 * 4
    return MemoryEstimate(bytes=2 * n, weights_bytes=0, inputs_bytes=n, peak_bytes=n, outputs_bytes=n, inputs=[],
                          outputs=[])


def test_the_plan_counts_both_processes_and_the_staged_results():
    plan = device_memory_plan(_relu_head())
    n = 4096 * 393216 * 4
    assert plan["reference"] == 2 * n + int(1.5 * GIB)
    assert plan["candidate"] == 4 * n + int(1.5 * GIB)  # its run and the run's results staged for the check
    assert plan["total"] == plan["reference"] + plan["candidate"]
    assert 38 * GIB < plan["total"] < 40 * GIB  # well inside an 80 GB H100, which measured a ~90 GB peak before


def test_a_card_without_room_is_refused_naming_the_estimate_and_the_card():
    assert device_memory_refusal("relu_head", _relu_head(), "NVIDIA H100 80GB HBM3", 79 * GIB) is None
    line = device_memory_refusal("relu_head", _relu_head(), "NVIDIA H100 80GB HBM3", 20 * GIB)
    assert line is not None and "\n" not in line
    assert "relu_head" in line and "NVIDIA H100 80GB HBM3" in line and "20.0 GiB free" in line
    assert "38." in line or "39." in line


def test_the_check_reads_the_card_now_and_raises_one_line(monkeypatch, tmp_path):
    task_file = tmp_path / "t.py"
    task_file.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
                         "def get_inputs():\n    return [torch.rand(4)]\ndef get_init_inputs():\n    return []\n")
    task = load_task(str(task_file))
    monkeypatch.setattr(core.device, "gpu_free_bytes", lambda: ("NVIDIA H200", 2 * GIB))
    with pytest.raises(TaskError, match="NVIDIA H200 has 2.0 GiB free"):
        check_device_memory(task, _relu_head())
    monkeypatch.setattr(core.device, "gpu_free_bytes", lambda: None)  # no nvidia-smi: nothing to say here
    check_device_memory(task, _relu_head())


def test_draft_and_the_app_refuse_a_card_without_room_before_anything_is_spent(monkeypatch, tmp_path):
    """`draft` (check_task_size) and the app's memory check refuse on a GPU backend in one line; the CPU
    backend never asks the card."""
    import click

    from evokernel_tui.cli import check_task_size
    from evokernel_tui.commands.tui import _memory_check

    task_file = tmp_path / "wide.py"
    task_file.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"
                         "def get_inputs():\n    return [torch.rand(4096, 4096)]\ndef get_init_inputs():\n    return []\n")
    task = load_task(str(task_file))
    asked = []
    monkeypatch.setattr(core.device, "gpu_free_bytes", lambda: asked.append(1) or ("NVIDIA H100", 64 * 1024**2))
    with pytest.raises(click.ClickException, match="NVIDIA H100 has 64.0 MiB free"):
        check_task_size(task, 8, backend="cuda")
    with pytest.raises(TaskError, match="device memory"):
        _memory_check(task, 8, "--memory-gb", "triton")
    asked.clear()
    check_task_size(task, 8, backend="cpu")
    assert "fits" in _memory_check(task, 8, "--memory-gb", "cpu") and not asked


def test_bench_skips_a_task_no_card_of_the_machine_could_hold(monkeypatch, tmp_path):
    """`bench` runs many tasks over the machine's GPUs: it skips, with the plan and the smallest card's total
    in one line, a task whose verification no card could hold even empty (not the free memory now: other
    verifications come and go on the cards); the CPU backend never asks."""
    from core.bench.selection import reference_skip_reason

    task_file = tmp_path / "wide.py"
    task_file.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"
                         "def get_inputs():\n    return [torch.rand(4096, 4096)]\ndef get_init_inputs():\n    return []\n")
    task = load_task(str(task_file))
    asked = []
    monkeypatch.setattr(core.device, "gpu_total_bytes", lambda: asked.append(1) or ("NVIDIA T4", 64 * 1024**2))
    why = reference_skip_reason(task, 8.0, backend="cuda")
    assert why is not None and "NVIDIA T4 has 64.0 MiB in all" in why and "\n" not in why
    assert asked and reference_skip_reason(task, 8.0, backend="cpu") is None and len(asked) == 1
    monkeypatch.setattr(core.device, "gpu_total_bytes", lambda: ("NVIDIA H100 80GB HBM3", 80 * GIB))
    assert reference_skip_reason(task, 8.0, backend="cuda") is None
