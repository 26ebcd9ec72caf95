"""The task checks at KernelBench's current sizes: run where the verifier will run, and compare through a
crop, so a gigabyte-sized problem does not cost the host tens of gigabytes before anything is verified."""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from core.tasks import Task, TaskError, probe_device, task_degeneracy, validate_task

PROBE = Path(__file__).resolve().parents[2] / "core" / "task_probe.py"


def _probe_module():
    spec = importlib.util.spec_from_file_location("_probe_under_test", PROBE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_crop_keeps_small_tensors_and_thins_big_ones_the_same_way_for_one_shape():
    probe = _probe_module()
    small = torch.arange(12.0).reshape(3, 4)
    assert probe.crop(small) is small
    big = torch.randn(512, 3000)
    a, b = probe.crop(big, limit=1 << 14), probe.crop(big.clone(), limit=1 << 14)
    assert a.numel() <= 1 << 14 and a.dim() == 2 and torch.equal(a, b)
    assert a[0, 0] == big[0, 0] and a[-1, -1] == big[-1, -1]  # evenly spaced, both ends kept
    assert torch.equal(probe.crop(big.relu(), limit=1 << 14), a.relu())  # an elementwise op commutes with it


def test_degeneracy_through_the_crop_matches_the_full_comparison(monkeypatch):
    """ReLU on inputs in [0, 1) is the identity: the input passed through passes, cropped or not."""
    source = textwrap.dedent("""
        import torch
        class Model(torch.nn.Module):
            def forward(self, x):
                return torch.relu(x)
        def get_inputs():
            return [torch.rand(2048, 4096)]  # 8M elements: compared through the crop
        def get_init_inputs():
            return []
    """)
    task = Task(name="relu_rand01", level=1, category="elementwise", description="", source=source)
    full = task_degeneracy(task, "kernelbench", use_cache=False)
    assert full is not None and any("passed through" in f for f in full.found), full
    probe = _probe_module()
    cropped = probe._outputs_np([torch.rand(2048, 4096)])
    assert cropped[0].size <= probe.CROP_ELEMENTS and isinstance(cropped[0], np.ndarray)


def test_probe_device_follows_the_backend():
    assert probe_device("cpu") == "cpu" and probe_device("cuda") == "cuda" and probe_device("triton") == "cuda"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the one-line refusal on a machine without a GPU")
def test_task_checks_on_a_gpu_without_one_are_one_line():
    source = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n" \
             "def get_inputs():\n    return [torch.rand(4, 4)]\ndef get_init_inputs():\n    return []\n"
    with pytest.raises(TaskError, match="torch sees no GPU"):
        validate_task(Task(name="double", level=1, category="elementwise", description="", source=source), device="cuda")
