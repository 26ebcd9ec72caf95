"""The `evokernel` command line.

Subcommands live one module each under `evokernel_tui.commands` and are imported only when
invoked, so `evokernel --help` and the app's first paint never pay for torch or litellm.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn, cast

import click

from core.shell import runnable

# subcommand name -> (module under evokernel_tui.commands, attribute, one-line help)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "verify": ("verify", "verify", "Run the multi-gate verifier on a candidate kernel."),
    "compare": ("compare", "compare", "Re-time two versions of a session's kernel back to back (paired)."),
    "tasks": ("task_show", "tasks", "List the built-in tasks; `tasks show NAME` describes one."),
    "memory": ("memory", "memory", "Inspect and manage the memory bank."),
    "draft": ("draft", "draft", "Draft (and optionally refine) one op headless."),
    "resume": ("sessions", "resume", "Continue a saved session."),
    "replay": ("sessions", "replay", "Replay a saved session."),
    "sessions": ("sessions", "sessions", "List saved sessions; `sessions export` writes training trajectories."),
    "tui": ("tui", "tui", "Open the app."),
    "bench": ("bench", "bench", "Run the draft/refine loop over a suite of tasks."),
}


# One error policy for every command and the app: these are problems with what a person gave us
# (config file, task, session, memory bank, model or its key, backend), not bugs. They print as one
# line saying what to do, exit 1, and never show a traceback. Matched by class name so that checking
# an error never imports the layer that raised it.
USER_ERRORS = frozenset({
    "ConfigError", "TaskError", "SessionError", "SessionBusy", "LockHeld", "ModelError", "MemoryCorrupt",
    "VerifyError", "VerifierError", "BackendUnavailable", "ProbeError", "BenchError", "ExecutorError",
})
HELP_FLAGS = frozenset({"--help", "-h"})


def is_user_error(exc: BaseException) -> bool:
    return any(cls.__name__ in USER_ERRORS for cls in type(exc).__mro__)


def one_line(exc: BaseException) -> str:
    """The first line of an error's message (its class name when it has none): `core.fsutil.first_line`."""
    from core.fsutil import first_line

    return first_line(exc)


@contextmanager
def one_line_errors(*kinds: type[BaseException]) -> Iterator[None]:
    """Errors of `kinds` (default: any of USER_ERRORS) raised inside become one line saying what to do (a
    ClickException, exit 1), never a traceback: the group's error policy, for code a command runs itself."""
    try:
        yield
    except click.ClickException:
        raise
    except Exception as exc:
        if isinstance(exc, kinds) if kinds else is_user_error(exc):
            raise click.ClickException(one_line(exc)) from None
        raise


def check_settings() -> None:
    """Read and check the environment and config.toml; a problem is one line (click) before any work."""
    from core.config import ConfigError, load_settings

    try:
        load_settings()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None


def check_model(model: str | None, api_base: str | None) -> None:
    """The model a command would use can be called from here: its key is set, a scripted file reads.

    Run before a session (or the full-screen app) starts, so a missing key is one line at once and
    no session folder is made for it.
    """
    from core.config import ConfigError, api_key_problem, load_settings

    try:
        if not model and not load_settings().model:
            return  # manual mode: nothing to call (and core.llm stays unimported until after first paint)
    except ConfigError as exc:
        raise click.ClickException(one_line(exc)) from None
    from core.llm import SCRIPTED_PREFIX, ModelError, ScriptedModel, resolve_model

    try:
        cfg = resolve_model(model, api_base)
        if cfg is None:
            return
        if cfg.model.startswith(SCRIPTED_PREFIX):
            ScriptedModel.from_file(cfg.model[len(SCRIPTED_PREFIX):])
            return
        problem = api_key_problem(cfg.model, cfg.api_base)
    except (ConfigError, ModelError) as exc:
        raise click.ClickException(one_line(exc)) from None
    if problem:
        raise click.ClickException(problem)
    check_endpoint(cfg.api_base)


def check_endpoint(api_base: str | None) -> None:
    """An `--api-base` server answers a connection (a few seconds at most), before any session folder or
    model call; one line when it does not."""
    from core.config import endpoint_problem

    problem = endpoint_problem(api_base)
    if problem:
        raise click.ClickException(problem)


def recorded_api_base(model_meta: dict[str, Any] | None) -> str | None:
    """The `--api-base` a saved session's model was created with (None: none, or not a served model)."""
    if not model_meta or model_meta.get("kind") != "litellm":
        return None
    return (model_meta.get("config") or {}).get("api_base") or None


def check_backend(backend: str) -> None:
    """The backend can build and run kernels here (a GPU for cuda, triton installed, a C++ compiler for cpu,
    room on the build folder's disk): the check `verify` makes, made before any model call, session folder or task run; one line when not."""
    from core.verifying import backend_problem, build_root_problem

    problem = backend_problem(backend) or build_root_problem()
    if problem:
        raise click.ClickException(problem)


def check_task(task: str | None, kernelbench: str | None = None, level: int | None = None,
               problem: int | None = None) -> Any:
    """The task a command names, loaded and checked (default relu); one line when it is not usable."""
    from core.tasks import TaskError, load_task

    try:
        if kernelbench:
            return load_task(task, kernelbench=kernelbench, level=level, problem=problem)
        return load_task(task or "relu")
    except TaskError as exc:
        raise click.ClickException(one_line(exc)) from None


def check_task_size(task: Any, memory_gb: float | None, flag: str = "--memory-gb", backend: str = "cpu") -> None:
    """Refuse, in one line naming the estimate, the limit and `flag`, a problem whose reference would not
    fit in the verifier's memory limit (and, on a GPU backend, one the card cannot hold now); estimated on
    torch's meta device (nothing allocated) before any work starts. Built-in tasks are small (a test checks) and cost nothing here."""
    from core.tasks import TaskError, check_device_memory, check_task_memory, is_builtin

    if is_builtin(task):
        return
    from evokernel_tui.options import DEFAULT_MEMORY_GB

    try:
        estimate = check_task_memory(task, memory_gb or DEFAULT_MEMORY_GB, flag)
        if backend in ("cuda", "triton"):
            check_device_memory(task, estimate)  # the card's free memory, before any model call
    except TaskError as exc:
        raise click.ClickException(one_line(exc)) from None


MEMORY_FIX = "run `evokernel memory repair`, pass --memory FILE for another bank, or --no-memory"
QUICK_CHECK_BYTES = 8 * 1024 * 1024


def memory_path(path: str | None) -> Path:
    """The bank a command uses: --memory > $EVOKERNEL_MEMORY > config `memory` > the user data dir."""
    if path:
        return Path(path).expanduser()
    from core.config import load_settings

    configured = load_settings().memory
    if configured is not None:
        return configured
    from platformdirs import user_data_dir

    return Path(user_data_dir("evokernel")) / "memory.json"


def check_memory(path: str | None, enabled: bool) -> Path | None:
    """Check the memory bank before the full screen starts, without importing the memory layer (it
    costs half a second of first paint): the file, when it exists, must be readable JSON (banks up to
    8 MiB are parsed; larger ones are opened by the session, which reports a problem as one line)."""
    if not enabled:
        return None
    bank = memory_path(path)
    if not bank.exists():
        return bank
    try:
        if bank.is_dir():
            raise OSError("it is a directory")
        with bank.open("rb") as fh:
            head = fh.read(QUICK_CHECK_BYTES + 1)
        if len(head) <= QUICK_CHECK_BYTES:
            import json

            json.loads(head)
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise click.ClickException(f"cannot open the memory bank {bank} ({reason}); {MEMORY_FIX}") from None
    return bank


def open_memory_checked(path: str | None, enabled: bool) -> Any:
    """The memory bank opened (None with --no-memory); a damaged or locked bank is one line."""
    if not enabled:
        return None
    from core.bank import MemoryStore

    try:
        return MemoryStore(memory_path(path))
    except Exception as exc:  # MemoryCorrupt, a lock held, an unreadable file: say so and how around it
        raise click.ClickException(f"cannot open the memory bank ({one_line(exc)}); {MEMORY_FIX}") from None


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use, under one error policy."""

    def invoke(self, ctx: click.Context) -> object:
        args = [*getattr(ctx, "_protected_args", []), *ctx.args]
        if args and not HELP_FLAGS.intersection(args):
            check_settings()
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            stopped()
        except click.ClickException as exc:
            # click types `message` Final, but it is a plain attribute that `show()` reads: rewriting it is the point
            exc.message = runnable(exc.message)  # type: ignore[misc]  # `evokernel memory repair` as the shell here can run it
            raise
        except Exception as exc:
            if is_user_error(exc):
                raise click.ClickException(runnable(one_line(exc))) from None
            raise

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        spec = COMMANDS.get(cmd_name)
        if spec is None:
            return None
        module_name, attr, help_text = spec
        try:
            module = importlib.import_module(f"evokernel_tui.commands.{module_name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"evokernel_tui.commands.{module_name}":
                raise

            @click.command(name=cmd_name, help=help_text)
            def missing() -> None:
                raise click.ClickException(f"`evokernel {cmd_name}` is not available in this build yet.")

            return missing
        return getattr(module, attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, spec[2]) for name, spec in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


NEEDS_SANDBOX = {"verify", "compare", "draft", "bench", "tui", "resume"}


def check_isolation(unsafe: bool) -> None:
    """Candidates run only inside OS isolation; where none can be had, say so before anything starts
    (no silent downgrade). `--unsafe-no-isolation` opts out, and every verdict then says "unisolated"."""
    import os

    if unsafe:
        os.environ["EVOKERNEL_UNSAFE_NO_ISOLATION"] = "1"
        return
    if os.environ.get("EVOKERNEL_UNSAFE_NO_ISOLATION") == "1":
        return
    from core.verdicts import isolation_unavailable_reason

    reason = isolation_unavailable_reason()
    if reason:
        raise click.ClickException(reason)


@click.group(cls=LazyGroup, invoke_without_command=True)
@click.version_option(package_name="evokernel-tui")
@click.option("--unsafe-no-isolation", is_flag=True,
              help="Run candidates without OS isolation (every verdict then says 'unisolated').")
@click.pass_context
def cli(ctx: click.Context, unsafe_no_isolation: bool) -> None:
    """EvoKernel: write and tune compute kernels with a language model and a verifier."""
    if (ctx.invoked_subcommand or "tui") in NEEDS_SANDBOX:
        check_isolation(unsafe_no_isolation)
    if ctx.invoked_subcommand is None:
        ctx.invoke(cast(click.Command, cli.get_command(ctx, "tui")))  # "tui" is in COMMANDS: never None


EXIT_GRACE_S = 10.0  # what a cancelled command's interpreter may take to exit once it has unwound


def stopped(message: str | None = None) -> NoReturn:
    """The orderly end of a cancelled command (ctrl+c, SIGTERM): every child process killed (already, by the
    signal handler; again here in case the interrupt came another way), one line, exit 130 or 143."""
    from core import lifetime

    lifetime.kill_all()
    click.echo(runnable(f"evokernel: interrupted ({lifetime.signal_name()}); {message or 'stopped every child process'}"),
               err=True)
    lifetime.exit_within(EXIT_GRACE_S, lifetime.exit_code())
    sys.exit(lifetime.exit_code())


def install_signal_handlers() -> None:
    """SIGTERM and SIGINT kill every child process first, then unwind the command (temporary job
    directories are removed on the way) and end it through `stopped`."""
    from core import lifetime

    lifetime.install_handlers()


def main(argv: list[str] | None = None) -> None:
    install_signal_handlers()
    try:
        cli.main(args=argv if argv is not None else sys.argv[1:], prog_name="evokernel")
    except KeyboardInterrupt:  # before or after a command ran (click's own parsing, its teardown)
        stopped()


if __name__ == "__main__":
    main()
