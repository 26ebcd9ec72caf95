"""Executors: the same jobs give the same results in-process, in a spawned pool and on a local Ray instance."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from bench_fakes import (  # noqa: E402
    CORE_TESTS,
    card_slowly,
    die,
    die_once,
    fake_verify,
    kernel,
    pid_after,
    progressing_verify,
    slow_verify,
    visible,
    where,
    where_slowly,
)

from core.executors import (  # noqa: E402
    ExecutorError,
    InProcessExecutor,
    ProcessPoolExecutor,
    executor_verify,
    make_executor,
)

REF = "reference"


def test_in_process_runs_now_and_keeps_exceptions():
    ex = InProcessExecutor()
    fut = ex.submit(fake_verify, REF, kernel("feasible", 0.5))
    assert fut.done() and fut.result().latency_ms == 0.5
    bad = ex.submit(int, "not a number")
    with pytest.raises(ValueError):
        bad.result()


FINAL = [("anti_hacking", "pass"), ("compile", "pass"), ("correctness", "fail"), ("latency", "skip"), ("profile", "skip")]


def test_executor_verify_reports_gates_in_order():
    """In the caller's process the verifier's own callbacks stream (a gate's `running` before its verdict);
    the verdicts still arrive in gate order."""
    seen = []
    verify = executor_verify(InProcessExecutor(), fake_verify)
    res = verify(REF, kernel("incorrect"), backend="cpu", config=None, on_gate=lambda n, s: seen.append((n, s)))
    assert res.outcome == "incorrect"
    assert [x for x in seen if x[1] != "running"] == FINAL
    for name, state in FINAL:
        if ("running") in {s for n, s in seen if n == name}:
            assert seen.index((name, "running")) < seen.index((name, state))


def test_executor_verify_replays_gates_when_it_cannot_stream():
    """A job that takes no callback (as from another process): the gates are told once the result is in."""
    seen = []

    def job(reference_source, candidate_source, backend="cpu", config=None):
        return fake_verify(reference_source, candidate_source, backend=backend, config=config)

    verify = executor_verify(InProcessExecutor(), job)
    verify(REF, kernel("incorrect"), backend="cpu", config=None, on_gate=lambda n, s: seen.append((n, s)))
    assert seen == FINAL


def test_a_pool_workers_progress_reaches_the_caller_while_it_verifies():
    """`bench` on the local pool (one worker per GPU) said nothing within a task: the worker's gate states
    and progress lines now come back over the pool's queue as they happen, not replayed at the end."""
    seen = []
    with ProcessPoolExecutor(1) as pool:
        verify = executor_verify(pool, progressing_verify)
        verify(REF, kernel("feasible", 0.5), backend="cpu", config=None)  # warm the worker
        res = verify(REF, kernel("incorrect"), backend="cpu", config=None,
                     on_gate=lambda *event: seen.append((time.monotonic(), event)))
        done = time.monotonic()
    assert res.outcome == "incorrect"
    lines = [e[2] for _, e in seen if len(e) > 2]
    assert [line.split(" (")[0] for line in lines] == ["trial 1/3", "trial 2/3", "trial 3/3"]
    assert all(f"pid {where()})" not in line for line in lines), "it ran in the worker, not here"
    assert done - seen[0][0] > 0.3, "the first progress line arrived while the job was still running"
    assert [(n, st) for _, (n, st, *_) in seen if st != "running"] == FINAL


@pytest.mark.alone
def test_pool_overlaps_jobs_in_two_processes():
    with ProcessPoolExecutor(2) as pool:
        pids = set(pool.map(where_slowly, range(8)))
        pool.map(slow_verify, [REF] * 2, [kernel("feasible", 1.0)] * 2)  # warm both workers
        start = time.monotonic()
        results = pool.map(slow_verify, [REF] * 4, [kernel("feasible", 0.25 * (i + 1)) for i in range(4)])
        elapsed = time.monotonic() - start
    assert [r.latency_ms for r in results] == [0.25, 0.5, 0.75, 1.0]
    assert len(pids) == 2 and all(p != where() for p in pids)
    assert elapsed < 4 * 0.3 * 0.85, f"4 jobs of 0.3 s on 2 workers took {elapsed:.2f}s"


def test_a_worker_that_dies_costs_its_own_job_not_the_pool():
    """A worker killed mid-job broke the standard pool for good (every job failed, nothing more could be
    submitted). Now the pool is built again, every GPU back in its slots: the jobs beside the killer run
    again and succeed, the killer fails once its retries are spent, and the pool keeps serving."""
    from concurrent.futures.process import BrokenProcessPool

    with ProcessPoolExecutor(2, gpus=["0", "1"]) as pool:
        assert set(pool.map(visible, range(4))) <= {"0", "1"}
        beside = [pool.submit(where_slowly, i) for i in range(4)]
        killer = pool.submit(die)
        with pytest.raises(BrokenProcessPool):
            killer.result(timeout=120)
        assert all(isinstance(f.result(timeout=120), int) for f in beside)
        assert pool.rebuilt >= 1
        after = pool.map(card_slowly, range(8))
        assert len({pid for pid, _ in after}) == 2 and where() not in {pid for pid, _ in after}
        assert {gpu for _, gpu in after} == {"0", "1"}  # both cards are served again, one per worker


def test_a_killer_tried_again_never_takes_the_jobs_that_ran_beside_it_down_with_it():
    """The job that kills its worker runs three times. When every break charged every job in the pool, a
    slow job beside each try spent its retries with the killer's and failed too (CI, session 24); a job
    that only waited in the queue was charged as well. Now only the jobs that were running are suspects,
    and suspects run one at a time: the killer fails alone."""
    from concurrent.futures.process import BrokenProcessPool

    with ProcessPoolExecutor(2) as pool:
        killer = pool.submit(die)
        beside = [pool.submit(pid_after, 0.6) for _ in range(5)]
        with pytest.raises(BrokenProcessPool):
            killer.result(timeout=120)
        assert all(isinstance(f.result(timeout=120), int) for f in beside)
        assert pool.rebuilt == 1 + pool.JOB_RETRIES, "each try of the killer broke the pool once"
        assert len(set(pool.map(pid_after, [0.2, 0.2]))) == 2, "the pool serves side by side again"


def test_pool_passes_worker_exceptions_back():
    with ProcessPoolExecutor(1) as pool, pytest.raises(ValueError):
        pool.submit(int, "x").result()


def test_make_executor_rejects_bad_requests():
    with pytest.raises(ExecutorError, match="unknown executor"):
        make_executor("cluster")
    with pytest.raises(ExecutorError, match="1 or more"):
        make_executor("pool", workers=0)


def test_ray_missing_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ExecutorError, match="pip install"):
        make_executor("ray", workers=1)


@pytest.mark.slow  # starts a local Ray cluster: 15-20 s
def test_ray_local_instance_runs_jobs(tmp_path, monkeypatch):
    ray_tmp = tmp_path
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'evokernel-tui[ray]')")
    from core.executors import RayExecutor

    # Another cluster is this machine's current one (as when a second pytest worker or bench starts its local
    # instance after the first): Ray's `init(address=None)` looks it up (RAY_ADDRESS, then the file the last
    # start wrote) and joins it, then fails at "num_cpus and num_gpus must not be provided". A local instance
    # must be a new one of our own whatever was started before.
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:9")
    ex = RayExecutor(workers=2, python_path=[CORE_TESTS, str(Path(__file__).parent)])
    try:
        assert ray.is_initialized()
        assert ray.cluster_resources().get("CPU") == 2
        results = ex.map(fake_verify, [REF] * 3, [kernel("feasible", 0.5), kernel("compile_fail"), kernel("hack_fail")])
        assert [r.outcome for r in results] == ["feasible", "compile_fail", "hack_fail"]
        pids = set(ex.map(where, range(6)))
        assert where() not in pids
        with pytest.raises(ValueError):
            ex.submit(int, "x").result()
        # a job whose worker died runs again (as when its node is lost); one that raised is not repeated
        marker = Path(ray_tmp) / "died"
        assert isinstance(ex.submit(die_once, str(marker)).result(timeout=120), int) and marker.exists()
        assert ex.describe() == "ray (local, 2 CPUs)"
    finally:
        ex.shutdown()
    assert not ray.is_initialized()


def test_pool_pins_each_worker_to_its_own_gpu():
    with ProcessPoolExecutor(3, gpus=["4", "7"]) as pool:
        assert pool.workers == 2 and pool.describe() == "pool (2 workers, GPUs 4,7)"
        seen = set(pool.map(visible, range(40)))
    assert seen <= {"4", "7"} and seen


def test_visible_gpus_follows_cuda_visible_devices(monkeypatch):
    from core.executors import visible_gpus

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, 3")
    assert visible_gpus() == ["2", "3"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert visible_gpus() == []
