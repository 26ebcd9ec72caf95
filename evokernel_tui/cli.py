"""The `evokernel` command line.

Subcommands live one module each under `evokernel_tui.commands` and are imported only when
invoked, so `evokernel --help` and the app's first paint never pay for torch or litellm.
"""

from __future__ import annotations

import importlib
import sys

import click

# subcommand name -> (module under evokernel_tui.commands, attribute, one-line help)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "verify": ("verify", "verify", "Run the multi-gate verifier on a candidate kernel."),
    "tasks": ("tasks", "tasks", "List the built-in tasks."),
    "memory": ("memory", "memory", "Inspect and manage the memory bank."),
    "draft": ("draft", "draft", "Draft (and optionally refine) one op headless."),
    "resume": ("sessions", "resume", "Continue a saved session."),
    "replay": ("sessions", "replay", "Replay a saved session."),
    "sessions": ("sessions", "sessions", "List saved sessions."),
    "tui": ("tui", "tui", "Open the app."),
    "bench": ("bench", "bench", "Run the draft/refine loop over a suite of tasks."),
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

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


@click.group(cls=LazyGroup, invoke_without_command=True)
@click.version_option(package_name="evokernel-tui")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """EvoKernel: write and tune compute kernels with a language model and a verifier."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(cli.get_command(ctx, "tui"))


def main(argv: list[str] | None = None) -> None:
    cli.main(args=argv if argv is not None else sys.argv[1:], prog_name="evokernel")


if __name__ == "__main__":
    main()
