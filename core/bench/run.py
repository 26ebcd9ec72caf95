"""Running (or continuing) a bench: one session per task under `OUT/sessions/`, named by its position so
a rerun finds it, up to `workers` tasks at once on a thread pool, their verification jobs sent to the
executor (in-process, process pool or Ray; see core.executors) and their memory reads and writes to
one shared bank (or a bank per task, or none).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.bench.benchfile import BenchFile
from core.bench.clients import ModelSource
from core.bench.config import BenchConfig
from core.bench.records import BenchError, TaskOutcome, outcome_from_results
from core.events import Event, Retrieved
from core.executors import Executor, executor_verify, verify_job
from core.fsutil import first_line
from core.llm import ModelError
from core.session import Budgets, Session, SessionError, ends_headless_run
from core.tasks import Task

if TYPE_CHECKING:
    from memory import MemoryStore
    from verifier.result import VerificationResult

ProgressFn = Callable[[str, str, TaskOutcome | None], None]


def session_id(index: int, task: str) -> str:
    """Sessions are named by position, so a rerun finds the one it was working on."""
    slug = "".join(c if c.isalnum() or c in "-_" else "-" for c in task)[:40]
    return f"{index:03d}-{slug}"


def run_bench(tasks: list[Task], out: Path, config: BenchConfig, models: ModelSource, *, memory: MemoryStore | None,
              executor: Executor, job: Callable[..., VerificationResult] = verify_job,
              shapes: Callable[[Task], str] | None = None,
              on_progress: ProgressFn | None = None,
              check: Callable[[Task], str | None] | None = None,
              on_event: Callable[[str, Event], None] | None = None) -> dict[str, object]:
    """Run (or continue) the bench in `out`; returns the final bench.json content.

    Up to `config.workers` tasks run at once, one thread each; their verification jobs go to
    `executor` and their memory reads/writes go to the one shared `memory` bank. `check(task)` returns
    why a task cannot run here (e.g. `reference_skip_reason`): it is recorded as skipped, with no
    session and no model call. `on_event(task, event)` hears each task's session events as they happen
    (with an in-process executor, a running gate's progress too: `core.events.GateProgress`), so a
    display can say which phase each task is in.
    """
    out = Path(out)
    order = [t.name for t in tasks]
    if len(set(order)) != len(order):
        raise BenchError("two selected tasks have the same name; select them separately")
    bench = BenchFile(out, config.settings(models.name), order)
    verify_fn = executor_verify(executor, job)
    notify = on_progress or (lambda kind, task, outcome: None)
    pending = [(i, t) for i, t in enumerate(tasks) if not bench.done(t.name)]
    for t in tasks:
        if bench.done(t.name):
            notify("skipped", t.name, bench.outcomes[t.name])
    bench.flush()

    def one(index: int, task: Task) -> None:
        notify("started", task.name, None)
        start = time.monotonic()
        reason = check(task) if check is not None else None
        if reason:
            outcome = TaskOutcome(task.name, task.level, category=task.category, skipped=reason,
                                  seconds=time.monotonic() - start)
            bench.record(outcome)
            notify("finished", task.name, outcome)
            return
        try:
            told = (lambda ev, name=task.name: on_event(name, ev)) if on_event is not None else None
            outcome = _run_task(index, task, out / "sessions", config, models, memory, verify_fn, shapes, told)
        except (SessionError, ModelError, BenchError, OSError) as exc:
            outcome = TaskOutcome(task.name, task.level, category=task.category, error=first_line(exc, 300),
                                  seconds=time.monotonic() - start)
        bench.record(outcome)
        notify("finished", task.name, outcome)

    if config.workers <= 1 or len(pending) <= 1:
        for index, task in pending:
            one(index, task)
    else:
        pool = ThreadPoolExecutor(max_workers=config.workers, thread_name_prefix="bench-task")
        try:
            futures = [pool.submit(one, i, t) for i, t in pending]
            wait(futures, return_when=FIRST_EXCEPTION)
            for fut in futures:
                if fut.done() and (exc := fut.exception()) is not None:
                    raise exc
            for fut in futures:
                fut.result()
        except BaseException:
            # interrupted: start no more tasks; running ones finish their step and stay resumable
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
    return bench.flush()


def _run_task(index: int, task: Task, root: Path, config: BenchConfig, models: ModelSource, memory: Any,
              verify_fn: Callable[..., Any], shapes: Callable[[Task], str] | None,
              on_event: Callable[[Event], None] | None = None) -> TaskOutcome:
    path = root / session_id(index, task.name)
    memory = task_memory(config, memory, root.parent, path.name)
    common = {"memory": memory, "verify_fn": verify_fn, "verify_config": config.verify_config, "auto_accept": True}
    policy = config.policy(index)
    if not (path / "session.json").exists():
        _clear_unstarted(path)
        draft, refine = (config.budget, config.budget) if config.budget else (config.draft_steps, config.refine_steps)
        budgets = Budgets(draft_steps=draft, refine_steps=refine, wall_s=config.wall_s)
        Session.create(task, backend=config.backend, model=models.for_task(task.name), budgets=budgets, root=root,
                       policy=policy, shapes=shapes(task) if shapes and memory is not None else "",
                       session_id=path.name, **{k: v for k, v in common.items() if k != "auto_accept"})
    calls = Session.open(path).model_calls
    session = Session.open(path, model=models.client(task.name, position=calls), policy=policy, **common)
    if config.budget:  # one budget of T model steps shared by both stages
        while session.stage != "done" and sum(session.used.values()) < config.budget:
            if ends_headless_run(session.step(on_event=on_event)):
                break
    else:
        session.run(on_event=on_event)
    results = [a.result for a in session.history]
    outcome = outcome_from_results(task.name, task.level, results, tokens=session.tokens, cost=session.cost,
                                   category=task.category, session=session.id, seconds=session.elapsed_s,
                                   best_index=accepted_index(session))
    outcome.slots, outcome.value_slots = retrieval_slots(session.path)
    outcome.feasible_refinements = sum(1 for a in session.history if a.stage == "refine" and a.feasible)
    return outcome


def task_memory(config: BenchConfig, memory: MemoryStore | None, out: Path, name: str) -> MemoryStore | None:
    """The bank a task uses: the shared one, a fresh seeded one of its own (`per-task`), or none."""
    if config.memory_mode == "none":
        return None
    if config.memory_mode == "per-task":
        from memory import MemoryStore

        return MemoryStore(out / "memory" / f"{name}.json")
    return memory


def retrieval_slots(session_path: Path) -> tuple[int, int]:
    """(ranked slots, slots chosen by value beyond similarity's top-k) over a session's `retrieved` events."""
    from core.events import read_events

    slots = value = 0
    try:
        events = read_events(session_path)
    except (OSError, ValueError):
        return 0, 0
    for ev in events:
        if ev.kind == "retrieved" and isinstance(ev.payload, Retrieved):  # the payload class of the kind
            slots += int(ev.payload.slots or 0)
            value += int(ev.payload.value_beyond_similarity or 0)
    return slots, value


def _clear_unstarted(path: Path) -> None:
    """A folder a kill left before session.json was written holds nothing yet: remove it so the task can start."""
    if path.is_dir() and not any(p.is_file() for p in path.rglob("*")):
        shutil.rmtree(path)


def accepted_index(s: Session) -> int | None:
    """The position of the session's accepted best kernel in its history (None when none was accepted)."""
    best = s.best
    return next((i for i, a in enumerate(s.history) if best is not None and a.version == best.version), None)
