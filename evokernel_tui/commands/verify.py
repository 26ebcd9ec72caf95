"""`evokernel verify TASK CANDIDATE`: run the gates on one kernel file and print the verdict."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.live import Live
from rich.spinner import Spinner
from rich.table import Table

from core.tasks import TaskError, load_task
from verifier.result import GATE_ORDER, GATE_TITLES


def _live_table(states: dict[str, str]) -> Table:
    table = Table.grid(padding=(0, 1))
    for name in GATE_ORDER:
        state = states.get(name, "waiting")
        if state == "running":
            table.add_row(Spinner("dots", style="yellow"), GATE_TITLES[name], "running")
        else:
            mark = {"pass": "[green]●[/]", "fail": "[red]●[/]", "skip": "[dim]○[/]"}.get(state, "[dim]·[/]")
            table.add_row(mark, GATE_TITLES[name], state)
    return table


@click.command(name="verify")
@click.argument("task", required=False)
@click.argument("candidate", type=click.Path(dir_okay=False))
@click.option("--backend", default="cpu", show_default=True, help="cpu, cuda or triton.")
@click.option("--kernelbench", type=click.Path(file_okay=False), help="A KernelBench checkout (with --level, --problem).")
@click.option("--level", type=int, help="KernelBench level.")
@click.option("--problem", type=int, help="KernelBench problem number.")
@click.option("--trials", default=5, show_default=True, type=click.IntRange(1, 100), help="Correctness trials.")
@click.option("--atol", default=1e-2, show_default=True, type=float)
@click.option("--rtol", default=1e-2, show_default=True, type=float)
@click.option("--compare-compile", is_flag=True, help="Also time torch.compile of the reference.")
@click.option("--no-cache", is_flag=True, help="Re-run even if this exact source was verified before.")
@click.option("--timeout", default=120.0, show_default=True, help="Seconds allowed for running the candidate.")
@click.option("--memory-gb", default=8.0, show_default=True, help="Address-space limit of the candidate process.")
@click.option("--ncu", is_flag=True, help="GPU backends: add an Nsight Compute summary (occupancy, DRAM) if ncu is on PATH.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def verify(task, candidate, backend, kernelbench, level, problem, trials, atol, rtol, compare_compile, no_cache,
           timeout, memory_gb, ncu, as_json) -> None:
    """Verify CANDIDATE (a KernelBench ModelNew file) against TASK (a built-in name or a task file).

    Exit status 0 only when the kernel is feasible (anti-hacking, compile and correctness pass).
    """
    from core.verifying import VerifyError, verify_task
    from verifier import VerifyConfig

    try:
        if kernelbench:
            the_task = load_task(kernelbench=kernelbench, level=level, problem=problem)
        elif task:
            the_task = load_task(task)
        else:
            raise click.UsageError("give a TASK (built-in name or file) or --kernelbench DIR --level L --problem N")
    except TaskError as exc:
        raise click.ClickException(str(exc)) from None
    path = Path(candidate)
    try:
        source = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise click.ClickException(f"cannot read the candidate {path}: {exc.strerror or exc}") from None
    config = VerifyConfig(trials=trials, atol=atol, rtol=rtol, compare_compile=compare_compile,
                          use_cache=not no_cache, run_timeout_s=timeout, memory_gb=memory_gb, ncu=ncu)
    console = Console(stderr=as_json)
    states: dict[str, str] = {}
    try:
        if as_json or not console.is_terminal:
            result = verify_task(the_task, source, backend, config)
        else:
            with Live(_live_table(states), console=console, refresh_per_second=10, transient=True) as live:
                def on_gate(name: str, state: str) -> None:
                    states[name] = state
                    live.update(_live_table(states))

                result = verify_task(the_task, source, backend, config, on_gate=on_gate)
    except VerifyError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps({"task": the_task.name, "candidate": str(path), **result.to_dict()}))
    else:
        from evokernel_tui.commands.render import gate_table, verdict_line

        out = Console()
        out.print(gate_table(result, title=f"{the_task.name} ← {path.name} ({result.backend}, {result.device})"))
        out.print(verdict_line(result))
        for note in result.notes:
            out.print(f"[dim]{note}[/]")
    sys.exit(0 if result.feasible else 1)
