"""`evokernel tasks`: list the built-in task suite, or the problems of a KernelBench checkout with their shapes.

The built-in listing reads only the suite's index.json, so it never imports torch. `--kernelbench DIR`
works out every problem's input and output shapes and the memory one reference run needs on torch's meta
device (nothing is allocated; one child process, results cached per file); `--degenerate` also runs each
reference to find tasks that a trivial answer passes.
"""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from core.tasks import TaskError, TaskMeta, builtin_index
from evokernel_tui import options
from evokernel_tui.cli import one_line_errors


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


def kernelbench_rows(root: str, level: int | None, category: str | None, memory_gb: float,
                     degenerate: str | None, progress: dict | None = None) -> list[dict]:
    """One record per problem: level, problem, name, category, shapes, memory estimate, and flags.
    `progress` (filled as it goes: `total`, `done`, `at`) lets the command say how far a long
    `--degenerate` pass got, each problem as it starts and where it was when stopped."""
    from core.tasks import (
        estimate_many,
        fmt_bytes,
        kernelbench_problems,
        memory_refusal,
        problem_number,
        task_degeneracy,
    )

    tasks = kernelbench_problems(root, [level] if level is not None else None)
    if category is not None:
        tasks = [t for t in tasks if t.category == category.lower()]
    rows: list[dict[str, Any]] = []
    progress = progress if progress is not None else {}
    progress.update(total=len(tasks), done=0, at=None)
    for task, est in zip(tasks, estimate_many(tasks), strict=True):
        row: dict[str, Any] = {"level": task.level, "problem": problem_number(task), "name": task.name, "category": task.category,
               "path": task.path, "inputs": None, "outputs": None, "memory_bytes": None, "fits": None,
               "description": task.description}
        if est is not None:
            row.update(inputs=[s.short() for s in est.inputs], outputs=[s.short() for s in est.outputs],
                       memory_bytes=est.bytes, memory=fmt_bytes(est.bytes),
                       fits=memory_refusal(task.name, est, memory_gb) is None)
        if degenerate is not None:
            if row["fits"] is False:
                row["degenerate"] = None
            else:
                progress["at"] = task.name
                click.echo(f"trivial answers: {progress['done'] + 1}/{progress['total']} {task.name}", err=True)
                found = task_degeneracy(task, degenerate, memory_gb=memory_gb)
                # the trivial answers that pass (a `Degeneracy` record, or None when the check could not run)
                row["degenerate"] = None if found is None else list(found.found)
        rows.append(row)
        progress["done"] += 1
    return rows


def _kernelbench_table(rows: list[dict], root: str, memory_gb: float) -> Table:
    table = Table(title=f"KernelBench problems in {root} ({len(rows)})", title_justify="left")
    columns: tuple[tuple[str, dict[str, Any]], ...] = (
        ("L", {"justify": "right"}), ("#", {"justify": "right"}), ("name", {"style": "bold cyan"}),
        ("inputs", {}), ("output", {}), ("memory", {"justify": "right"}))
    for col, kw in columns:
        table.add_column(col, **kw)
    show_degenerate = any("degenerate" in r for r in rows)
    if show_degenerate:
        table.add_column("trivial answers")
    for r in rows:
        memory = r.get("memory") or "?"
        if r["fits"] is False:
            memory = f"[red]{memory} > {memory_gb:g} GiB[/]"
        cells = [str(r["level"]), str(r["problem"]), r["name"], "; ".join(r["inputs"] or ["?"]),
                 "; ".join(r["outputs"] or ["?"]), memory]
        if show_degenerate:
            found = r.get("degenerate")
            cells.append("not run" if found is None else ("[yellow]" + ", ".join(found) + " pass[/]" if found else "none"))
        table.add_row(*cells)
    return table


@click.command(name="tasks")
@click.option("--level", type=click.IntRange(1, 9), default=None, help="Only tasks of this level.")
@click.option("--category", default=None, help="Only tasks of this category (e.g. softmax, fusion).")
@click.option("--kernelbench", type=click.Path(file_okay=False), default=None,
              help="List the problems of a KernelBench checkout, with shapes and memory, instead of the built-ins.")
@click.option("--memory-gb", default=8.0, show_default=True, type=float,
              help="With --kernelbench: mark problems whose reference needs more memory than this.")
@click.option("--degenerate", type=click.Choice(options.TOLERANCE_PRESETS), default=None,
              help="With --kernelbench: run each reference and flag tasks a trivial answer passes at this tolerance.")
@options.json_output("Print a JSON list instead of a table.")
def tasks(level: int | None, category: str | None, kernelbench: str | None, memory_gb: float, degenerate: str | None,
          as_json: bool) -> None:
    """List the built-in tasks (name, level, category, description), or a KernelBench checkout's problems."""
    rows: list[dict[str, Any]] | list[TaskMeta]  # a KernelBench checkout's problems, or the built-ins
    if kernelbench is not None:
        progress: dict = {}
        try:
            with one_line_errors(TaskError):
                rows = kernelbench_rows(kernelbench, level, category, memory_gb, degenerate, progress)
        except KeyboardInterrupt:  # ctrl+c or SIGTERM in a long --degenerate pass: where it was, exit 130/143
            from evokernel_tui.cli import stopped

            at = f" (at {progress['at']})" if progress.get("at") else ""
            stopped(f"stopped checking the problems of {kernelbench} after {progress.get('done', 0)} of "
                    f"{progress.get('total', '?')}{at}; nothing printed")
        if as_json:
            click.echo(json.dumps(rows, indent=2))
        else:
            Console().print(_kernelbench_table(rows, kernelbench, memory_gb))
        return
    if degenerate is not None:
        raise click.UsageError("--degenerate goes with --kernelbench DIR (no built-in task is degenerate: a test checks)")
    with one_line_errors(TaskError):
        rows = _rows(level, category)
    if as_json:
        fields = ("name", "level", "category", "description")
        click.echo(json.dumps([{k: r.to_dict()[k] for k in fields} for r in rows], indent=2))
        return
    if not rows:
        raise click.ClickException("no built-in tasks match; try without --level/--category")
    Console().print(_table(rows))
