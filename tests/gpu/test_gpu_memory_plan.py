"""Issue 33's memory plan on the card: the candidate's harness holds each phase's tensors and no more.

Session 17 (H200) measured the candidate at 3.8-4.7x the problem's inputs and outputs (AvgPool2D head 81.4 GB,
more than an H100 has). Session 19 found why: full copies of every argument in the decoy probes, and a trial's
inputs and outputs kept alive through every later phase (the followed call's raw outputs, a closure's default
argument) so that even `empty_cache` returned nothing; at head size the phases are now 1.0-1.5x.

Written in session 19 after its last device call: first run on a GPU in the next session with device time."""

from __future__ import annotations

import dataclasses

import pytest

from tests.gpu.conftest import CANDIDATES

pytestmark = pytest.mark.gpu

SIDE = 16384  # 1 GiB in, 1 GiB out: the 1 GiB L2 flush buffer is no longer most of a phase


@pytest.mark.alone  # gigabytes on the card: another worker's test would share the driver's memory
def test_the_candidates_phases_hold_the_call_and_no_leftovers(gpu_config):
    from verifier import verify

    task = (CANDIDATES / "kernelbench_head" / "relu_8192.py").read_text().replace("8192", str(SIDE))
    assert str(SIDE) in task
    config = dataclasses.replace(gpu_config, l2_flush_mb=256)
    res = verify(task, (CANDIDATES / "cuda" / "relu.py").read_text(), backend="cuda", config=config)
    assert res.outcome == "feasible", [(g.name, g.reason) for g in res.gates if g.status == "fail"]
    problem_gb = 2 * SIDE * SIDE * 4 / 1e9
    flush_gb = 256 * 1024**2 / 1e9
    phases = res.device_peak_phases_gb["candidate"]
    assert {"trials", "profile", "rounds"} <= set(phases), phases
    # trials: the call's inputs and outputs (the staging copy is exported memory, outside the allocator);
    # profile: the same; rounds: inputs, outputs and the kept copy, plus the flush buffer. Before session 19
    # every phase carried the last trial's tensors on top (2.4-2.5x at head size)
    for name in ("trials", "profile"):
        assert phases[name] <= 1.8 * problem_gb, (name, phases, problem_gb)
    assert phases["rounds"] <= 1.8 * problem_gb + flush_gb, (phases, problem_gb)
    # the card as the driver saw it from this process: reserved plus the staging buffer, within the plan's 3x
    assert res.device_peak_gb["candidate"] <= 3.0 * problem_gb + flush_gb, (res.device_peak_gb, problem_gb)
