"""`evokernel tasks show NAME`: one task in full (reference source, shapes and dtypes, init arguments,
tolerance, eager time), and the `tasks` group that adds it to the listing in `commands/tasks.py`.

`evokernel tasks [--level N] …` still lists; `evokernel tasks show relu` describes one task. Shapes
come from running the reference once in a child process (a few seconds); `--no-run` skips that.
"""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Console
from rich.syntax import Syntax
from rich.table import Table

from evokernel_tui.commands.tasks import tasks as list_tasks


@click.pass_context
def _list_unless_subcommand(ctx: click.Context, **kwargs: Any) -> None:
    if ctx.invoked_subcommand is None:
        ctx.invoke(list_tasks.callback, **kwargs)


tasks = click.Group(
    name="tasks",
    params=list(list_tasks.params),
    callback=_list_unless_subcommand,
    invoke_without_command=True,
    help=(list_tasks.help or "") + "\n\n`evokernel tasks show NAME` describes one task in full.",
)


@tasks.command(name="show")
@click.argument("task")
@click.option("--no-run", is_flag=True, help="Do not run the reference to read shapes and time it.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def show(task: str, no_run: bool, as_json: bool) -> None:
    """Describe TASK (a built-in name or a task file): reference source, shapes, init args, tolerance, eager time."""
    from core.tasks import TaskError, load_task, validate_task
    from evokernel_tui.commands.render import task_rows
    from evokernel_tui.screens.task_view import verifier_tolerance

    try:
        the_task = load_task(task)
    except TaskError as exc:
        raise click.ClickException(str(exc)) from None
    info, error = None, None
    if not no_run:
        try:
            info = validate_task(the_task, timeout_s=60)
        except TaskError as exc:
            error = str(exc)
    tolerance = verifier_tolerance()
    rows = task_rows(the_task, info, probe_error=error or ("not run (--no-run)" if no_run else None), **tolerance)
    if as_json:
        record = {"name": the_task.name, "level": the_task.level, "category": the_task.category,
                  "description": the_task.description, "path": the_task.path, "source": the_task.source,
                  **tolerance, "probe_error": error}
        if info is not None:
            record.update(inputs=[vars(s) for s in info.inputs], outputs=[vars(s) for s in info.outputs],
                          init_args=info.init_args, parameters=info.parameters, reference_ms=info.reference_ms)
        click.echo(json.dumps(record, indent=2, default=str))
        return
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold cyan", no_wrap=True)
    table.add_column(overflow="fold")
    for label, value in rows:
        table.add_row(label, value)
    console = Console()
    console.print(table)
    console.rule("reference")
    console.print(Syntax(the_task.source, "python", line_numbers=True))
