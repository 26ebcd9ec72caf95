"""`evokernel tui [TASK]`: open the app (also what `evokernel` with no subcommand runs).

Only click and the app module are imported here; the task, model, memory and session layers are
imported inside the worker that opens the session, after the first paint. Before the screen only the
cheap checks run (the file exists, parses, defines Model/get_inputs by `ast`); what needs the task run
(memory estimate, probe, degeneracy) runs after the starter is on screen, as the app's task checks
(`task_checks`), each in its own worker reporting into the panes.
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
    Nothing here runs the task: the starter kernel comes from its source text at once, and whether the
    task runs, fits the memory limit and is degenerate is found out by `task_checks` afterwards."""
    loaded = {"first": first_task}

    def open_session(task_ref: str | None) -> Any:
        from dataclasses import replace

        from core.config import sessions_root
        from core.llm import resolve_model
        from core.session import Budgets, Session
        from core.tasks import load_task
        from core.verdicts import VerifyConfig
        from core.verifying import prewarm_in_background

        first, loaded["first"] = loaded["first"], None
        task = first if first is not None and task_ref in (None, first.name) else load_task(task_ref or "relu")
        prewarm_in_background(backend)
        config = _settings(verify_config)
        # one per session: the task probe sets its fields
        config = replace(config) if config is not None else VerifyConfig()
        store = _open_store(memory)
        return Session.create(
            task,
            backend=backend,
            model=resolve_model(model, api_base),
            memory=store,
            budgets=Budgets(draft_steps=draft_steps, refine_steps=refine_steps),
            root=sessions_root(sessions_dir),
            verify_config=config,
        )

    return open_session


def task_checks(memory_gb: float | None = None, flag: str = "--memory-gb"):
    """The checks the app runs on an open session's task after the first paint (`app.TaskCheck`, one
    worker each, in order): `memory estimate` (the reference's size on torch's meta device against the
    memory limit) and `task probe` (the task runs once in a child process; which trivial answers pass it
    is recorded in the session's verifier settings), after `backend` for a session on a GPU backend (a GPU,
    triton: `verify`'s first check). Built-in tasks are small, run and are not degenerate (tests check all
    three): they get only the backend check."""
    def checks(session: Any) -> list[Any]:
        from core.tasks import is_builtin
        from evokernel_tui.app import TaskCheck

        task = session.task
        backend = str(getattr(session, "backend", "cpu") or "cpu")
        # a resumed session keeps its own backend: a cuda session opened on a CPU machine says so at once
        first = [TaskCheck("backend", lambda: _backend_check(backend))] if backend != "cpu" else []
        if is_builtin(task):
            return first
        return [*first, TaskCheck("memory estimate", lambda: _memory_check(task, memory_gb, flag, backend)),
                TaskCheck("task probe", lambda: _probe_check(session))]

    return checks


def run_task_checks(session: Any, memory_gb: float | None = None) -> list[str]:
    """The task checks one after another in this thread (what the app does in workers); their findings.
    A problem raises its one-line error."""
    return [check.run() for check in task_checks(memory_gb)(session)]


def _backend_check(backend: str) -> str:
    """The session's backend can build and run kernels here (`verify`'s first check); else its one line."""
    from core.verifying import backend_problem

    problem = backend_problem(backend)
    if problem:
        raise RuntimeError(problem)
    return f"the {backend} backend can run here"


def _memory_check(task: Any, memory_gb: float | None, flag: str, backend: str = "cpu") -> str:
    from core.tasks import check_device_memory, check_task_memory
    from evokernel_tui.options import DEFAULT_MEMORY_GB

    limit = memory_gb or DEFAULT_MEMORY_GB
    estimate = check_task_memory(task, limit, flag)  # TaskError: one line naming the estimate, limit and flag
    if estimate is None:
        return "no estimate from the shapes alone (the probe runs it under the limit)"
    if backend in ("cuda", "triton"):
        check_device_memory(task, estimate)  # TaskError: the card cannot hold one verification now
    return f"fits the {limit:g} GiB memory limit: {estimate.describe()}"


def _probe_check(session: Any) -> str:
    """Run the task once (cached per source): a task that fails is one line; which trivial answers pass
    it goes into the session's verifier settings (the correctness gate then judges on the spread)."""
    from core.tasks import probe_device, task_degeneracy
    from core.verdicts import VerifyConfig
    from core.verifying import with_degeneracy

    config = session.verify_config if session.verify_config is not None else VerifyConfig()
    if config.degenerate is None:
        preset = str(config.tolerance or "kernelbench")
        probed = task_degeneracy(session.task, preset, memory_gb=config.memory_gb, raise_errors=True,
                                 device=probe_device(session.backend))
        with_degeneracy(config, probed.found if probed else [], probed.separating if probed else [])
    session.verify_config = config
    found = config.degenerate
    lines = []
    if found:
        from core.verdicts import describe_degenerate

        lines.append(f"the task runs; it is {describe_degenerate(found)}, so correctness is judged against the "
                     "spread of the reference output")
    if config.pass_through:
        separated = config.separated_by
        lines.append("a copy of the input passes the task's own inputs; "
                     + (f"the trials also draw {' and '.join(separated)} inputs, where it fails" if separated
                        else "no other input distribution separates it"))
    return "; ".join(lines) if lines else "the task runs; no trivial answer passes it"


def resume_opener(path: Path, model: str | None, api_base: str | None, *, memory: Any = True,
                  verify_config: Any = None):
    """Like `session_opener` for a saved session: the command line's verifier settings (tolerance,
    threads, memory limit) apply to its next verifications; its task is checked by `task_checks`."""
    def open_session(_task_ref: str | None) -> Any:
        from core.llm import resolve_model
        from core.session import Session
        from core.verdicts import VerifyConfig

        store = _open_store(memory)
        config = _settings(verify_config)
        return Session.open(path, model=resolve_model(model, api_base) if model else False, memory=store,
                            verify_config=config if config is not None else VerifyConfig())

    return open_session


def _settings(verify_config: Any) -> Any:
    """Verifier settings given as themselves or as a function that makes them (called in the worker)."""
    return verify_config() if callable(verify_config) else verify_config


def _open_store(memory: Any) -> Any:
    """`memory` as the session gets it: True → the default bank, a path → that bank (opened here, in
    the worker, after the first paint), None → no memory, anything else → an open store."""
    if memory is True or isinstance(memory, str | Path):
        from core.bank import MemoryStore

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

    run_app(EvoKernelApp(replay_events=load_replay_events(path)))


@click.command(name="tui")
@click.argument("task", required=False)
@options.backend
@options.model
@options.api_base
@options.sessions_dir
@options.steps(draft_default=4, refine_default=4, draft_min=0)
@click.option("--session", "session_ref", default=None, help="Resume a saved session (id or folder) instead of starting one.")
@click.option("--replay", "replay_ref", default=None, help="Replay a saved session (id or folder); no model calls.")
@options.memory_bank()
@options.kernelbench
@options.tolerance
@options.policy
@options.memory_gb(default=None, then="is shown in the panes (the app opens at once)")
@options.threads
@click.option("--watch", "watch_path", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="Also watch this kernel file of your own (in your repository, any editor): each save is "
                   "verified and credited as your edit, like a save of the session's copy; the file is only read.")
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
    policy: str | None = None,
    allow_rules: tuple[str, ...] = (),
    memory_gb: float | None = None,
    threads: int | None = None,
    watch_path: Path | None = None,
) -> None:
    """Open the app on TASK (a built-in name or a task file; default relu), or on problem N of level L of
    a KernelBench checkout (--kernelbench DIR --level L --problem N)."""
    from evokernel_tui.cli import (
        check_backend,
        check_endpoint,
        check_memory,
        check_model,
        check_settings,
        check_task,
        recorded_api_base,
    )

    check_settings()  # every problem below is one line before the full screen starts
    from functools import partial

    from core.verifying import PolicyError, make_config, resolve_policy
    from evokernel_tui.cli import one_line_errors

    with one_line_errors(PolicyError):
        the_policy = resolve_policy(policy, allow_rules)
    config = partial(make_config, tolerance, atol, rtol, memory_gb=memory_gb, threads=threads,  # made in the worker
                     policy=the_policy.preset, allow=list(the_policy.allowed))
    if replay_ref is not None:
        run_replay(_find(replay_ref, sessions_dir))
        return
    check_backend(backend)  # no GPU for --backend cuda: one line instead of an app whose gates cannot run
    if watch_path is not None:
        _check_watched(watch_path)
    if session_ref is not None:
        path = _find(session_ref, sessions_dir)
        _refuse_if_open(path)
        if model:
            check_model(model, api_base)
        else:  # the server the session was created with answers, before the screen and any model call
            check_endpoint(recorded_api_base(_meta_model(path)))
        bank = check_memory(memory_path, not no_memory)
        opener = resume_opener(path, model, api_base, memory=bank, verify_config=config)
        first = None
    else:
        first = check_task(task, kernelbench, level, problem)  # exists, parses, Model/get_inputs (ast only)
        check_model(model, api_base)
        bank = check_memory(memory_path, not no_memory)
        opener = session_opener(backend, model, api_base, sessions_dir, draft_steps, refine_steps,
                                memory=bank, first_task=first, verify_config=config)
    from evokernel_tui.app import EvoKernelApp

    app = EvoKernelApp(open_session=opener, task=first.name if first is not None else task, prebuild_starter=True,
                       task_checks=task_checks(memory_gb),  # memory estimate, probe, degeneracy: after the paint
                       starter=_first_starter(first, backend, model), watch_path=watch_path)
    run_app(app)


def run_app(app: Any) -> None:
    """`app.run()`, where SIGTERM and SIGINT kill every child process at once and close the app (its
    terminal restored), then end the command in one line with 143 or 130 (`cli.stopped`)."""
    import asyncio

    from core import lifetime
    from evokernel_tui.cli import stopped

    def close(_signum: int) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise lifetime.Cancelled(_signum) from None  # not running yet, or already closed
        loop.call_soon_threadsafe(app.exit, None, lifetime.exit_code())

    lifetime.install_handlers(on_signal=close)
    try:
        app.run()
    finally:
        lifetime.install_handlers()
    if lifetime.shutting_down():
        stopped()


def _first_starter(task: Any, backend: str, model: str | None) -> str | None:
    """In manual mode, the starter kernel the session will begin from, worked out from the task's source
    (`ast` only, no run), so the kernel pane has it at the first paint; None when a model drafts instead."""
    if task is None or model:
        return None
    from core.config import load_settings
    from core.starter import starter_kernel

    if load_settings().model:
        return None
    return starter_kernel(task.name, task.source, backend)


def _check_watched(path: Path) -> None:
    """`--watch FILE` names a readable text file (one line before the full screen when not)."""
    if not path.is_file():
        raise click.ClickException(f"--watch {path}: no such file; give a kernel file that exists (a KernelBench "
                                   "ModelNew), e.g. a copy of the starter from `evokernel tui` (x saves it)")
    try:
        path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise click.ClickException(f"--watch {path}: cannot read it ({getattr(exc, 'strerror', None) or exc})") from None


def _meta_model(path: Path) -> dict[str, Any] | None:
    """The model a saved session records (its meta.json), None when it has none or cannot be read (the
    session's opening says why)."""
    from core.session import SessionError, load_meta

    try:
        return load_meta(path).model
    except (SessionError, OSError, ValueError):
        return None


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
