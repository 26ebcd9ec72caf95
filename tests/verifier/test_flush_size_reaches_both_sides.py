"""The L2 flush before each timed GPU call must be the same size in both processes of a verification.

Session 15 (H200): the candidate's job.json took the backend's default (1 GiB) after the chosen size, so
with `--flush-mb 128` the reference worker flushed 128 MB a call (0.037 ms) and the harness 1 GiB (0.235 ms):
ReLU v0 read 0.055 of KernelBench-style timing, all of the difference charged to the kernel. Checked here
without a GPU: what the trusted side writes for the harness and what it tells the reference worker."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest

from verifier.backends import get_backend
from verifier.clock.gpu_timing import L2_FLUSH_BYTES
from verifier.config import VerifyConfig
from verifier.run.verification import _Run


def _job(tmp_path: Path, backend: str, settings: dict) -> dict:
    import tempfile

    tmp_path = Path(tempfile.mkdtemp(dir=tmp_path))  # a job directory of its own per call
    run = types.SimpleNamespace(job_dir=tmp_path, candidate_source="x = 1\n", ref_side=types.SimpleNamespace(init_seed=7),
                                be=get_backend(backend),
                                config=VerifyConfig(**settings), inner_dir=lambda: Path("/job"))
    _Run.write_job(run)  # type: ignore[arg-type]
    return json.loads((tmp_path / "job.json").read_text())


@pytest.mark.parametrize("backend", ["cuda", "triton"])
def test_the_chosen_flush_reaches_the_harness(tmp_path, backend, monkeypatch):
    monkeypatch.delenv("EVOKERNEL_L2_FLUSH_MB", raising=False)
    assert _job(tmp_path, backend, {"l2_flush_mb": 128})["l2_flush_bytes"] == 128 * 1024**2


@pytest.mark.parametrize("backend", ["cuda", "triton"])
def test_the_environments_flush_reaches_the_harness(tmp_path, backend, monkeypatch):
    monkeypatch.setenv("EVOKERNEL_L2_FLUSH_MB", "256")
    assert _job(tmp_path, backend, {})["l2_flush_bytes"] == 256 * 1024**2


def test_without_a_choice_the_harness_gets_the_backends_default(tmp_path, monkeypatch):
    monkeypatch.delenv("EVOKERNEL_L2_FLUSH_MB", raising=False)
    assert _job(tmp_path, "cuda", {})["l2_flush_bytes"] == L2_FLUSH_BYTES


def test_the_gpu_loop_reaches_both_sides(tmp_path, monkeypatch):
    """`gpu_loop` ("sync" or "async", issue 33's A/B) is chosen by the trusted side for both processes, as the
    flush is; a value it does not know is "sync"."""
    from verifier.clock.paired_calls import gpu_loop_of

    monkeypatch.delenv("EVOKERNEL_GPU_LOOP", raising=False)
    assert _job(tmp_path, "cuda", {})["gpu_loop"] == "sync"
    assert _job(tmp_path, "cuda", {"gpu_loop": "async"})["gpu_loop"] == "async"
    monkeypatch.setenv("EVOKERNEL_GPU_LOOP", "async")
    assert _job(tmp_path, "triton", {})["gpu_loop"] == "async"
    assert gpu_loop_of(VerifyConfig(gpu_loop="fast")) == "sync"
