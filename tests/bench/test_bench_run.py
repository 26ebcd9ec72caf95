"""The bench runner with the verdict-reading fake verifier and per-task scripted replies."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from bench_fakes import fake_verify, improving, reply, write_script  # noqa: E402

from core.bench import (  # noqa: E402
    BenchConfig,
    BenchError,
    ModelSource,
    load_bench,
    outcomes_of,
    replay_bench,
    run_bench,
    select_tasks,
    write_report,
)
from core.events import read_events  # noqa: E402
from core.executors import InProcessExecutor, ProcessPoolExecutor  # noqa: E402
from core.llm import ModelConfig  # noqa: E402
from memory import MemoryStore  # noqa: E402

TASKS = ["relu", "gelu", "gemm_bias_relu"]
SCRIPTS = {
    "relu": improving(2.0, 0.5),                                     # feasible at 2 ms, refined to 0.5 ms
    "gelu": [reply("compile_fail"), reply("incorrect")],              # compiles once, never correct
    "gemm_bias_relu": [reply("hack_fail"), reply("compile_fail")],    # never compiles
}
KEYS = ("task", "level", "compiled", "feasible", "speedup", "first_feasible_ms", "best_ms", "kernels")


@pytest.fixture
def store(tmp_path):
    s = MemoryStore(tmp_path / "memory.json", fsync=False)
    yield s
    s.close()


@pytest.fixture
def models(tmp_path):
    return ModelSource(ModelConfig("scripted:" + str(write_script(tmp_path / "script.json", SCRIPTS))))


def config(**kw):
    return BenchConfig(**{"draft_steps": 2, "refine_steps": 2, **kw})


def counting(calls):
    def job(ref, cand, backend="cpu", config=None):
        calls.append(cand)
        return fake_verify(ref, cand, backend, config)

    return job


def essentials(outcomes):
    return [{k: getattr(o, k) for k in KEYS} for o in outcomes]


def test_runs_every_task_in_order_and_reports(tmp_path, store, models):
    out = tmp_path / "run"
    seen = []
    data = run_bench(select_tasks(names=TASKS), out, config(), models, memory=store, executor=InProcessExecutor(),
                     job=fake_verify, on_progress=lambda kind, task, o: seen.append((kind, task)))
    assert data["complete"] and data["tasks"] == TASKS
    assert seen == [(k, t) for t in TASKS for k in ("started", "finished")]
    assert essentials(outcomes_of(data)) == [
        {"task": "relu", "level": 1, "compiled": True, "feasible": True, "speedup": 2.0, "first_feasible_ms": 2.0,
         "best_ms": 0.5, "kernels": 3},
        {"task": "gelu", "level": 1, "compiled": True, "feasible": False, "speedup": None, "first_feasible_ms": None,
         "best_ms": None, "kernels": 2},
        {"task": "gemm_bias_relu", "level": 2, "compiled": False, "feasible": False, "speedup": None,
         "first_feasible_ms": None, "best_ms": None, "kernels": 2},
    ]
    l1, l2, total = data["summary"]
    assert (l1["level"], l1["compile_rate"], l1["correct_rate"], l1["fast"]["1.5"]) == (1, 1.0, 0.5, 0.5)
    assert l1["median_refine_speedup"] == 4.0 and l1["geomean_speedup"] == 2.0
    assert (l2["compile_rate"], total["tasks"]) == (0.0, 3)
    assert total["tokens"] > 0 and total["cost"] == 0.0
    assert load_bench(out) == json.loads((out / "bench.json").read_text())
    assert sorted(d.name for d in (out / "sessions").iterdir()) == ["000-relu", "001-gelu", "002-gemm_bias_relu"]
    # one shared bank: every verified kernel became a trajectory memory of its task, plus relu's insight
    trajectories = store.items(kind="trajectory")
    assert sorted(i.data["task"] for i in trajectories) == sorted(["relu"] * 3 + ["gelu"] * 2 + ["gemm_bias_relu"] * 2)
    assert len(store.items(kind="insight")) == 1
    report, plot = write_report(out, data)
    text = report.read_text()
    assert "| L1 | 2 | 100% | 50% |" in text and "| gemm_bias_relu | 2 | did not compile (1 of 2 kernels rejected by anti-hacking) |" in text
    assert plot.exists() and plot.stat().st_size > 0


def _visits(bank):
    return sum(i.visits1 for i in bank.items()), sum(i.visits2 for i in bank.items())


def _credited(out):
    total = {"draft": 0, "refine": 0}
    for d in (out / "sessions").iterdir():
        for ev in read_events(d / "events.jsonl"):
            if ev.kind == "reward":
                total[ev.data["stage"]] += len(set(ev.data["credited"]))
    return total


def test_concurrent_tasks_share_one_bank_consistently(tmp_path, store, models):
    tasks = select_tasks(names=TASKS)
    before = _visits(store)
    seq = run_bench(tasks, tmp_path / "seq", config(), models, memory=MemoryStore(tmp_path / "m2.json", fsync=False),
                    executor=InProcessExecutor(), job=fake_verify)
    with ProcessPoolExecutor(2) as pool:
        par = run_bench(tasks, tmp_path / "par", config(workers=3, executor="pool"), models, memory=store,
                        executor=pool, job=fake_verify)
    assert essentials(outcomes_of(par)) == essentials(outcomes_of(seq))
    credited = _credited(tmp_path / "par")
    assert credited["draft"] > 0
    after = _visits(store)
    assert (after[0] - before[0], after[1] - before[1]) == (credited["draft"], credited["refine"])
    reopened = MemoryStore(store.path, fsync=False)
    assert len(reopened) == len(store) and _visits(reopened) == after
    assert len(reopened.items(kind="trajectory")) == 7


class Stop(BaseException):
    """Stands in for a kill: nothing in the runner catches it."""


def test_resume_skips_recorded_tasks(tmp_path, store, models):
    tasks = select_tasks(names=TASKS)
    out = tmp_path / "run"

    def stop_after_first(kind, task, outcome):
        if kind == "finished":
            raise Stop

    with pytest.raises(Stop):
        run_bench(tasks, out, config(), models, memory=store, executor=InProcessExecutor(), job=fake_verify,
                  on_progress=stop_after_first)
    partial = load_bench(out)
    assert not partial["complete"] and [o.task for o in outcomes_of(partial)] == ["relu"]
    calls = []
    seen = []
    data = run_bench(tasks, out, config(), models, memory=store, executor=InProcessExecutor(), job=counting(calls),
                     on_progress=lambda kind, task, o: seen.append((kind, task)))
    assert data["complete"]
    assert ("skipped", "relu") in seen and ("started", "relu") not in seen
    assert len(calls) == 4                                            # gelu's and gemm_bias_relu's kernels only
    assert outcomes_of(data)[0].to_dict() == outcomes_of(partial)[0].to_dict()


def test_resume_continues_the_task_that_was_running(tmp_path, store, models):
    tasks = select_tasks(names=["relu", "gelu"])
    out = tmp_path / "run"
    calls = []

    def killed_on_gelu(ref, cand, backend="cpu", config=None):
        if "compile_fail" in cand:
            raise Stop
        calls.append(cand)
        return fake_verify(ref, cand, backend, config)

    with pytest.raises(Stop):
        run_bench(tasks, out, config(), models, memory=store, executor=InProcessExecutor(), job=killed_on_gelu)
    gelu = out / "sessions" / "001-gelu"
    assert (gelu / "session.json").exists()
    data = run_bench(tasks, out, config(), models, memory=store, executor=InProcessExecutor(), job=fake_verify)
    assert data["complete"]
    assert sorted(d.name for d in (out / "sessions").iterdir()) == ["000-relu", "001-gelu"]
    o = outcomes_of(data)[1]
    # the interrupted draft step was finished on resume (its kernel verified and counted), then the next reply ran
    assert (o.compiled, o.feasible, o.kernels) == (True, False, 2)
    events = read_events(gelu / "events.jsonl")
    kinds = [ev.kind for ev in events]
    assert kinds.count("session_started") == 1 and kinds.count("step_resumed") == 1 and "model_error" not in kinds
    assert [ev.data["result"]["outcome"] for ev in events if ev.kind == "verification"][0] == "compile_fail"


def test_resume_refuses_other_settings(tmp_path, store, models):
    out = tmp_path / "run"
    tasks = select_tasks(names=["relu"])
    run_bench(tasks, out, config(), models, memory=store, executor=InProcessExecutor(), job=fake_verify)
    with pytest.raises(BenchError, match="other settings.*retrieval"):
        run_bench(tasks, out, config(retrieval="random"), models, memory=store, executor=InProcessExecutor(),
                  job=fake_verify)


def test_replay_reverifies_recorded_kernels(tmp_path, store, models):
    src = tmp_path / "run"
    recorded = run_bench(select_tasks(names=TASKS), src, config(), models, memory=store, executor=InProcessExecutor(),
                         job=fake_verify)
    snapshot = {d.name: (d / "events.jsonl").read_text() for d in (src / "sessions").iterdir()}
    same = replay_bench(src, tmp_path / "same", config(), executor=InProcessExecutor(), job=fake_verify)
    assert essentials(outcomes_of(same)) == essentials(outcomes_of(recorded))
    assert same["settings"]["mode"] == "replay" and len(same["recorded"]) == 3

    def other_machine(ref, cand, backend="cpu", config=None):
        """Here the 0.5 ms refinement is wrong and the draft runs at half speed."""
        if "feasible 0.5" in cand:
            cand = cand.replace("feasible 0.5", "incorrect")
        res = fake_verify(ref, cand, backend, config)
        if res.latency_ms:
            res.latency_ms *= 2
        return res

    moved = replay_bench(src / "sessions", tmp_path / "moved", config(), executor=InProcessExecutor(),
                         job=other_machine)
    relu = outcomes_of(moved)[0]
    assert (relu.feasible, relu.best_ms, relu.speedup, relu.refine_speedup) == (True, 4.0, 0.25, 1.0)
    assert {d.name: (d / "events.jsonl").read_text() for d in (src / "sessions").iterdir()} == snapshot
    report, _ = write_report(tmp_path / "moved", moved)
    assert "## Recorded vs here" in report.read_text()


def test_replay_of_an_empty_folder_says_what_to_pass(tmp_path):
    with pytest.raises(BenchError, match="no sessions"):
        replay_bench(tmp_path, tmp_path / "out", config(), executor=InProcessExecutor(), job=fake_verify)


def test_scripted_file_without_replies_for_a_task(tmp_path, store):
    script = write_script(tmp_path / "s.json", {"relu": improving(2.0, 1.0)})
    models = ModelSource(ModelConfig(f"scripted:{script}"))
    data = run_bench(select_tasks(names=["relu", "gelu"]), tmp_path / "run", config(), models, memory=store,
                     executor=InProcessExecutor(), job=fake_verify)
    relu, gelu = outcomes_of(data)
    assert relu.feasible and not gelu.feasible
    assert "no scripted replies" not in gelu.error and "none for task gelu" in gelu.error
    assert not data["complete"]


def test_interrupted_parallel_bench_starts_no_more_tasks(tmp_path, store):
    script = write_script(tmp_path / "s.json", SCRIPTS, default=[reply("incorrect"), reply("feasible", 1.0)])
    models = ModelSource(ModelConfig(f"scripted:{script}"))
    tasks = select_tasks(names=["relu", "gelu", "sigmoid", "scale_add", "gemm_bias_relu"])
    out = tmp_path / "run"
    started, finished = [], []

    def stop_at_first_finish(kind, task, outcome):
        (started if kind == "started" else finished).append(task)
        if kind == "finished":
            raise Stop

    with pytest.raises(Stop):
        run_bench(tasks, out, config(workers=2), models, memory=store, executor=InProcessExecutor(), job=fake_verify,
                  on_progress=stop_at_first_finish)
    assert len(started) <= 3                         # the two running, at most one picked up meanwhile
    deadline = time.monotonic() + 10
    while len(finished) < len(started) and time.monotonic() < deadline:  # a killed process would not linger
        time.sleep(0.01)
    data = run_bench(tasks, out, config(workers=2), models, memory=store, executor=InProcessExecutor(),
                     job=fake_verify)
    assert [(o.task, o.error) for o in outcomes_of(data)] == [(t.name, "") for t in tasks]
    assert data["complete"]


def test_model_calls_are_bounded_across_tasks():
    import threading

    from core.bench import BoundedClient
    from core.llm import Completion

    state = {"now": 0, "peak": 0}
    lock = threading.Lock()

    class Slow:
        name = "slow"

        def complete(self, messages, on_token=None):
            with lock:
                state["now"] += 1
                state["peak"] = max(state["peak"], state["now"])
            time.sleep(0.05)
            with lock:
                state["now"] -= 1
            return Completion(text="ok")

    slots = threading.Semaphore(2)
    clients = [BoundedClient(Slow(), slots) for _ in range(6)]
    threads = [threading.Thread(target=c.complete, args=([],)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert state["peak"] == 2


def test_a_session_folder_killed_before_it_started_is_started_again(tmp_path, store, models):
    out = tmp_path / "run"
    (out / "sessions" / "000-relu" / "kernels").mkdir(parents=True)
    data = run_bench(select_tasks(names=["relu"]), out, config(), models, memory=store, executor=InProcessExecutor(),
                     job=fake_verify)
    assert data["complete"] and outcomes_of(data)[0].feasible


def test_on_event_hears_each_tasks_session_events_and_in_process_the_gates_progress(tmp_path, store, models):
    """Issue 34: `run_bench(on_event=...)` gets (task, event) as each happens; with an in-process executor
    a running gate's progress (`gate_progress`) streams too, through the job's on_gate."""
    from verifier.result import Progress

    def job(ref, cand, backend="cpu", config=None, on_gate=None):
        def tell(name):
            if name == "correctness" and on_gate is not None:
                on_gate(name, "running", Progress("correctness", "trial", "trial 1/2", done=1, total=2))
        return fake_verify(ref, cand, backend, config, on_gate, before_gate=tell)

    heard = []
    run_bench(select_tasks(names=["relu"]), tmp_path / "run", config(), models, memory=store,
              executor=InProcessExecutor(), job=job, on_event=lambda task, ev: heard.append((task, ev.kind, ev.data)))
    kinds = [k for _, k, _ in heard]
    assert {t for t, _, _ in heard} == {"relu"}
    assert "prompt" in kinds and "gate" in kinds and "verification" in kinds
    told = [d for _, k, d in heard if k == "gate_progress"]
    assert told and told[0]["text"] == "trial 1/2" and told[0]["gate"] == "correctness" and told[0]["version"] == 1
    assert kinds.index("gate_progress") < kinds.index("verification")
