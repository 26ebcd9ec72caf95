"""`evokernel tasks`: list the built-in task suite.

Reads only the suite's index.json, so listing never imports torch.
"""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table

from core.tasks import TaskError, TaskMeta, builtin_index


def _rows(level: int | None, category: str | None) -> list[TaskMeta]:
    rows = builtin_index()
    if level is not None:
        rows = [r for r in rows if r.level == level]
    if category is not None:
        rows = [r for r in rows if r.category == category.lower()]
    return rows


def _table(rows: list[TaskMeta]) -> Table:
    table = Table(title=f"Built-in tasks ({len(rows)})", title_justify="left")
    table.add_column("name", style="bold cyan", no_wrap=True)
    table.add_column("level", justify="right")
    table.add_column("category", style="magenta")
    table.add_column("description")
    for r in rows:
        table.add_row(r.name, str(r.level), r.category, r.description)
    return table


@click.command(name="tasks")
@click.option("--level", type=click.IntRange(1, 3), default=None, help="Only tasks of this level (1-3).")
@click.option("--category", default=None, help="Only tasks of this category (e.g. softmax, fusion).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list instead of a table.")
def tasks(level: int | None, category: str | None, as_json: bool) -> None:
    """List the built-in tasks (name, level, category, description)."""
    try:
        rows = _rows(level, category)
    except TaskError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        fields = ("name", "level", "category", "description")
        click.echo(json.dumps([{k: r.to_dict()[k] for k in fields} for r in rows], indent=2))
        return
    if not rows:
        raise click.ClickException("no built-in tasks match; try without --level/--category")
    Console().print(_table(rows))
