"""`evokernel compare SESSION vA vB`: re-time two recorded kernels back to back, paired."""

from __future__ import annotations

import contextlib
import json
import sys

import click
from rich.console import Console
from rich.live import Live

from core.config import sessions_root
from evokernel_tui import options
from evokernel_tui.cli import one_line_errors
from evokernel_tui.phase_lines import PhaseLine


def _version(text: str) -> int:
    try:
        return int(text.lstrip("vV"))
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a version; use e.g. v3 or 3") from None


@click.command()
@click.argument("session_ref")
@click.argument("version_a")
@click.argument("version_b")
@options.sessions_dir
@options.threads
@options.policy
@options.unsafe_no_isolation
@options.json_output()
def compare(session_ref, version_a, version_b, sessions_dir, threads, policy, allow_rules, unsafe, as_json) -> None:
    """Re-time versions A and B of SESSION's kernel back to back on the same fresh inputs and print B's
    speedup over A with its 95% interval. Exit status 0 when both ran, 1 otherwise."""
    from core.session import Session, SessionError, find_session
    from core.tasks import Task
    from core.verdicts import VerifyConfig
    from core.verifying import PolicyError, VerifyError, compare_sources, describe_comparison, resolve_policy

    with one_line_errors(PolicyError):
        the_policy = resolve_policy(policy, allow_rules)

    va, vb = _version(version_a), _version(version_b)
    with one_line_errors(SessionError):
        path = find_session(session_ref, sessions_root(sessions_dir))
        session = Session.open(path, lock=False)
    sources = {a.version: a.source for a in session.history}
    missing = [f"v{v}" for v in (va, vb) if v not in sources]
    if missing:
        known = ", ".join(f"v{v}" for v in sorted(sources)) or "none"
        raise click.ClickException(f"{' and '.join(missing)} not in session {path.name} (versions: {known})")
    config = VerifyConfig(threads=threads, isolate=not unsafe, use_cache=False, policy=the_policy.preset,
                          allow=list(the_policy.allowed))
    # what runs and for how long: a live line on a terminal, plain lines in a pipe, nothing with --json
    console = Console(stderr=as_json)
    phase = PhaseLine(console, live=console.is_terminal and not as_json, silent=as_json)
    phase.say("starting the kernels' sandboxes")
    with contextlib.ExitStack() as live, one_line_errors(VerifyError):
        if phase.live:
            live.enter_context(Live(phase, console=console, refresh_per_second=10, transient=True))
        try:
            result = compare_sources(Task.from_dict(session.meta["task"]), sources[va], sources[vb], session.backend,
                                     config, on_gate=phase.on_gate)
        except KeyboardInterrupt:  # ctrl+c or SIGTERM: what was stopped, exit 130/143
            from evokernel_tui.cli import stopped

            stopped(f"stopped comparing v{va} and v{vb} of session {path.name} during {phase.where()}; no result")
    if as_json:
        click.echo(json.dumps({"session": path.name, "a": f"v{va}", "b": f"v{vb}", **result}))
    else:
        click.echo(describe_comparison(result, f"v{va}", f"v{vb}"))
    sys.exit(1 if result.get("error") else 0)
