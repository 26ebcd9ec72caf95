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
