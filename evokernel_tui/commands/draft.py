"""`evokernel draft TASK`: draft (and optionally refine) one op headless, with progress per step.

`--model scripted:FILE.json` replays a JSON list of canned replies instead of calling a model;
it exists for demos and tests (no model is reachable from CI machines).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.console import Console
from rich.syntax import Syntax

from core.config import ConfigError, sessions_root
from core.events import Event, describe_event, phase_text, speed_text
from core.llm import ModelConfig, ModelError, manual_mode_message, resolve_model
from core.session import Budgets, Session, SessionError, ends_headless_run
from core.tasks import Task, TaskError, builtin_index, load_task, task_signature_text, validate_task
from core.verifying import make_config, mark_degenerate
from evokernel_tui import options
from evokernel_tui.cli import (
    check_backend,
    check_endpoint,
    check_task_size,
    one_line_errors,
    open_memory_checked,
)
from evokernel_tui.commands.render import gate_table

if TYPE_CHECKING:
    from rich.live import Live

QUIET_KINDS = {"gate", "prompt", "retrieved", "memory_added", "q_update", "step_done", "session_started"}


def interactive(as_json: bool) -> bool:
    return not as_json and sys.stdin.isatty() and sys.stdout.isatty()


def ask_task() -> str:
    from prompt_toolkit import prompt
    from prompt_toolkit.completion import WordCompleter

    names = [m.name for m in builtin_index()]
    return prompt("Task (built-in name or file, Tab completes): ", completer=WordCompleter(names, sentence=True)).strip()


def ask_model() -> str:
    from prompt_toolkit import prompt

    return prompt("Model (litellm name, e.g. openai/gpt-4o-mini; empty = manual mode): ").strip()


def resolve_task(task: str | None, kernelbench: str | None, level: int | None, problem: int | None,
                 as_json: bool) -> Task:
    if kernelbench:
        return load_task(kernelbench=kernelbench, level=level, problem=problem)
    if not task and interactive(as_json):
        task = ask_task()
    if not task:
        raise TaskError("no task given; pass a built-in task name (see `evokernel tasks`), a task file, "
                        "or --kernelbench DIR --level L --problem N")
    return load_task(task)


def task_shapes(task: Task) -> str:
    """Input shapes for retrieval; running the reference once in a child costs a few seconds."""
    try:
        return task_signature_text(task, validate_task(task, timeout_s=60))
    except TaskError:
        return ""


class Progress:
    """A step bar (draft + refine budget), the model's text as it streams, and one line per event above."""

    TAIL = 110

    def __init__(self, console: Console, session: Session):
        from rich.progress import BarColumn, MofNCompleteColumn, SpinnerColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as Bar

        self.console, self.session = console, session
        self.bar = Bar(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(bar_width=24),
                       MofNCompleteColumn(), TimeElapsedColumn(), console=console)
        self.task_id = self.bar.add_task("starting", total=self._total())
        self.tail = ""
        self.live: Live | None = None

    def _total(self) -> int:
        b = self.session.budgets
        return max(1, b.draft_steps + b.refine_steps)

    def _done(self) -> int:
        return sum(self.session.used.values())

    def _render(self):
        from rich.console import Group
        from rich.text import Text

        tail = self.tail.replace("\n", " ⏎ ")[-self.TAIL:]
        return Group(self.bar, Text(f"  {tail}", style="dim", no_wrap=True, overflow="ellipsis")) if tail else self.bar

    def _refresh(self, description: str | None = None) -> None:
        if description is not None:
            self.bar.update(self.task_id, description=description, completed=self._done(), total=self._total())
        if self.live is not None:
            self.live.update(self._render())

    def on_event(self, ev: Event) -> None:
        if ev.kind == "gate_progress":  # told, not recorded: trial 3/8, timing round 4 (core.events.phase_text)
            self._refresh(phase_text(ev))
            return
        if ev.kind == "gate":
            self.tail = ""
            # a "pass" here may be the candidate's own report; the verdict (printed below) decides
            status = "checking" if ev.data["status"] == "pass" else ev.data["status"]
            self._refresh(f"verifying v{ev.data['version']}: {ev.data['name']} {status}")
        if ev.kind in QUIET_KINDS:
            return
        line = describe_event(ev)
        if line:
            style = "red" if ev.kind in ("model_error", "error") else ("green" if ev.kind == "accepted" else None)
            self.console.print(f"[dim]step {ev.step:>2}[/] {line}", style=style, highlight=False, markup=True)

    def on_token(self, text: str) -> None:
        self.tail = (self.tail + text)[-4 * self.TAIL:]
        self._refresh()

    def step(self) -> list[Event]:
        s = self.session
        budget = s.budgets.draft_steps if s.stage == "draft" else s.budgets.refine_steps
        self.tail = ""
        self._refresh(f"{s.stage} {s.used.get(s.stage, 0) + 1}/{budget}: asking the model")
        return s.step(on_event=self.on_event, on_token=self.on_token)

    def run(self) -> list[Event]:
        from rich.live import Live

        out: list[Event] = []
        with Live(self._render(), console=self.console, refresh_per_second=8, transient=True) as live:
            self.live = live
            try:
                while self.session.stage != "done":
                    events = self.step()
                    out += events
                    if ends_headless_run(events):
                        break
            finally:
                self.live = None
        return out


def final_report(session: Session, console: Console, out: Path | None) -> None:
    best = session.best
    shown = best or (session.history[-1] if session.history else None)
    if shown is None:
        console.print(f"No kernel was produced ({session.done_reason or session.stage}).")
        return
    title = "Best kernel" if best else "Last kernel (not feasible)"
    console.rule(f"{title}: v{shown.version} by {shown.author}")
    console.print(Syntax(shown.source, "python", line_numbers=False))
    if shown.result is not None:
        console.print(gate_table(shown.result, title="Gates"))
    if best is not None:
        speed = speed_text(best, "x")
        sp = f"{speed} vs eager PyTorch" if speed else "speedup unknown"
        console.print(f"[bold green]feasible[/]: {best.latency_ms or 0:.4f} ms, {sp}")
        if out is not None:
            console.print(f"kernel written to {out}")
    cost = "unknown" if session.cost is None else f"${session.cost:.4f}"
    console.print(f"session {session.path} ({session.tokens} tokens, cost {cost})")


def default_out(session: Session) -> Path:
    return Path(f"{session.meta['task']['name']}_{session.backend}.py")


def kernel_target(session: Session, out: Path) -> tuple[Path, str]:
    """Where the best kernel goes, and a note when that is not simply `out`.

    The default `<task>_<backend>.py` is never overwritten: an existing one keeps its content and the
    kernel goes to `<task>_<backend>_<session id>.py`. A path given with --out is replaced, saying so.
    """
    if not out.exists():
        return out, ""
    if out == default_out(session):
        other = out.with_name(f"{out.stem}_{session.id}{out.suffix}")
        return other, f"{out} already exists and was left as it is; pass --out FILE to choose the file"
    return out, f"replaced the existing {out}"


def finish(session: Session, out: Path | None, as_json: bool, console: Console) -> None:
    if session.best is not None and out is not None:
        out, note = kernel_target(session, out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(session.best.source, encoding="utf-8")
        if note:
            Console(stderr=True).print(note, highlight=False, soft_wrap=True)
    if as_json:
        summary = session.summary()
        shown = session.best or (session.history[-1] if session.history else None)
        summary["kernel_file"] = str(out) if session.best is not None and out is not None else None
        summary["gates"] = [g.to_dict() for g in shown.result.gates] if shown and shown.result else []
        click.echo(json.dumps(summary, indent=2, default=str))
    else:
        final_report(session, console, out)
    sys.exit(0 if session.best is not None else 1)


def model_or_exit(model: str | None, api_base: str | None, timeout: float, as_json: bool) -> ModelConfig:
    with one_line_errors(ConfigError):
        cfg = resolve_model(model, api_base)
    if cfg is None and interactive(as_json):
        answer = ask_model()
        cfg = ModelConfig(answer, api_base=api_base) if answer else None
    if cfg is None:
        Console(stderr=True).print(manual_mode_message(), highlight=False, soft_wrap=True)
        sys.exit(2)
    from core.config import api_key_problem

    problem = None if cfg.model.startswith("scripted:") else api_key_problem(cfg.model, cfg.api_base)
    if problem:  # before a session folder is made for a model that cannot be called
        raise click.ClickException(problem)
    if not cfg.model.startswith("scripted:"):
        check_endpoint(cfg.api_base)  # an unreachable server: seconds and one line, no session folder
    cfg.timeout_s = timeout
    return cfg


@click.command(name="draft")
@click.argument("task", required=False)
@options.backend
@options.model
@options.api_base
@options.steps(draft_default=4, refine_default=0)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where to write the final kernel (default: <task>_<backend>.py).")
@options.json_output("Print one JSON summary instead of the report.")
@options.sessions_dir
@options.memory_bank()
@options.kernelbench
@options.model_timeout
@click.option("--wall", type=float, default=None, help="Wall-time budget in seconds.")
@click.option("--max-tokens", type=int, default=None, help="Token budget for the session.")
@click.option("--max-cost", type=float, default=None, help="Cost budget in dollars (known prices only).")
@options.memory_gb(default=None)
@options.tolerance
@options.policy
@options.threads
def draft(task, backend, model, api_base, draft_steps, refine_steps, out, as_json, sessions_dir, memory_path, no_memory,
          kernelbench, level, problem, model_timeout, wall, max_tokens, max_cost, memory_gb, tolerance="kernelbench",
          atol=None, rtol=None, policy=None, allow_rules=(), threads=None) -> None:
    """Draft a kernel for TASK (a built-in name, a task file, or --kernelbench) and optionally refine it.

    Exit code 0 iff a feasible kernel was found; 2 when no model is configured.
    """
    console = Console(stderr=as_json)
    check_backend(backend)  # no GPU for --backend cuda: one line before any model call or session folder
    from core.verifying import PolicyError, resolve_policy

    with one_line_errors(PolicyError, ConfigError):
        the_policy = resolve_policy(policy, allow_rules)
    with one_line_errors(TaskError, SessionError, ModelError, ConfigError):
        the_task = resolve_task(task, kernelbench, level, problem, as_json)
        check_task_size(the_task, memory_gb, backend=backend)
        cfg = model_or_exit(model, api_base, model_timeout, as_json)  # a bad model is one line before the task runs
        verify_config = mark_degenerate(the_task, make_config(tolerance, atol, rtol, memory_gb=memory_gb,
                                                              threads=threads, policy=the_policy.preset,
                                                              allow=list(the_policy.allowed)), backend)
        memory = open_memory_checked(memory_path, not no_memory)
        shapes = task_shapes(the_task) if memory is not None else ""
        session = Session.create(
            the_task, backend=backend, model=cfg, memory=memory, root=sessions_root(sessions_dir),
            budgets=Budgets(draft_steps=draft_steps, refine_steps=refine_steps, wall_s=wall, max_tokens=max_tokens, max_cost=max_cost),
            auto_accept=True, shapes=shapes, verify_config=verify_config,
        )
    console.print(f"session {session.id}: {the_task.name} on {backend} with {session.model_name}", highlight=False)
    degenerate = verify_config.degenerate
    if degenerate:
        from core.verdicts import describe_degenerate

        console.print(f"[yellow]warning: task {the_task.name} is {describe_degenerate(degenerate)} at this tolerance; "
                      "kernels are judged against the spread of its output[/]", highlight=False)
    run_headless(console, session)
    finish(session, out or default_out(session), as_json, console)


def run_headless(console: Console, session: Session) -> None:
    """Run the session's remaining steps with the progress display (`draft`, `resume`): ctrl+c says how to
    continue and exits 130; a session folder that cannot be written (disk full, read-only) is one line."""
    try:
        Progress(console, session).run()
    except KeyboardInterrupt:
        from evokernel_tui.cli import stopped

        stopped(f"continue with `evokernel resume {session.id}`")
    except SessionError as exc:
        raise click.ClickException(str(exc)) from None
