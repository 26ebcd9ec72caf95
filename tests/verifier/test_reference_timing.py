"""Reference outputs are cached; reference timings are re-measured once they are older than the TTL."""

from __future__ import annotations

import json

import pytest

from verifier import VerifyConfig
from verifier.api import reference_run
from verifier.backends import get_backend

TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(64, 64)]


def get_init_inputs():
    return []
"""


@pytest.mark.slow
def test_stale_reference_timing_is_measured_again(tmp_path):
    backend = get_backend("cpu")
    config = VerifyConfig(build_root=str(tmp_path), trials=2, min_time_s=0.01, reference_ttl_s=3600)
    first, out_dir = reference_run(TASK, backend, config)
    again, _ = reference_run(TASK, backend, config)
    assert again["times_ms"] == first["times_ms"], "a fresh timing is reused within the TTL"
    assert not (out_dir.parent / "timing.json").exists()

    stale = VerifyConfig(build_root=str(tmp_path), trials=2, min_time_s=0.01, reference_ttl_s=0)
    retimed, out_dir2 = reference_run(TASK, backend, stale)
    assert out_dir2 == out_dir, "the cached outputs are still used"
    timing = json.loads((out_dir.parent / "timing.json").read_text())
    assert retimed["times_ms"] == timing["times_ms"] and retimed["times_ms"] != first["times_ms"]
    assert len(retimed["trials"]) == 2, "the trials come from the cached reference run"
