"""A spare CUDA worker does the slow start of every CUDA job (context, torch._dynamo, the extension
builder's modules) while it waits for its job; CPU and interpreter workers are started as before."""

from __future__ import annotations

import dataclasses
import sys

import pytest

from verifier import VerifyConfig
from verifier.backends import get_backend


@pytest.fixture
def started(monkeypatch, tmp_path):
    import verifier.workers.pools as workers  # where `_start_candidate` looks its names up

    argvs = []

    class Recorder:
        def __init__(self, argv, job_dir, limits, env, spec=None, fd_socket=False):
            argvs.append(argv)

    monkeypatch.setattr(workers, "LiveJob", Recorder)
    monkeypatch.setattr(workers, "exec_watch_on", lambda: False)  # the argv is what is looked at: no listener to take
    monkeypatch.setattr(workers, "_new_run_dir", lambda: tmp_path / f"run{len(argvs)}")
    config = VerifyConfig(build_root=str(tmp_path / "root"))

    def start(be, wait=True):
        (tmp_path / f"run{len(argvs)}").mkdir()
        workers._start_candidate(config, be, isolated=False, wait=wait)
        return argvs[-1]

    return start


def test_only_a_waiting_cuda_spare_is_warmed(started):
    cpu = get_backend("cpu")
    cuda_like = dataclasses.replace(cpu, device="cuda")
    assert "--warm-cuda" not in started(cpu)
    assert "--warm-cuda" in started(cuda_like) and "--wait" in started(cuda_like)
    assert "--warm-cuda" not in started(cuda_like, wait=False), "a job started for now has its job already"


def test_warming_never_raises(monkeypatch):
    import torch

    from verifier.workers import harness

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)

    def broken_init():
        raise RuntimeError("no CUDA driver")

    monkeypatch.setattr(torch.cuda, "init", broken_init)
    harness._warm_cuda()  # the job meets the same failure later and reports it
    assert "torch._dynamo" in sys.modules and "torch.utils.cpp_extension" in sys.modules
