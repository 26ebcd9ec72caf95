"""GPU test fixtures. Tests marked `gpu` skip cleanly where torch sees no CUDA device (CI)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CANDIDATES = Path(__file__).resolve().parents[1] / "candidates"


def _has_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config, items):
    if _has_gpu():
        return
    skip = pytest.mark.skip(reason="no CUDA GPU visible to torch")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def gpu_config(shared_build_root):
    """The run's one build root (`EVOKERNEL_TEST_BUILD_DIR` when set); EVK_GPU_BUILD_ROOT shares builds
    with benchmarks/gpu_bench.py."""
    from verifier import VerifyConfig

    root = os.environ.get("EVK_GPU_BUILD_ROOT") or str(shared_build_root)
    fresh = {"use_cache": False} if "use_cache" in VerifyConfig.__dataclass_fields__ else {}
    return VerifyConfig(build_root=root, **fresh)


def task_source(name: str) -> str:
    from core.tasks import load_task

    return load_task(name).source
