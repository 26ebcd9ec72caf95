"""`evokernel tasks show NAME`: one task in full (reference source, shapes and dtypes, init arguments,
tolerance, eager time), and the `tasks` group that adds it to the listing in `commands/tasks.py`.

`evokernel tasks [--level N] …` still lists; `evokernel tasks show relu` describes one task. Shapes
come from running the reference once in a child process (a few seconds); `--no-run` skips that.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, cast

import click
from rich.console import Console
from rich.syntax import Syntax
from rich.table import Table

from evokernel_tui.cli import one_line_errors
from evokernel_tui.commands.tasks import tasks as list_tasks


@click.pass_context
def _list_unless_subcommand(ctx: click.Context, shapes: bool = False, **kwargs: Any) -> None:
    if ctx.invoked_subcommand is not None:
        return
    if shapes and not kwargs.get("kernelbench"):
        _list_with_shapes(kwargs.get("level"), kwargs.get("category"), bool(kwargs.get("as_json")))
        return
    ctx.invoke(cast(Callable[..., Any], list_tasks.callback), **kwargs)  # `@click.command` sets it: never None


def _list_with_shapes(level: int | None, category: str | None, as_json: bool) -> None:
    """The built-in listing with each task's input and output shapes, read on torch's meta device in
    one child process (nothing allocated; cached per task source, so later listings are instant)."""
    from core.tasks import TaskError, builtin_tasks, estimate_many

    with one_line_errors(TaskError):
        rows = [t for t in builtin_tasks() if (level is None or t.level == level)
                and (category is None or t.category == category.lower())]
        estimates = estimate_many(rows)
    records: list[dict[str, Any]] = [{"name": t.name, "level": t.level, "category": t.category, "description": t.description,
                "inputs": [s.short() for s in est.inputs] if est else None,
                "outputs": [s.short() for s in est.outputs] if est else None}
               for t, est in zip(rows, estimates, strict=True)]
    if as_json:
        click.echo(json.dumps(records, indent=2))
        return
    table = Table(title=f"Built-in tasks ({len(records)})", title_justify="left")
    table.add_column("name", style="bold cyan", no_wrap=True)
    table.add_column("level", justify="right")
    table.add_column("category", style="magenta")
    table.add_column("inputs")
    table.add_column("output")
    for r in records:
        table.add_row(r["name"], str(r["level"]), r["category"], "; ".join(r["inputs"] or ["?"]),
                      "; ".join(r["outputs"] or ["?"]))
    Console().print(table)


tasks = click.Group(
    name="tasks",
    params=[*list_tasks.params,
            click.Option(["--shapes"], is_flag=True,
                         help="Add each built-in task's input and output shapes (read on torch's meta device).")],
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

    with one_line_errors(TaskError):
        the_task = load_task(task)
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
