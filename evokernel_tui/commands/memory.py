"""`evokernel memory`: inspect, search, share and repair the memory bank (no torch import)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from evokernel_tui import options

REPAIR_HINT = "run `evokernel memory repair` to restore the last good backup"


def _open(path: str | None) -> Any:
    from core.bank import MemoryCorrupt, MemoryStore

    try:
        return MemoryStore(path)
    except MemoryCorrupt as exc:
        raise click.ClickException(f"{exc}; {REPAIR_HINT}") from None
    except (TimeoutError, OSError) as exc:
        raise click.ClickException(str(exc)) from None


def _emit(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


def _here(item: Any) -> str:
    """This machine's device class for the item's backend (`core.device`): what "another device" is measured
    against. Found only for items that record where they were learnt."""
    if not getattr(item, "learnt_on", ""):
        return ""
    from core.device import device_record

    backend = str((item.data.get("device") or {}).get("backend") or (item.backends or ["cpu"])[0])
    return device_record(backend)["class"]


def _short(item: Any) -> dict[str, Any]:
    return {
        "id": item.id,
        "kind": item.kind,
        "backends": item.backends,
        "category": item.category,
        "title": item.title,
        "q1": round(item.q1, 4),
        "q2": round(item.q2, 4),
        "visits1": item.visits1,
        "visits2": item.visits2,
        "provenance": item.provenance,
        "learnt_on": item.learnt_on,
        "elsewhere": item.learnt_elsewhere(_here(item)),
    }


KIND_SHORT = {"seed": "seed", "trajectory": "traj", "insight": "ins"}


def _items_table(title: str, rows: list[dict[str, Any]], extra: tuple[str, ...] = ()) -> Table:
    """Readable at 80 columns, one line an item: ids whole (what `show` takes), the title (and its
    category) cut with an ellipsis, never wrapped (`show ID` prints it in full).

    With `extra` score columns (search), the per-stage values give way to the score parts.
    """
    from rich import box

    table = Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0))
    table.add_column("id", no_wrap=True, min_width=max((len(r["id"]) for r in rows), default=2))
    table.add_column("kind", no_wrap=True)
    if not extra:
        table.add_column("backend", no_wrap=True, overflow="ellipsis", max_width=12)
    # the column may shrink (rich narrows wrappable columns first); each cell then keeps to one line
    table.add_column("title", min_width=12, ratio=1)
    numbers = extra or ("Q1", "Q2", "n")
    for col in numbers:
        table.add_column({"similarity": "sim", "exploration": "expl", "chosen_by": "by"}.get(col, col), justify="right",
                         no_wrap=True)
    for r in rows:
        values = {"Q1": f"{r['q1']:.2f}", "Q2": f"{r['q2']:.2f}", "n": f"{r['visits1']}/{r['visits2']}"}
        cells: list[str | Text] = [r["id"], KIND_SHORT.get(r["kind"], r["kind"])]
        if not extra:
            cells.append(",".join(r["backends"]) or "any")
        learnt = (f" [yellow](learnt on {escape(str(r['learnt_on']))}, another device)[/]"
                  if r.get("elsewhere") else "")
        heading = Text.from_markup(f"{escape(r['title'])} [dim]({escape(r['category'])})[/]{learnt}")
        heading.no_wrap, heading.overflow = True, "ellipsis"
        cells.append(heading)
        cells += [values[c] if c in values else r[c] if isinstance(r[c], str) else f"{r[c]:.2f}" for c in numbers]
        table.add_row(*cells)
    return table


def memory_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--memory",
        "memory_path",
        type=click.Path(dir_okay=False),
        default=None,
        help="Memory bank file (default: $EVOKERNEL_MEMORY, config.toml or the user data dir).",
    )(fn)


json_option = options.json_output("Print JSON instead of a table.")


def _path(ctx: click.Context, memory_path: str | None) -> str | None:
    return memory_path or (ctx.obj or {}).get("memory")


@click.group()
@memory_option
@click.pass_context
def memory(ctx: click.Context, memory_path: str | None) -> None:
    """Inspect and manage the memory bank."""
    ctx.obj = {"memory": memory_path}


@memory.command("list")
@memory_option
@json_option
@click.option("--kind", type=click.Choice(["seed", "trajectory", "insight"]), default=None)
@click.option("--backend", default=None, help="Only items for this backend.")
@click.option("--limit", type=int, default=50, show_default=True)
@click.pass_context
def list_items(
    ctx: click.Context,
    memory_path: str | None,
    as_json: bool,
    kind: str | None,
    backend: str | None,
    limit: int,
) -> None:
    """List items, highest draft value first."""
    store = _open(_path(ctx, memory_path))
    items = [i for i in store.items(kind) if backend is None or not i.backends or backend in i.backends]
    items.sort(key=lambda i: (-i.q1, -i.q2, i.id))
    rows = [_short(i) for i in items[: max(0, limit)]]
    if as_json:
        _emit(rows)
        return
    Console().print(_items_table(f"{len(items)} items in {store.path}", rows))


@memory.command("show")
@click.argument("item_id")
@memory_option
@json_option
@click.pass_context
def show(ctx: click.Context, item_id: str, memory_path: str | None, as_json: bool) -> None:
    """Show one item in full."""
    store = _open(_path(ctx, memory_path))
    try:
        item = store.get(item_id)
    except KeyError:
        raise click.ClickException(
            f"no memory item {item_id!r}; see `evokernel memory list` or `evokernel memory search`"
        ) from None
    here = _here(item)
    if as_json:
        _emit({**item.to_dict(), "learnt_on": item.learnt_on, "elsewhere": item.learnt_elsewhere(here)})
        return
    console = Console()
    table = Table(title=item.title, show_header=False)
    if item.learnt_on:
        note = " [yellow](another device than this one)[/]" if item.learnt_elsewhere(here) else ""
        table.add_row("learnt on", f"{item.learnt_on}{note}")
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    for key, value in item.to_dict().items():
        if key not in ("title", "text", "data"):
            table.add_row(key, ", ".join(value) if isinstance(value, list) else str(value))
    console.print(table)
    console.print(item.text, markup=False, highlight=False)
    if item.data:
        console.print(json.dumps(item.data, indent=2, ensure_ascii=False), markup=False, highlight=False)


@memory.command("search")
@click.argument("query")
@memory_option
@json_option
@click.option("--backend", default="cpu", show_default=True)
@click.option("--category", default="")
@click.option("--stage", type=click.Choice(["draft", "refine"]), default="draft", show_default=True)
@click.option("-k", "k", type=click.IntRange(1, 100), default=5, show_default=True)
@click.option(
    "--retrieval", type=click.Choice(["value", "similarity", "random"]), default="value", show_default=True
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.pass_context
def search(
    ctx: click.Context,
    query: str,
    memory_path: str | None,
    as_json: bool,
    backend: str,
    category: str,
    stage: str,
    k: int,
    retrieval: str,
    seed: int,
) -> None:
    """Retrieve the items a prompt would get for QUERY, with the parts of each score."""
    from core.bank import RetrievalPolicy, TaskSignature

    store = _open(_path(ctx, memory_path))
    sig = TaskSignature(task=query, category=category, backend=backend)
    hits = RetrievalPolicy(mode=retrieval, k=k, seed=seed).retrieve(store, sig, stage)
    rows = [
        {
            **_short(h.item),
            "similarity": h.similarity,
            "value": h.value,
            "exploration": h.exploration,
            "score": h.score,
            "chosen_by": getattr(h, "chosen_by", "value"),
        }
        for h in hits
    ]
    if as_json:
        _emit(rows)
        return
    Console().print(
        _items_table(
            f"{retrieval} retrieval for {stage}: {query!r}",
            rows,
            ("similarity", "value", "score", "chosen_by"),
        )
    )


@memory.command("stats")
@memory_option
@json_option
@click.pass_context
def stats(ctx: click.Context, memory_path: str | None, as_json: bool) -> None:
    """Counts, visits and mean values."""
    data = _open(_path(ctx, memory_path)).stats()
    if as_json:
        _emit(data)
        return
    table = Table(title=f"Memory bank {data['path']}", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value", overflow="fold")
    for key, value in data.items():
        if key in ("path", "devices"):
            continue
        text = ", ".join(f"{k}: {v}" for k, v in value.items()) if isinstance(value, dict) else str(value)
        table.add_row(key.replace("_", " "), text)
    console = Console()
    console.print(table)
    if data.get("devices"):
        by_device = Table(title="Values by device (where they were learnt and credited)", title_justify="left")
        for col in ("device", "learnt", "visits draft", "visits refine", "mean Q1", "mean Q2"):
            by_device.add_column(col, justify="left" if col == "device" else "right",
                                 overflow="fold" if col == "device" else "ellipsis")
        for cls, row in data["devices"].items():
            by_device.add_row(cls, str(row["learnt"]), str(row["visits_draft"]), str(row["visits_refine"]),
                              _q(row["mean_q1_visited"]), _q(row["mean_q2_visited"]))
        console.print(by_device)


def _q(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


@memory.command("export")
@click.argument("file", type=click.Path(dir_okay=False))
@memory_option
@json_option
@click.pass_context
def export(ctx: click.Context, file: str, memory_path: str | None, as_json: bool) -> None:
    """Write every item to FILE for sharing."""
    store = _open(_path(ctx, memory_path))
    try:
        n = store.export(file)
    except OSError as exc:
        raise click.ClickException(f"cannot write {file}: {exc.strerror or exc}") from None
    if as_json:
        _emit({"exported": n, "file": str(Path(file))})
    else:
        click.echo(f"exported {n} items to {file}")


@memory.command("import")
@click.argument("file", type=click.Path(dir_okay=False))
@memory_option
@json_option
@click.pass_context
def import_(ctx: click.Context, file: str, memory_path: str | None, as_json: bool) -> None:
    """Merge the items of FILE (an export or another bank) without duplicates."""
    from core.bank import MemoryCorrupt

    store = _open(_path(ctx, memory_path))
    try:
        counts = store.import_(file)
    except FileNotFoundError:
        raise click.ClickException(
            f"{file} does not exist; give the path of a file from `evokernel memory export`"
        ) from None
    except MemoryCorrupt as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        _emit(counts)
    else:
        click.echo(f"added {counts['added']}, updated {counts['updated']}, unchanged {counts['unchanged']}")


@memory.command("prune")
@memory_option
@json_option
@click.option(
    "--below", type=float, default=None, help="Drop non-seed items whose visited values are all below this."
)
@click.option("--min-visits", type=int, default=3, show_default=True)
@click.option("--max-trajectories", type=int, default=None, help="Keep at most this many trajectories.")
@click.option("--task", "task_name", default=None, help="Drop everything learnt on this task (held-out transfer runs).")
@click.option("--dry-run", is_flag=True, help="Only list what would be removed.")
@click.pass_context
def prune(
    ctx: click.Context,
    memory_path: str | None,
    as_json: bool,
    below: float | None,
    min_visits: int,
    max_trajectories: int | None,
    task_name: str | None,
    dry_run: bool,
) -> None:
    """Remove items that proved useless, crowd the bank, or were learnt on one task (seeds are kept)."""
    if below is None and max_trajectories is None and task_name is None:
        raise click.ClickException("say what to prune: --below VALUE, --max-trajectories N and/or --task NAME")
    store = _open(_path(ctx, memory_path))
    ids = store.prune(below=below, min_visits=min_visits, max_trajectories=max_trajectories, dry_run=dry_run,
                      task=task_name)
    if as_json:
        _emit({"removed": [] if dry_run else ids, "would_remove": ids if dry_run else []})
    else:
        verb = "would remove" if dry_run else "removed"
        click.echo(f"{verb} {len(ids)} items" + (": " + ", ".join(ids) if ids else ""))


@memory.command("repair")
@memory_option
@json_option
@click.pass_context
def repair(ctx: click.Context, memory_path: str | None, as_json: bool) -> None:
    """Restore the last good snapshot of a damaged bank."""
    from core.bank import MemoryCorrupt, MemoryStore

    try:
        note = MemoryStore.repair(_path(ctx, memory_path))
    except MemoryCorrupt as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        _emit({"result": note})
    else:
        click.echo(note)
