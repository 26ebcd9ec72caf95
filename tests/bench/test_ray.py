"""A bench whose verification jobs run on a local Ray instance started by the test (no network)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from bench_fakes import CORE_TESTS, fake_verify, improving, reply, write_script  # noqa: E402

from core.bench import BenchConfig, ModelSource, outcomes_of, run_bench, select_tasks  # noqa: E402
from core.events import read_events  # noqa: E402
from core.llm import ModelConfig  # noqa: E402
from memory import MemoryStore  # noqa: E402

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'evokernel-tui[ray]')")


@pytest.mark.slow  # starts a local Ray cluster: 15 s
def test_bench_on_local_ray_keeps_the_bank_consistent(tmp_path):
    from core.executors import RayExecutor

    scripts = {"relu": improving(2.0, 0.5), "gelu": [reply("incorrect"), reply("feasible", 0.8)],
               "sigmoid": [reply("compile_fail"), reply("compile_fail")], "scale_add": improving(1.0, 0.9)}
    models = ModelSource(ModelConfig("scripted:" + str(write_script(tmp_path / "s.json", scripts))), max_concurrent=2)
    store = MemoryStore(tmp_path / "memory.json", fsync=False)
    visits_before = sum(i.visits1 + i.visits2 for i in store.items())
    ex = RayExecutor(workers=2, python_path=[CORE_TESTS, str(Path(__file__).parent)])
    try:
        data = run_bench(select_tasks(names=list(scripts)), tmp_path / "run",
                         BenchConfig(draft_steps=2, refine_steps=2, workers=2, executor="ray"), models, memory=store,
                         executor=ex, job=fake_verify)
    finally:
        ex.shutdown()
    assert not ray.is_initialized()
    got = {o.task: (o.feasible, o.speedup, o.kernels) for o in outcomes_of(data)}
    assert got == {"relu": (True, 2.0, 3), "gelu": (True, 1.25, 2), "sigmoid": (False, None, 2),
                   "scale_add": (True, 1 / 0.9, 3)}
    credited = 0
    for d in (tmp_path / "run" / "sessions").iterdir():
        credited += sum(len(set(e.data["credited"])) for e in read_events(d / "events.jsonl") if e.kind == "reward")
    reopened = MemoryStore(store.path, fsync=False)
    # 10 kernels, but sigmoid's two compile failures (same task, stage and outcome) merge into one lesson
    assert len(reopened.items(kind="trajectory")) == 9
    assert sum(i.visits1 + i.visits2 for i in reopened.items()) - visits_before == credited > 0
    store.close()


@pytest.mark.slow  # starts a local Ray cluster: 15 s
def test_local_ray_on_fake_gpus_gives_each_job_a_gpu_of_its_own(tmp_path):
    """`--gpus 1,3` on a local instance: Ray is told of those two GPUs only; every job runs with one of them as
    its CUDA_VISIBLE_DEVICES, and no two jobs hold one GPU at once (Ray's scheduler, num_gpus=1 per job)."""
    import os

    from bench_fakes import gpu_interval

    from core.executors import RayExecutor

    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    ex = RayExecutor(workers=4, gpus_per_job=1.0, gpus=["1", "3"], python_path=[CORE_TESTS, str(Path(__file__).parent)])
    try:
        assert os.environ.get("CUDA_VISIBLE_DEVICES") == before        # the driver's own setting is back
        assert ray.cluster_resources().get("GPU") == 2
        assert ex.describe() == "ray (local, 4 CPUs, 1 GPU per job, GPUs 1,3)"
        runs = ex.map(gpu_interval, range(8))
    finally:
        ex.shutdown()
    assert {g for g, *_ in runs} == {"1", "3"}
    for gpu in ("1", "3"):
        spans = sorted((s, e) for g, _, s, e in runs if g == gpu)
        assert all(e0 <= s1 for (_, e0), (s1, _) in zip(spans, spans[1:], strict=False)), f"GPU {gpu} ran two jobs at once"
        # every job of a GPU ran in one process: the verifier's warm state (reference worker, CUDA context)
        # carries over (as Ray tasks each GPU job had a fresh worker and a cold start)
        assert len({pid for g, pid, *_ in runs if g == gpu}) == 1, runs


def test_ray_gpus_are_for_a_local_instance():
    from core.executors import ExecutorError, RayExecutor

    with pytest.raises(ExecutorError, match="local Ray instance"):
        RayExecutor(workers=1, address="auto", gpus_per_job=1.0, gpus=["0"])
