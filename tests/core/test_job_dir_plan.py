"""The job directory's tmpfs sized from the task's own memory estimate (issue 37): room for what the
verification hands over through it, not a quarter of the memory limit whatever the task."""

from __future__ import annotations

import dataclasses

from core.tasks import JOB_MIN_MB, MemoryEstimate, job_dir_mb, load_task
from core.verifying import with_job_dir
from verifier import VerifyConfig


def _estimate(inputs: int, outputs: int, weights: int = 0) -> MemoryEstimate:
    return MemoryEstimate(bytes=inputs + outputs + weights, weights_bytes=weights, inputs_bytes=inputs, peak_bytes=outputs,
                          outputs_bytes=outputs, inputs=[], outputs=[])


def _probe_result(est: MemoryEstimate) -> dict:
    return {"ok": True, "bytes": est.bytes, "weights_bytes": est.weights_bytes, "inputs_bytes": est.inputs_bytes,
            "peak_bytes": est.peak_bytes, "outputs_bytes": est.outputs_bytes, "inputs": [], "outputs": []}


def test_the_plan_follows_what_the_task_hands_over():
    from verifier.sandbox.job_mount import job_bytes

    small = job_dir_mb(_estimate(32 << 20, 32 << 20))  # relu 2048x4096
    big = job_dir_mb(_estimate(1 << 30, 1 << 30))  # 1 GiB in, 1 GiB out
    tiny = job_dir_mb(_estimate(4096, 4096))
    assert JOB_MIN_MB <= tiny <= small < big
    assert small * 1024**2 < job_bytes(8.0)  # a small task's candidate can fill less host memory than before
    # a task with large outputs gets the room of three trials' inputs and outputs (the old cap could not hold them)
    assert big * 1024**2 >= 3 * (2 << 30) > job_bytes(8.0)
    assert job_dir_mb(_estimate(32 << 20, 32 << 20, weights=1 << 30)) >= small + 1024  # weights are handed over too
    assert all(mb % 256 == 0 for mb in (tiny, small, big))


def test_a_known_estimate_sizes_a_copy_of_the_config(monkeypatch):
    import core.tasks

    relu = load_task("relu")
    est = _estimate(32 << 20, 32 << 20)
    monkeypatch.setattr(core.tasks, "_read_estimate", lambda task: _probe_result(est) if task.source == relu.source else None)
    config = VerifyConfig(memory_gb=8.0)
    sized = with_job_dir(config, relu)
    assert sized is not config and config.job_dir_mb is None  # one config serves many tasks in a bench
    assert sized.job_dir_mb == job_dir_mb(est)
    assert dataclasses.replace(sized, job_dir_mb=None) == config
    assert with_job_dir(config, relu.source).job_dir_mb == job_dir_mb(est)  # by the source alone (sessions)
    assert with_job_dir(None, relu).job_dir_mb == job_dir_mb(est)
    chosen = VerifyConfig(job_dir_mb=300)
    assert with_job_dir(chosen, relu) is chosen  # the person's size stands
    other = load_task("softmax_rows")
    assert with_job_dir(config, other) is config  # no estimate known: the verifier's default
    monkeypatch.setattr(core.tasks, "_read_estimate", lambda task: {"ok": False, "error": "no meta kernel"})
    assert with_job_dir(config, relu) is config
