"""`evokernel tui [TASK]`: open the app (also what `evokernel` with no subcommand runs).

Only click and the app module are imported here; the task, model, memory and session layers are
imported inside the worker that opens the session, after the first paint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from evokernel_tui import options
from evokernel_tui.cli import one_line_errors


def session_opener(
    backend: str, model: str | None, api_base: str | None, sessions_dir: str | None, draft_steps: int, refine_steps: int,
    *, memory: Any = True, first_task: Any = None, verify_config: Any = None,
):
    """A function the app calls (in a worker) to turn a task name or path into a new `Session`.

    `memory`: an open store, None for no memory, True for the default bank; `first_task`: a `Task`
    already loaded (and checked) before the app started, used when the app asks for its first task;
    `verify_config`: the verifier settings from the command line (tolerance, threads, memory limit), or a
    function making them (so that the tolerance's numpy-backed module loads after the first paint).
    Whether a trivial answer passes the task is found out here, after the first paint."""
    loaded = {"first": first_task}

    def open_session(task_ref: str | None) -> Any:
        from dataclasses import replace

        from core.config import sessions_root
        from core.llm import resolve_model
        from core.session import Budgets, Session
        from core.tasks import load_task
        from core.verifying import mark_degenerate, prewarm_in_background

        first, loaded["first"] = loaded["first"], None
        task = first if first is not None and task_ref in (None, first.name) else load_task(task_ref or "relu")
        prewarm_in_background(backend)
        config = _settings(verify_config)
        if config is not None:
            config = replace(config, extra=dict(config.extra))  # one per session: tasks differ
        store = _open_store(memory)
        return Session.create(
            task,
            backend=backend,
            model=resolve_model(model, api_base),
            memory=store,
            budgets=Budgets(draft_steps=draft_steps, refine_steps=refine_steps),
            root=sessions_root(sessions_dir),
            verify_config=mark_degenerate(task, config),
        )

    return open_session


def resume_opener(path: Path, model: str | None, api_base: str | None, *, memory: Any = True,
                  verify_config: Any = None):
    """Like `session_opener` for a saved session: the command line's verifier settings (tolerance,
    threads, memory limit) apply to its next verifications, and its task is checked for degeneracy."""
    def open_session(_task_ref: str | None) -> Any:
        from core.llm import resolve_model
        from core.session import Session
        from core.tasks import Task
        from core.verifying import mark_degenerate

        store = _open_store(memory)
        session = Session.open(path, model=resolve_model(model, api_base) if model else False, memory=store,
                               verify_config=_settings(verify_config))
        session.verify_config = mark_degenerate(Task.from_dict(session.meta["task"]), session.verify_config)
        return session

    return open_session


def _settings(verify_config: Any) -> Any:
    """Verifier settings given as themselves or as a function that makes them (called in the worker)."""
    return verify_config() if callable(verify_config) else verify_config


def _open_store(memory: Any) -> Any:
    """`memory` as the session gets it: True → the default bank, a path → that bank (opened here, in
    the worker, after the first paint), None → no memory, anything else → an open store."""
    if memory is True or isinstance(memory, str | Path):
        from memory import MemoryStore

        return MemoryStore(None if memory is True else memory)
    return memory


def load_replay_events(path: Path) -> list[Any]:
    """The recorded events of a session folder; a clear error when it is not one."""
    from core.session import SessionError, replay

    with one_line_errors(SessionError):
        return replay(path)


def run_replay(path: Path) -> None:
    """Open a recorded session read-only (used by `evokernel tui --replay` and `evokernel replay --tui`)."""
    from evokernel_tui.app import EvoKernelApp

    EvoKernelApp(replay_events=load_replay_events(path)).run()


@click.command(name="tui")
@click.argument("task", required=False)
@options.backend
@options.model
@options.api_base
@options.sessions_dir
@click.option("--draft-steps", default=4, show_default=True, type=click.IntRange(0, 100))
@click.option("--refine-steps", default=4, show_default=True, type=click.IntRange(0, 100))
@click.option("--session", "session_ref", default=None, help="Resume a saved session (id or folder) instead of starting one.")
@click.option("--replay", "replay_ref", default=None, help="Replay a saved session (id or folder); no model calls.")
@options.memory_bank()
@options.kernelbench
@options.tolerance
@options.memory_gb(default=None)
@options.threads
def tui(
    task: str | None,
    backend: str = "cpu",
    model: str | None = None,
    api_base: str | None = None,
    sessions_dir: str | None = None,
    draft_steps: int = 4,
    refine_steps: int = 4,
    session_ref: str | None = None,
    replay_ref: str | None = None,
    memory_path: str | None = None,
    no_memory: bool = False,
    kernelbench: str | None = None,
    level: int | None = None,
    problem: int | None = None,
    tolerance: str = "kernelbench",
    atol: float | None = None,
    rtol: float | None = None,
    memory_gb: float | None = None,
    threads: int | None = None,
) -> None:
    """Open the app on TASK (a built-in name or a task file; default relu), or on problem N of level L of
    a KernelBench checkout (--kernelbench DIR --level L --problem N)."""
    from evokernel_tui.cli import check_memory, check_model, check_settings, check_task, check_task_size

    check_settings()  # every problem below is one line before the full screen starts
    from functools import partial

    from core.verifying import make_config

    config = partial(make_config, tolerance, atol, rtol, memory_gb=memory_gb, threads=threads)  # made in the worker
    if replay_ref is not None:
        run_replay(_find(replay_ref, sessions_dir))
        return
    if session_ref is not None:
        path = _find(session_ref, sessions_dir)
        _refuse_if_open(path)
        if model:
            check_model(model, api_base)
        bank = check_memory(memory_path, not no_memory)
        opener = resume_opener(path, model, api_base, memory=bank, verify_config=config)
        first = None
    else:
        first = check_task(task, kernelbench, level, problem)
        check_task_size(first, memory_gb)  # a problem too big for the memory limit: one line, no app
        check_model(model, api_base)
        bank = check_memory(memory_path, not no_memory)
        opener = session_opener(backend, model, api_base, sessions_dir, draft_steps, refine_steps,
                                memory=bank, first_task=first, verify_config=config)
    from evokernel_tui.app import EvoKernelApp

    app = EvoKernelApp(open_session=opener, task=first.name if first is not None else task, prebuild_starter=True)
    app.run()


def _refuse_if_open(path: Path) -> None:
    """One line naming the process that already has this session open (a second `tui --session`)."""
    from core.session import SessionError, check_not_open

    with one_line_errors(SessionError):
        check_not_open(path)


def _find(ref: str, sessions_dir: str | None) -> Path:
    """A session folder from an id (or unique part of one) or a path; one clear line when there is none."""
    from core.config import sessions_root
    from core.session import SessionError, find_session

    with one_line_errors(SessionError):
        return find_session(ref, sessions_root(sessions_dir))
