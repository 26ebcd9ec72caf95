"""`evokernel tui [TASK]`: open the app (also what `evokernel` with no subcommand runs).

Only click and the app module are imported here; the task, model, memory and session layers are
imported inside the worker that opens the session, after the first paint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click


def session_opener(
    backend: str, model: str | None, api_base: str | None, sessions_dir: str | None, draft_steps: int, refine_steps: int,
    *, memory: Any = True, first_task: Any = None,
):
    """A function the app calls (in a worker) to turn a task name or path into a new `Session`.

    `memory`: an open store, None for no memory, True for the default bank; `first_task`: a `Task`
    already loaded (and checked) before the app started, used when the app asks for its first task."""
    loaded = {"first": first_task}

    def open_session(task_ref: str | None) -> Any:
        from core.config import sessions_root
        from core.llm import resolve_model
        from core.session import Budgets, Session
        from core.tasks import load_task
        from core.verifying import prewarm_in_background

        first, loaded["first"] = loaded["first"], None
        task = first if first is not None and task_ref in (None, first.name) else load_task(task_ref or "relu")
        prewarm_in_background(backend)
        store = _open_store(memory)
        return Session.create(
            task,
            backend=backend,
            model=resolve_model(model, api_base),
            memory=store,
            budgets=Budgets(draft_steps=draft_steps, refine_steps=refine_steps),
            root=sessions_root(sessions_dir),
        )

    return open_session


def resume_opener(path: Path, model: str | None, api_base: str | None, *, memory: Any = True):
    def open_session(_task_ref: str | None) -> Any:
        from core.llm import resolve_model
        from core.session import Session

        store = _open_store(memory)
        return Session.open(path, model=resolve_model(model, api_base) if model else False, memory=store)

    return open_session


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

    try:
        return replay(path)
    except SessionError as exc:
        raise click.ClickException(str(exc)) from None


def run_replay(path: Path) -> None:
    """Open a recorded session read-only (used by `evokernel tui --replay` and `evokernel replay --tui`)."""
    from evokernel_tui.app import EvoKernelApp

    EvoKernelApp(replay_events=load_replay_events(path)).run()


@click.command(name="tui")
@click.argument("task", required=False)
@click.option("--backend", default="cpu", show_default=True, type=click.Choice(["cpu", "cuda", "triton"]))
@click.option("--model", default=None, help="Model name for litellm (or scripted:FILE.json); default: manual mode.")
@click.option("--api-base", default=None, help="Base URL of an OpenAI-compatible server.")
@click.option("--sessions-dir", default=None, help="Where session folders go (default ./sessions).")
@click.option("--draft-steps", default=4, show_default=True, type=click.IntRange(0, 100))
@click.option("--refine-steps", default=4, show_default=True, type=click.IntRange(0, 100))
@click.option("--session", "session_ref", default=None, help="Resume a saved session (id or folder) instead of starting one.")
@click.option("--replay", "replay_ref", default=None, help="Replay a saved session (id or folder); no model calls.")
@click.option("--memory", "memory_path", default=None, help="Memory bank file (default: $EVOKERNEL_MEMORY or user data dir).")
@click.option("--no-memory", is_flag=True, help="Run without the memory bank.")
@click.option("--kernelbench", default=None, type=click.Path(file_okay=False), help="KernelBench checkout (with --level, --problem).")
@click.option("--level", type=int, default=None)
@click.option("--problem", type=int, default=None)
def tui(
    task: str | None,
    backend: str,
    model: str | None,
    api_base: str | None,
    sessions_dir: str | None,
    draft_steps: int,
    refine_steps: int,
    session_ref: str | None,
    replay_ref: str | None,
    memory_path: str | None = None,
    no_memory: bool = False,
    kernelbench: str | None = None,
    level: int | None = None,
    problem: int | None = None,
) -> None:
    """Open the app on TASK (a built-in name or a task file; default relu)."""
    from evokernel_tui.cli import check_memory, check_model, check_settings, check_task

    check_settings()  # every problem below is one line before the full screen starts
    if replay_ref is not None:
        run_replay(_find(replay_ref, sessions_dir))
        return
    if session_ref is not None:
        path = _find(session_ref, sessions_dir)
        _refuse_if_open(path)
        if model:
            check_model(model, api_base)
        bank = check_memory(memory_path, not no_memory)
        opener = resume_opener(path, model, api_base, memory=bank)
        first = None
    else:
        first = check_task(task, kernelbench, level, problem)
        check_model(model, api_base)
        bank = check_memory(memory_path, not no_memory)
        opener = session_opener(backend, model, api_base, sessions_dir, draft_steps, refine_steps,
                                memory=bank, first_task=first)
    from evokernel_tui.app import EvoKernelApp

    app = EvoKernelApp(open_session=opener, task=first.name if first is not None else task, prebuild_starter=True)
    app.run()


def _refuse_if_open(path: Path) -> None:
    """One line naming the process that already has this session open (a second `tui --session`)."""
    from core.session import SessionError, check_not_open

    try:
        check_not_open(path)
    except SessionError as exc:
        raise click.ClickException(str(exc)) from None


def _find(ref: str, sessions_dir: str | None) -> Path:
    """A session folder from an id (or unique part of one) or a path; one clear line when there is none."""
    from core.config import sessions_root
    from core.session import SessionError, find_session

    try:
        return find_session(ref, sessions_root(sessions_dir))
    except SessionError as exc:
        raise click.ClickException(str(exc)) from None
