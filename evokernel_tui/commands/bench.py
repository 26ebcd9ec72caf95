"""`evokernel bench`: run the loop over a suite (or replay recorded sessions) and report; `bench compare A B`.

Verification jobs go to an executor (`--executor pool|ray|inprocess`, `--workers N`); up to N tasks
run at once, sharing one memory bank. Rerunning with the same `--out` continues an interrupted bench.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import click
from rich import box
from rich.console import Console
from rich.live import Live
from rich.table import Table

from core.bench import (
    FAST_PS,
    RETRIEVAL_MODES,
    BenchConfig,
    BenchError,
    ModelSource,
    TaskOutcome,
    best_device_cell,
    compare_outcomes,
    device_counts,
    devices_line,
    fmt_cost,
    fmt_fraction,
    fmt_rate,
    fmt_speed,
    fmt_x,
    level_name,
    load_bench,
    noise_note,
    order_tasks,
    outcomes_of,
    parse_levels,
    parse_names,
    policy_mismatch,
    reference_skip_reason,
    replay_bench,
    run_bench,
    select_tasks,
    session_dirs,
    summarise_levels,
    summary_cells,
    write_report,
)
from core.config import ConfigError, how_to_configure
from core.executors import EXECUTORS, ExecutorError, make_executor, plan_gpus, verify_job
from core.llm import resolve_model
from core.session import SessionError
from evokernel_tui import options
from evokernel_tui.cli import check_backend, check_endpoint, one_line_errors
from evokernel_tui.commands.draft import task_shapes
from evokernel_tui.phase_lines import TaskPhases

if TYPE_CHECKING:
    from core.verdicts import VerifyConfig

#: The verification job sent to the executor (a module-level function, so workers can import it).
JOB = verify_job


def no_model_message() -> str:
    return f"bench needs a model: {how_to_configure()}; or re-verify recorded sessions with --replay DIR."


TABLE_HEADERS = ("level", "n", "compiled", "correct", "fast_1", "fast_1.5", "fast_2", "geomean", "refine", "rejected")


def summary_table(data: dict[str, Any], title: str) -> Table:
    """Per-level rows narrow enough for 80 columns (tokens and cost: see `summary_note`)."""
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0), pad_edge=False,
                  show_edge=False)
    for col in TABLE_HEADERS:
        table.add_column(col, justify="left" if col == "level" else "right")
    finished = [o for o in outcomes_of(data) if not o.error]
    rows = summarise_levels(finished) if finished else []
    for row in rows:
        cells = summary_cells(row)
        table.add_row(*cells[: len(TABLE_HEADERS) - 1], cells[-1], style="bold" if row.level is None else None)
    return table


def summary_note(data: dict[str, Any]) -> str:
    finished = [o for o in outcomes_of(data) if not o.error]
    total = summarise_levels(finished)[-1] if finished else None
    spent = f" {total.tokens} tokens, cost {fmt_cost(total.cost)}." if total else ""
    skipped = [o for o in outcomes_of(data) if o.skipped]
    skip = f" Skipped (reference cannot run here): {len(skipped)}." if skipped else ""
    noise = noise_note([o for o in finished if o.counted])
    noise = f" {noise}" if noise else ""
    return ("fast_p (KernelBench's score.py): correct and strictly more than p times faster than eager, over all "
            "tasks (a noisy speedup is not counted as faster); rejected: every kernel refused by anti-hacking (not a compile failure); refine: median of "
            f"first feasible over best latency.{spent}{skip}{noise}")


def progress_printer(console: Console, total: int):
    done = {"n": 0}

    def on_progress(kind: str, task: str, outcome: TaskOutcome | None) -> None:
        if kind == "started":
            return
        done["n"] += 1
        prefix = f"[{done['n']:>{len(str(total))}}/{total}]"
        if outcome is None:
            return
        if kind == "skipped":
            console.print(f"[dim]{prefix} {task}: recorded earlier, skipped[/]", highlight=False)
        elif outcome.error:
            console.print(f"{prefix} {task}: [red]error[/] {outcome.error}", highlight=False)
        elif outcome.skipped:
            console.print(f"{prefix} {task}: [yellow]skipped[/] ({outcome.skipped})", highlight=False)
        else:
            state = "[green]correct[/]" if outcome.feasible else (
                "incorrect" if outcome.compiled else f"[red]{outcome.status}[/]")
            extra = f" {fmt_speed(outcome.speedup, outcome.noisy, outcome.speedup_interval)} vs eager, refine {fmt_x(outcome.refine_speedup)}" if outcome.feasible else ""
            if outcome.feasible and outcome.bandwidth_fraction is not None:
                extra += f", {fmt_fraction(outcome.bandwidth_fraction)} of memory bandwidth"
            console.print(f"{prefix} {task}: {state}{extra}, {outcome.kernels} kernel{'s' if outcome.kernels != 1 else ''}, "
                          f"{outcome.seconds:.1f}s",
                          highlight=False)

    return on_progress


def open_bank(path: str | Path | None) -> Any:
    from core.bank import MemoryStore

    try:
        return MemoryStore(path)
    except Exception as exc:  # a damaged or locked bank: say which and how to go on
        raise BenchError(f"cannot open the memory bank ({exc}); fix it, pass --memory PATH or --fresh-memory") from None


def default_out() -> Path:
    return Path("bench_runs") / time.strftime("%Y%m%d-%H%M%S")


def verify_config(use_cache: bool, compare_compile: bool, tolerance: str = "kernelbench",
                  memory_gb: float | None = None, atol: float | None = None, rtol: float | None = None,
                  policy: str | None = None, allow: tuple[str, ...] = ()) -> Any:
    from core.verifying import PolicyError, make_config, resolve_policy, with_policy

    config = make_config(tolerance, atol, rtol, use_cache=use_cache, compare_compile=compare_compile, memory_gb=memory_gb)
    with one_line_errors(PolicyError):
        return with_policy(config, resolve_policy(policy, allow))


def finish(console: Console, out: Path, data: dict[str, Any], as_json: bool) -> None:
    report, plot = write_report(out, data)
    if as_json:
        click.echo(json.dumps(data, indent=2, default=str))
    else:
        console.print(summary_table(data, f"Bench {out}"))
        console.print(summary_note(data), highlight=False)
        console.print(f"bench.json, {report.name} and {plot.name} in {out}", highlight=False)
    complete = data.get("complete")
    sys.exit(0 if complete else 1)


@click.group(name="bench", invoke_without_command=True)
@click.option("--suite", default="builtin", show_default=True, help="`builtin`, or a folder of KernelBench task files.")
@click.option("--kernelbench", default=None, type=click.Path(file_okay=False), help="A KernelBench checkout to run.")
@click.option("--levels", default=None, help="Levels to run, e.g. 1,2 (default: all).")
@click.option("--tasks", "task_names", multiple=True,
              help="Task names, KernelBench problem numbers, or LEVEL/NUMBER (e.g. 2/12), comma separated.")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Only the first N selected tasks.")
@options.tolerance
@options.policy
@options.memory_gb(default=None, then="is skipped")
@options.backend
@options.model
@options.api_base
@options.steps(draft_default=4, refine_default=4)
@click.option("--retrieval", type=click.Choice(RETRIEVAL_MODES), default="value", show_default=True)
@click.option("--epsilon", type=click.FloatRange(0.0, 1.0), default=None, help="Exploration rate of value retrieval.")
@click.option("--pool-size", type=click.IntRange(min=1), default=None, help="K: candidates value retrieval picks from.")
@click.option("--k", "k_items", type=click.IntRange(min=1), default=None, help="N: memories per prompt.")
@click.option("--no-memory", is_flag=True, help="Run without any memory (ablation).")
@click.option("--per-task-memory", is_flag=True, help="A fresh seeded bank per task (no transfer between tasks).")
@click.option("--order", type=click.Choice(["curriculum", "mixed"]), default="curriculum", show_default=True,
              help="Task order: by level and suite order, or shuffled by --seed.")
@click.option("--budget", type=click.IntRange(min=1), default=None,
              help="T: model steps per task shared by draft and refine (instead of --draft-steps/--refine-steps).")
@click.option("--refine-norm", is_flag=True,
              help="z-normalise refine rewards with the session's running mean and deviation (the paper's option).")
@click.option("--memory", "memory_path", default=None, help="Memory bank shared by all tasks (default: the user's bank).")
@click.option("--fresh-memory", is_flag=True, help="Start from a new seeded bank in OUT/memory.json.")
@click.option("--workers", type=click.IntRange(1, 1024), default=None,
              help="Tasks and verification jobs run at once (default 1; on --backend cuda|triton with the pool "
                   "or a local Ray instance, one per GPU).")
@click.option("--gpus", "gpus_spec", default=None,
              help="GPUs for --backend cuda|triton: `all` (the default: every GPU visible), a count N (the first "
                   "N), or ids such as 0,1 (one id: `1,`); one verification per GPU at a time.")
@click.option("--executor", "executor_kind", type=click.Choice(EXECUTORS), default="pool", show_default=True,
              help="Where verification jobs run.")
@click.option("--address", default=None, help="Ray cluster address (with --executor ray; default: a local instance).")
@click.option("--model-concurrency", type=click.IntRange(1, 256), default=None,
              help="Model calls in flight at once (default: --workers).")
@click.option("--replay", "replay_dir", default=None, type=click.Path(file_okay=False),
              help="Re-verify the kernels of recorded sessions (a bench folder or sessions folder); no model needed.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Output folder (default: bench_runs/<timestamp>); rerun with the same folder to resume.")
@click.option("--seed", type=int, default=0, show_default=True, help="Retrieval seed.")
@options.model_timeout
@click.option("--wall", type=float, default=None, help="Wall-time budget per task in seconds.")
@click.option("--verdict-cache/--no-verdict-cache", "verdict_cache", default=False, show_default=True,
              help="Reuse signed cached verdicts of identical sources (their latency is then an old measurement, "
                   "labelled as such); by default every kernel is verified and timed afresh.")
@click.option("--compare-compile", is_flag=True, help="Also time torch.compile of each reference (fast_p vs compile).")
@options.json_output("Print bench.json instead of the summary table.")
@click.pass_context
def bench(ctx, suite, kernelbench, levels, task_names, limit, tolerance, atol, rtol, policy, allow_rules, memory_gb, backend, model, api_base, draft_steps, refine_steps, retrieval,
          epsilon, pool_size, k_items, no_memory, per_task_memory, order, budget, refine_norm, memory_path, fresh_memory, workers, gpus_spec, executor_kind, address, model_concurrency, replay_dir, out, seed,
          model_timeout, wall, verdict_cache, compare_compile, as_json) -> None:
    """Run draft -> refine over every selected task with one shared memory bank, then report per level.

    Exit code 0 when every task finished; 1 when some are missing; 2 when no model is configured.
    """
    if ctx.invoked_subcommand is not None:
        return
    console = Console(stderr=as_json)
    if memory_path and fresh_memory:
        raise click.ClickException("give --memory PATH or --fresh-memory, not both")
    if no_memory and (per_task_memory or memory_path or fresh_memory):
        raise click.ClickException("--no-memory runs without a bank: drop --per-task-memory, --memory and --fresh-memory")
    if per_task_memory and (memory_path or fresh_memory):
        raise click.ClickException("--per-task-memory makes a fresh bank per task: drop --memory and --fresh-memory")
    if address and executor_kind != "ray":
        raise click.ClickException("--address is for --executor ray")
    check_backend(backend)  # no GPU for --backend cuda: one line before any model call or output folder
    with one_line_errors(ExecutorError):
        gpus = plan_gpus(executor_kind, backend, gpus_spec, address)
    workers = workers or (len(gpus) if gpus else 1)
    out = out or default_out()
    try:
        config = BenchConfig(backend=backend, draft_steps=draft_steps, refine_steps=refine_steps, retrieval=retrieval,
                             seed=seed, workers=workers, executor=executor_kind,
                             suite=str(kernelbench and f"kernelbench:{kernelbench}" or suite),
                             verify_config=verify_config(verdict_cache and not replay_dir, compare_compile,
                                                         tolerance, memory_gb, atol, rtol, policy, allow_rules),
                             wall_s=wall, epsilon=epsilon, pool_size=pool_size, k=k_items, order=order, budget=budget,
                             refine_norm=refine_norm,
                             memory_mode="none" if no_memory else "per-task" if per_task_memory else "shared",
                             extra={"gpus": gpus} if gpus is not None else {})
        if replay_dir:
            total = len(session_dirs(Path(replay_dir)))
            with make_executor(executor_kind, workers, address, backend, gpus) as executor:
                console.print(f"replaying {total} sessions of {replay_dir} on {executor.describe()} into {out}",
                              highlight=False)
                data = replay_bench(Path(replay_dir), out, config, executor=executor, job=JOB,
                                    on_progress=progress_printer(console, total))
            finish(console, out, data, as_json)
            return
        cfg = resolve_model(model, api_base)
        if cfg is None:
            Console(stderr=True).print(no_model_message(), highlight=False, soft_wrap=True)
            sys.exit(2)
        if not cfg.model.startswith("scripted:"):
            check_endpoint(cfg.api_base)
        cfg.timeout_s = model_timeout
        tasks = select_tasks(suite, kernelbench=kernelbench, levels=parse_levels(levels), names=parse_names(task_names),
                             limit=limit)
        tasks = order_tasks(tasks, order, seed)
        models = ModelSource(cfg, max_concurrent=model_concurrency or workers)
        out.mkdir(parents=True, exist_ok=True)
        memory = None if config.memory_mode != "shared" else open_bank(out / "memory.json" if fresh_memory else memory_path)
        config.memory = str(memory.path) if memory is not None else config.memory_mode
        with make_executor(executor_kind, workers, address, backend, gpus) as executor:
            console.print(f"bench: {len(tasks)} tasks on {backend} with {cfg.model}, verification on "
                          f"{executor.describe()}, memory {config.memory}, out {out}", highlight=False)
            limit_gb = cast("VerifyConfig", config.verify_config).memory_gb  # set above from verify_config(): never None
            phases = TaskPhases(console, live=console.is_terminal and not as_json)
            printer = progress_printer(console, len(tasks))

            def on_progress(kind: str, task: str, outcome: Any) -> None:
                if kind == "finished":
                    phases.finished(task)
                printer(kind, task, outcome)

            with contextlib.ExitStack() as shown:
                if phases.live:
                    shown.enter_context(Live(phases, console=console, refresh_per_second=8, transient=True))
                data = run_bench(tasks, out, config, models, memory=memory, executor=executor, job=JOB,
                                 shapes=task_shapes, on_progress=on_progress,
                                 check=lambda task: reference_skip_reason(task, limit_gb, backend=backend),
                                 on_event=None if as_json else phases.on_event)
    except (BenchError, ExecutorError, SessionError, ConfigError) as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        from evokernel_tui.cli import stopped

        stopped(f"rerun with --out {out} to continue where it stopped")
    finish(console, out, data, as_json)


def _delta(a: float | None, b: float | None, pct: bool) -> str:
    if a is None or b is None:
        return ""
    d = b - a
    return f"{d * 100:+.0f} pt" if pct else f"{d:+.2f}x"


@bench.command(name="compare")
@click.argument("a", type=click.Path(exists=True, path_type=Path))
@click.argument("b", type=click.Path(exists=True, path_type=Path))
@options.json_output("Print the comparison as JSON.")
def compare(a: Path, b: Path, as_json: bool) -> None:
    """Set two bench runs A and B (folders or bench.json files) side by side, over the tasks both ran."""
    with one_line_errors(BenchError):
        da, db = load_bench(a), load_bench(b)
    mismatch = policy_mismatch(da.get("settings", {}), db.get("settings", {}))
    if mismatch:
        raise click.ClickException(mismatch)
    oa, ob = outcomes_of(da), outcomes_of(db)
    levels, tasks = compare_outcomes(oa, ob)
    if as_json:
        click.echo(json.dumps({
            "a": {"path": str(a), "settings": da.get("settings"), "devices": device_counts(oa)},
            "b": {"path": str(b), "settings": db.get("settings"), "devices": device_counts(ob)},
            "levels": [{"a": x.to_dict(), "b": y.to_dict()} for x, y in levels],
            "tasks": [{"task": t.task, "level": t.level, "a": t.a.to_dict() if t.a else None,
                       "b": t.b.to_dict() if t.b else None, "ratio": t.ratio, "within_noise": t.within_noise}
                      for t in tasks],
        }, indent=2, default=str))
        return
    console = Console()
    sa, sb = da.get("settings", {}), db.get("settings", {})
    console.print(f"A = {a} ({sa.get('model')}, retrieval {sa.get('retrieval')})\n"
                  f"B = {b} ({sb.get('model')}, retrieval {sb.get('retrieval')})", highlight=False)
    console.print(f"A on {devices_line(oa)}\nB on {devices_line(ob)}", highlight=False, soft_wrap=True)
    table = Table(title="Per level (tasks both ran)", title_justify="left")
    for col in ("level", "metric", "A", "B", "B - A"):
        table.add_column(col, justify="left" if col in ("level", "metric") else "right")
    for x, y in levels:
        metrics: list[tuple[str, float | None, float | None, bool]] = [
            ("correct", x.correct_rate, y.correct_rate, True), ("compiled", x.compile_rate, y.compile_rate, True)]
        metrics += [(f"fast_{p:g}", x.fast[f"{p:g}"], y.fast[f"{p:g}"], True) for p in FAST_PS if p > 0]
        metrics += [("geomean", x.geomean_speedup, y.geomean_speedup, False),
                    ("refine (median)", x.median_refine_speedup, y.median_refine_speedup, False)]
        for i, (name, va, vb, pct) in enumerate(metrics):
            fmt = fmt_rate if pct else fmt_x
            table.add_row(level_name(x.level) if i == 0 else "", name, fmt(va), fmt(vb), _delta(va, vb, pct),
                          end_section=i == len(metrics) - 1)
        table.add_row("", "noisy speedups", str(x.noisy), str(y.noisy), "", end_section=False)
        table.add_row("", "tokens / cost", f"{x.tokens} / {fmt_cost(x.cost)}", f"{y.tokens} / {fmt_cost(y.cost)}", "",
                      end_section=True)
    console.print(table)
    per_task = Table(title="Per task (speedup vs eager; on: the card each best kernel was timed on)",
                     title_justify="left")
    for col in ("task", "level", "A", "B", "B / A", "on A / B"):
        per_task.add_column(col, justify="left" if col == "task" else "right")
    for t in tasks:
        per_task.add_row(t.task, str(t.level), _task_cell(t.a), _task_cell(t.b),
                         fmt_x(t.ratio) + (" within noise" if t.within_noise else ""),
                         f"{best_device_cell(t.a)} / {best_device_cell(t.b)}")
    console.print(per_task)
    if any(t.within_noise for t in tasks):
        console.print("within noise: A's and B's 95% intervals overlap, or the verifier marked one noisy (its "
                      "timing varied too much to resolve): that ratio is no measured difference. A noisy speedup "
                      "is not counted in fast_p.", highlight=False, soft_wrap=True)


def _task_cell(o: TaskOutcome | None) -> str:
    if o is None:
        return "not run"
    if o.error:
        return "error"
    if not o.feasible:
        return "failed"
    return fmt_speed(o.speedup, o.noisy) if o.speedup else "correct"
