"""The optional Nsight Compute summary on a real GPU: one forward of an honest kernel under ncu gives a
row per launch with occupancy, DRAM throughput and time, and the refine feedback shows them."""

from __future__ import annotations

import dataclasses
import shutil

import pytest

from tests.gpu.conftest import CANDIDATES, task_source

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize(("backend", "kernel"), [("cuda", "relu_vec4"), ("triton", "relu_kernel")])
def test_ncu_summary_names_the_candidates_kernel(backend, kernel, gpu_config):
    if shutil.which("ncu") is None:
        pytest.skip("ncu (Nsight Compute) is not on PATH")
    from verifier import verify

    config = dataclasses.replace(gpu_config, ncu=True)
    res = verify(task_source("relu"), (CANDIDATES / backend / "relu.py").read_text(), backend=backend, config=config)
    assert res.outcome == "feasible", [(g.name, g.reason) for g in res.gates]
    rows = res.gate("profile").detail.get("ncu")
    assert rows, res.notes
    print(backend, res.gate("profile").detail.get("ncu_seconds"), rows)
    ours = [r for r in rows if kernel in r["kernel"]]
    assert ours, [r["kernel"] for r in rows]
    assert all(r["time_us"] and r["time_us"] > 0 for r in ours)
    assert all(r["occupancy_pct"] is not None and 0 < r["occupancy_pct"] <= 100 for r in ours)
    assert all(r["dram_pct"] is not None and 0 <= r["dram_pct"] <= 100 for r in ours)
    assert "Nsight Compute, one forward" in res.feedback() and kernel in res.feedback()
