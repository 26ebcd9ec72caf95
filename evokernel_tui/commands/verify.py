"""`evokernel verify TASK CANDIDATE` (or `--kernelbench DIR --level L --problem N CANDIDATE`): run the gates on
one kernel file and print the verdict, the tolerance in force and any warning about the task itself."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import click
from rich.console import Console, Group
from rich.live import Live
from rich.spinner import Spinner
from rich.table import Table

from core.tasks import (
    Degeneracy,
    Task,
    TaskError,
    check_device_memory,
    check_task_memory,
    is_builtin,
    load_task,
    probe_device,
    task_degeneracy,
)
from core.verdicts import GATE_ORDER, GATE_TITLES, VerificationResult, describe_tolerance
from evokernel_tui import options
from evokernel_tui.cli import one_line_errors
from evokernel_tui.phase_lines import PhaseLine

USAGE = "give TASK CANDIDATE, or --kernelbench DIR --level L --problem N CANDIDATE"


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


def resolve_args(args: tuple[str, ...], kernelbench: str | None, level: int | None, problem: int | None) -> tuple[Task, str]:
    """The task and the candidate path from the positional arguments: TASK CANDIDATE, or CANDIDATE alone
    with --kernelbench."""
    if kernelbench:
        if len(args) != 1:
            raise click.UsageError(f"with --kernelbench give only the CANDIDATE file ({len(args)} arguments given)")
        return load_task(kernelbench=kernelbench, level=level, problem=problem), args[0]
    if level is not None or problem is not None:
        raise click.UsageError("--level and --problem go with --kernelbench DIR")
    if len(args) != 2:
        raise click.UsageError(f"{USAGE} ({len(args)} arguments given)")
    return load_task(args[0]), args[1]


def task_warnings(task: Task, memory_gb: float, preset: str, check_degenerate: bool,
                  backend: str = "cpu", say: Callable[[str], None] | None = None) -> Degeneracy:
    """Refuse a problem too big for the memory limit (TaskError); find out whether a trivial answer passes it.

    Built-in tasks are small and not degenerate (tests check both), so they cost nothing here. On a big
    task file the checks take 20-60 s, so each is said (`say`) as it starts."""
    if is_builtin(task):
        return Degeneracy([], [])
    say = say or (lambda text: None)
    say("checking the task: memory estimate")
    estimate = check_task_memory(task, memory_gb)
    if backend in ("cuda", "triton"):
        check_device_memory(task, estimate)  # the card's free memory, before the GPU is touched
    found = None
    if check_degenerate:
        device = probe_device(backend)
        say(f"checking the task: degeneracy probe on the device ({device}; the task runs once)")
        found = task_degeneracy(task, preset, memory_gb=memory_gb, device=device)
    return found or Degeneracy([], [])


@contextlib.contextmanager
def _stopped_during(phase: PhaseLine, what: str) -> Iterator[None]:
    """ctrl+c or SIGTERM inside: one line saying what was stopped and where it was (`stopped verifying k.py
    against relu during compile: building the kernel, 12 s in; no verdict`), exit 130 or 143."""
    try:
        yield
    except KeyboardInterrupt:
        from evokernel_tui.cli import stopped

        stopped(f"stopped {what} during {phase.where()}; no verdict")


def _say_not_timed(result: VerificationResult) -> None:
    """The latency gate of a `--no-timing` check reads "not timed (--no-timing)", not "not run" (which
    would look like a verifier that gave up), and the verdict says so once."""
    for gate in result.gates:
        if gate.name == "latency" and gate.status == "skip":
            gate.reason = "not timed (--no-timing)"
    if result.feasible:
        result.notes.append("correctness only (--no-timing): no speed measured; run without it to time the kernel")


def _distributions(text: str) -> list[str]:
    from core.verdicts import DISTRIBUTIONS

    names = [d.strip() for d in text.split(",") if d.strip()] or ["task"]
    bad = [d for d in names if d not in DISTRIBUTIONS]
    if bad:
        raise click.BadParameter(f"unknown distribution {bad[0]!r}; use {', '.join(DISTRIBUTIONS)}",
                                 param_hint="--input-distributions")
    return names


def _list_rules(ctx: click.Context, value: bool) -> None:
    """`--list-rules`: the registry as a table, then exit (before any argument is checked)."""
    if not value or ctx.resilient_parsing:
        return
    from core.verdicts import rule_listing as listing

    table = Table(title="anti-hacking rules", title_justify="left")
    table.add_column("rule", no_wrap=True)
    table.add_column("runs", no_wrap=True)
    table.add_column("refused by", no_wrap=True)
    table.add_column("what it means")
    for name, stage, presets, help_text in listing():
        table.add_row(name, stage, presets, help_text)
    Console().print(table)
    ctx.exit(0)


@click.command(name="verify")
@click.argument("args", nargs=-1, metavar="[TASK] CANDIDATE")
@options.backend
@options.kernelbench
@click.option("--trials", default=5, show_default=True, type=click.IntRange(1, 100), help="Correctness trials.")
@options.tolerance
@click.option("--compare-compile", is_flag=True, help="Also time torch.compile of the reference.")
@click.option("--no-timing", is_flag=True,
              help="Correctness only: anti-hacking, compile and correctness (with its probes), no timing rounds; "
                   "seconds instead of a minute when only whether it is right matters.")
@click.option("--no-cache", is_flag=True, help="Re-run even if this exact source was verified before.")
@options.run_timeout
@options.memory_gb()
@click.option("--no-degenerate-check", is_flag=True, help="Skip finding out whether a trivial answer passes the task.")
@click.option("--ncu", is_flag=True, help="GPU backends: add an Nsight Compute summary (occupancy, DRAM) if ncu is on PATH.")
@click.option("--input-distributions", "dists", default="task", show_default=True,
              help="Comma-separated: task (get_inputs as written), normal, uniform, heavy; trials cycle through them.")
@click.option("--no-magnitude-probe", is_flag=True,
              help="Skip the large-magnitude probe: by default the task's floating inputs are also run scaled x100 "
                   "and x10000, and where the reference stays finite the kernel must too (tolerance scaled by the "
                   "output's magnitude).")
@click.option("--no-shape-probe", is_flag=True,
              help="Skip the held-out shapes: by default the task's inputs are also run at smaller sizes that leave "
                   "tails (primes); a wrong answer there fails, raising there is only noted.")
@options.threads
@options.policy
@click.option("--list-rules", is_flag=True, is_eager=True, expose_value=False, callback=lambda ctx, _p, v: _list_rules(ctx, v),
              help="List every anti-hacking rule (name, when it runs, the presets that refuse it, what it means) and exit.")
@options.unsafe_no_isolation
@options.json_output()
def verify(args, backend, kernelbench, level, problem, trials, tolerance, atol, rtol, compare_compile, no_timing,
           no_cache, run_timeout, memory_gb, no_degenerate_check, ncu, dists, no_magnitude_probe, no_shape_probe, threads, policy,
           allow_rules, unsafe, as_json) -> None:
    """Verify CANDIDATE (a KernelBench ModelNew file) against TASK (a built-in name or a task file), or
    against problem N of level L of a KernelBench checkout (--kernelbench DIR --level L --problem N CANDIDATE).

    Exit status 0 only when the kernel is feasible (anti-hacking, compile and correctness pass).
    """
    from core.verifying import (
        PolicyError,
        VerifyError,
        make_config,
        resolve_policy,
        verify_task,
        with_degeneracy,
        with_policy,
    )

    with one_line_errors(PolicyError):
        the_policy = resolve_policy(policy, allow_rules)
    with one_line_errors(TaskError):
        the_task, candidate = resolve_args(args, kernelbench, level, problem)
    path = Path(candidate)
    if not path.is_file():
        raise click.ClickException(f"candidate file {path} does not exist; {USAGE}")
    try:
        source = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise click.ClickException(f"cannot read the candidate {path}: {getattr(exc, 'strerror', None) or exc}") from None
    from core.verifying import build_root_problem

    room = build_root_problem()  # a full disk: one line now, not a compiler's error half-way
    if room:
        raise click.ClickException(room)
    # what runs and for how long, above the verdict: one live line on a terminal, plain lines in a pipe or
    # log (stderr keeps only a problem's one line), nothing with --json (stdout is the verdict's JSON)
    progress_console = Console()
    phase = PhaseLine(progress_console, live=progress_console.is_terminal and not as_json, silent=as_json)
    states: dict[str, str] = {}
    view = Live(Group(phase), console=progress_console, refresh_per_second=10, transient=True)
    say = phase.say
    with contextlib.ExitStack() as live_view, _stopped_during(phase, f"verifying {path.name} against {the_task.name}"):
        if phase.live:
            live_view.enter_context(view)
        with one_line_errors(TaskError):
            probed = task_warnings(the_task, memory_gb, tolerance, not no_degenerate_check, backend, say=say)
        config = make_config(tolerance, atol, rtol, trials=trials, compare_compile=compare_compile,
                             use_cache=not no_cache, run_timeout_s=run_timeout, memory_gb=memory_gb, ncu=ncu,
                             threads=threads, input_distributions=_distributions(dists), isolate=False if unsafe else None,
                             magnitude_probe=False if no_magnitude_probe else None,
                             shape_probe=False if no_shape_probe else None,
                             time_kernels=False if no_timing else None,
                             # one verdict and the process ends: a spare sandbox started for the next one
                             # would import torch beside this one's trials and rounds (2-3 s of a 2-core
                             # machine) and then be killed unused
                             warm_worker=False)
        with_degeneracy(config, probed.found, probed.separating)
        with_policy(config, the_policy)
        degenerate = probed.found
        tolerance_text = describe_tolerance(config.atol, config.rtol, tolerance)

        def on_gate(name: str, state: str, progress: object = None) -> None:
            if progress is None:
                states[name] = state
            phase.on_gate(name, state, progress)
            if phase.live:
                view.update(Group(_live_table(states), phase))

        with one_line_errors(VerifyError):
            result = verify_task(the_task, source, backend, config, on_gate=on_gate)
    result.tolerance = result.tolerance or tolerance_text
    if no_timing:
        _say_not_timed(result)
    result.degenerate = result.degenerate or degenerate
    if as_json:
        click.echo(json.dumps({"task": the_task.name, "candidate": str(path), **result.to_dict()}))
    else:
        from evokernel_tui.commands.render import gate_table, verdict_line

        out = Console()
        out.print(gate_table(result, title=f"{the_task.name} ← {path.name} ({result.backend}, {result.device})"))
        out.print(verdict_line(result))
        out.print(f"tolerance: {tolerance_text}", highlight=False)
        out.print(f"policy: {the_policy.label()}", highlight=False)
        if result.probes:
            from core.verdicts import probe_summary as summary

            out.print(f"probes: {summary(result.probes)}", highlight=False)
        if degenerate:
            from core.verdicts import describe_degenerate

            out.print(f"[yellow]warning: task {the_task.name} is {describe_degenerate(degenerate)} under this "
                      "tolerance; a trivial answer can look correct[/]", highlight=False)
            if config.separated_by:
                out.print(f"[yellow]the trials also draw {' and '.join(config.separated_by)} inputs, "
                          "where a copy of the input fails[/]", highlight=False)
        for note in result.notes:
            out.print(f"[dim]{note}[/]")
    sys.exit(0 if result.feasible else 1)
