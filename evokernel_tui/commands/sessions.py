"""`evokernel sessions`, `resume SESSION` and `replay SESSION`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from core.config import sessions_root
from core.events import describe_event
from core.llm import ModelError, resolve_model
from core.session import Session, SessionError, find_session, list_sessions, reverify_all
from core.session import replay as replay_events
from evokernel_tui import options
from evokernel_tui.cli import (
    check_backend,
    check_endpoint,
    check_model,
    one_line_errors,
    open_memory_checked,
    recorded_api_base,
)
from evokernel_tui.commands.draft import default_out, finish, run_headless


def _best_speed(row: dict) -> str:
    """The best kernel's speedup as `core.events.speed_text` writes it (the app header's definition:
    noisy and cached figures marked); rows from older summaries fall back to the bare number."""
    if row.get("best_speed"):
        return row["best_speed"]
    value = row.get("best_speedup")
    return f"{value:.2f}x" if value else "-"


def _cost(row: dict) -> str:
    return "unknown" if row.get("cost") is None else f"${row['cost']:.4f}"


@click.group(name="sessions", invoke_without_command=True)
@options.sessions_dir
@options.json_output("Print a JSON list.")
@click.pass_context
def sessions(ctx: click.Context, sessions_dir: str | None, as_json: bool) -> None:
    """List saved sessions: task, backend, model, steps, best speedup and cost; `sessions export` writes
    their model turns as training trajectories."""
    ctx.obj = {"sessions_dir": sessions_dir}
    if ctx.invoked_subcommand is not None:
        return
    root = sessions_root(sessions_dir)
    rows = list_sessions(root)
    if as_json:
        click.echo(json.dumps(rows, indent=2, default=str))
        return
    if not rows:
        click.echo(f"No sessions under {root}.")
        return
    console = Console()
    table = _sessions_table(root, rows)
    # the narrowest the table can be: every column at its least, one space between columns
    if table is None or sum(c.min_width or 0 for c in table.columns) + len(table.columns) - 1 > console.width:
        _print_stacked(console, root, rows)  # long ids on a narrow terminal: one block per session
    else:
        console.print(table)


def _cells(r: dict) -> tuple[str, str, str, str, str]:
    """task, model, stage with steps, best and cost of one listed session."""
    steps = f"{r['steps']['draft']}+{r['steps']['refine']}"
    return f"{r['task']} ({r['backend']})", r["model"] or "manual", f"{r['stage']} {steps}", _best_speed(r), _cost(r)


def _sessions_table(root: Path, rows: list[dict]) -> Table | None:
    """Safe at 80 columns: the id (what `resume` and `tui --session` take) is never cut, nor a figure;
    the task wraps and the model is cut with an ellipsis. None when no row has details to show."""
    from rich import box

    good = [_cells(r) for r in rows if "error" not in r]
    if not good:
        return None
    table = Table(title=f"Sessions in {root}", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
                  padding=0, pad_edge=False)
    longest = max(len(str(r["id"])) for r in rows)
    table.add_column("id", no_wrap=True, min_width=longest)
    table.add_column("task", overflow="fold", min_width=8, ratio=3)
    table.add_column("model", overflow="ellipsis", min_width=6, max_width=18, ratio=2)
    for i, col in ((2, "stage"), (3, "best"), (4, "cost")):
        table.add_column(col, no_wrap=True, min_width=max(len(c[i]) for c in good))
    for r in rows:
        if "error" in r:
            table.add_row(r["id"], f"[red]{escape(r['error'])}[/]", "", "", "", "")
        else:
            table.add_row(r["id"], *_cells(r))
    return table


def _print_stacked(console: Console, root: Path, rows: list[dict]) -> None:
    """Each session as its whole id on one line and its details indented below (wrapping as needed)."""
    console.print(f"Sessions in {root}", highlight=False)
    for r in rows:
        console.print(f"[bold]{escape(str(r['id']))}[/]", highlight=False, overflow="ignore", crop=False)
        if "error" in r:
            console.print(f"  [red]{escape(r['error'])}[/]", highlight=False)
            continue
        task, model, stage, best, cost = _cells(r)
        details = Text(f"{task} · {model} · {stage} · best {best} · {cost}")
        console.print(Padding(details, (0, 0, 0, 2)), highlight=False)


@sessions.command(name="export")
@click.argument("refs", nargs=-1)
@options.sessions_dir
@click.option("--format", "fmt", type=click.Choice(["jsonl"]), default="jsonl", show_default=True,
              help="Output format (docs/trajectories.md describes the records).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write to this file instead of standard output.")
@click.pass_context
def export(ctx: click.Context, refs: tuple[str, ...], sessions_dir: str | None, fmt: str, out: Path | None) -> None:
    """Write one JSON record per model turn of the sessions REFS (ids, id prefixes, session folders or
    `bench` output folders; default: every session): the prompt, reply, kernel, verdict, reward and the
    memories in context, read from the recorded events (nothing is re-run)."""
    from core.session.export import export_session, session_folders

    root = sessions_root(sessions_dir or (ctx.obj or {}).get("sessions_dir"))
    with one_line_errors(SessionError):
        paths: list[Path] = []
        for ref in refs or (str(root),):
            found = session_folders(Path(ref))
            paths.extend(found or [find_session(ref, root)])
        records = [rec for p in dict.fromkeys(paths) for rec in export_session(p)]
    lines = "".join(json.dumps(r, default=str) + "\n" for r in records)
    if out is None:
        click.echo(lines, nl=False)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(lines, encoding="utf-8")
        click.echo(f"{len(records)} turns from {len(dict.fromkeys(paths))} sessions -> {out}", err=True)


@click.command(name="resume")
@click.argument("session_ref")
@options.sessions_dir
@click.option("--model", default=None, help="Use this model instead of the one the session was created with.")
@options.api_base
@click.option("--add-draft", type=click.IntRange(0, 100), default=0, help="Grant more drafting steps.")
@click.option("--add-refine", type=click.IntRange(0, 100), default=0, help="Grant more refining steps.")
@options.memory_bank()
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where to write the final kernel (default: <task>_<backend>.py).")
@options.json_output("Print one JSON summary instead of the report.")
def resume(session_ref, sessions_dir, model, api_base, add_draft, add_refine, memory_path, no_memory, out, as_json) -> None:
    """Continue SESSION (a path, an id, or an id prefix) headless with its remaining budget."""
    console = Console(stderr=as_json)
    with one_line_errors(SessionError, ModelError):
        path = find_session(session_ref, sessions_root(sessions_dir))
        override = resolve_model(model, api_base) if model else False
        if model:
            check_model(model, api_base)  # a missing key is one line now, not after the session opens
        session = Session.open(path, model=override, memory=open_memory_checked(memory_path, not no_memory),
                               auto_accept=True)
        if add_draft:
            session.add_steps("draft", add_draft)
        if add_refine:
            session.add_steps("refine", add_refine)
    if session.stage != "done":  # what `draft` checks before a model call, for the session's own settings
        check_backend(session.backend)
        check_endpoint(api_base if model else recorded_api_base(session.meta.model))
    if session.stage == "done":
        console.print(f"session {session.id} is finished ({session.done_reason}); grant steps with --add-draft/--add-refine")
    else:
        console.print(f"resuming {session.id} at {session.stage} (draft {session.used['draft']}/{session.budgets.draft_steps}, "
                      f"refine {session.used['refine']}/{session.budgets.refine_steps})", highlight=False)
        try:
            run_headless(console, session)
        except KeyboardInterrupt:  # as `draft` says it: every step so far is in the session's log
            from evokernel_tui.cli import stopped

            stopped(f"continue with `evokernel resume {session.id}`")
    finish(session, out or default_out(session), as_json, console)


@click.command(name="replay")
@click.argument("session_ref")
@options.sessions_dir
@click.option("--reverify", is_flag=True, help="Verify every recorded kernel again on this machine and report differences.")
@options.json_output("Print the events as JSON lines, then a summary line.")
@click.option("--tui", "in_app", is_flag=True, help="Open the recording in the app's replay mode (←/→ to move).")
def replay(session_ref, sessions_dir, reverify, as_json, in_app) -> None:
    """Re-emit SESSION's recorded events in order and print a summary."""
    console = Console()
    with one_line_errors(SessionError):
        path = find_session(session_ref, sessions_root(sessions_dir))
        if in_app:
            from evokernel_tui.commands.tui import run_replay

            run_replay(path)
            return
        if as_json:
            replay_events(path, on_event=lambda ev: click.echo(json.dumps(ev.to_dict(), default=str)))
        else:
            replay_events(path, on_event=lambda ev: _print_event(console, ev))
        summary = Session.open(path, lock=False).summary()
    if as_json:
        click.echo(json.dumps({"summary": summary}, default=str))
    else:
        best: Any = summary["best"]
        best_text = f"v{best['version']} {_best_speed(summary)}" if best else "none"
        console.print(f"[bold]{summary['task']}[/] on {summary['backend']} with {summary['model'] or 'no model'}: "
                      f"{summary['kernels']} kernels, stage {summary['stage']}, best {best_text}, cost {_cost(summary)}"
                      + (f", refinement v{summary['pending']} pending" if summary["pending"] is not None else ""))
    if reverify:
        try:
            differs = _reverify(console, path, as_json)
        except KeyboardInterrupt:
            from evokernel_tui.cli import stopped

            stopped(f"stopped re-verifying session {path.name}; the recording is unchanged")
        sys.exit(1 if differs else 0)


def _print_event(console: Console, ev) -> None:
    line = describe_event(ev)
    if line:
        console.print(f"[dim]step {ev.step:>2} {ev.kind:<18}[/] {line}", highlight=False)


def _reverify(console: Console, path: Path, as_json: bool) -> int:
    rows = reverify_all(path)
    if as_json:
        click.echo(json.dumps({"reverify": [r.to_dict() for r in rows]}, default=str))
    else:
        table = Table(title="Re-verified on this machine", title_justify="left")
        for col in ("version", "author", "recorded", "now", "recorded ms", "now ms", "differs"):
            table.add_column(col)
        for r in rows:
            now = r.outcome if not r.error else f"error: {r.error}"
            table.add_row(str(r.version), r.author, r.recorded_outcome, now, _ms(r.recorded_ms), _ms(r.latency_ms),
                          "[red]yes[/]" if r.differs else "no")
        console.print(table)
    return sum(r.differs for r in rows)


def _ms(value: float | None) -> str:
    return f"{value:.4f}" if value is not None else "-"
