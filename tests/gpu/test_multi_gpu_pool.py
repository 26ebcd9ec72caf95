"""Issue 36 on a machine with two or more GPUs: the process pool pins one worker to each GPU, and each
verdict names the card it was measured on as the worker saw it (its CUDA_VISIBLE_DEVICES entry and UUID)."""

from __future__ import annotations

import pytest

from tests.gpu.conftest import CANDIDATES, task_source

pytestmark = pytest.mark.gpu


def test_pool_verifies_on_each_gpu_and_names_the_card(gpu_config):
    from core.executors import ProcessPoolExecutor, detect_gpus, verify_job

    gpus = detect_gpus()
    if len(gpus) < 2:
        pytest.skip(f"needs two GPUs, {len(gpus)} visible")
    gpus = gpus[:2]
    source = (CANDIDATES / "cuda" / "relu.py").read_text()
    with ProcessPoolExecutor(2, gpus=gpus) as pool:
        results = pool.map(verify_job, [task_source("relu")] * 4, [source] * 4, ["cuda"] * 4, [gpu_config] * 4)
    assert all(r.outcome == "feasible" for r in results), [(r.outcome, r.notes) for r in results]
    cards = {r.device_id for r in results}
    assert {c.split(" (")[0] for c in cards} == {f"GPU {g}" for g in gpus}, cards   # both GPUs, by their own ids
    assert len({c.split(" (")[-1] for c in cards}) == 2, cards                      # two distinct UUIDs
