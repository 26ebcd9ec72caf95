"""Replaying a bench: every recorded kernel of a bench's sessions verified again on this machine,
without any model, and the outcomes recomputed (the recorded ones kept beside them).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from core.bench.benchfile import BenchFile, bench_path, load_bench
from core.bench.config import BenchConfig
from core.bench.records import BenchError, TaskOutcome, outcome_from_results
from core.bench.run import ProgressFn, accepted_index
from core.executors import Executor, verify_job
from core.fsutil import first_line
from core.session import Session, SessionError
from verifier.result import VerificationResult


def session_dirs(path: Path) -> list[Path]:
    """Session folders in a bench output folder (`DIR/sessions/*`) or a plain sessions folder, by name."""
    path = Path(path)
    root = path / "sessions" if (path / "sessions").is_dir() else path
    if not root.is_dir():
        raise BenchError(f"{path} is not a folder of sessions")
    dirs = sorted(d for d in root.iterdir() if (d / "session.json").exists())
    if not dirs:
        raise BenchError(f"no sessions under {root}; pass a bench output folder or a sessions folder")
    return dirs


def replay_bench(source: Path, out: Path, config: BenchConfig, *, executor: Executor, job: Callable[..., VerificationResult] = verify_job,
                 on_progress: ProgressFn | None = None) -> dict[str, object]:
    """Verify every recorded kernel again here and recompute the outcomes; sessions are only read.

    All kernels of a session are submitted at once, so the executor's workers are kept busy. The
    recorded outcomes are kept under `recorded` to set beside the replayed ones.
    """
    notify = on_progress or (lambda kind, task, outcome: None)
    sessions = []
    for d in session_dirs(source):
        try:
            sessions.append(Session.open(d))
        except SessionError as exc:
            raise BenchError(f"cannot replay {d.name}: {exc}") from None
    order = [s.meta["task"]["name"] for s in sessions]
    if len(set(order)) != len(order):
        raise BenchError(f"{source} holds several sessions of the same task; replay one bench's sessions at a time")
    settings = config.settings(None, mode="replay")
    settings["replayed_from"] = str(Path(source).resolve())
    recorded_bench = bench_path(Path(source))
    if recorded_bench.exists():  # the replayed run's own suite (a KernelBench run stays labelled as one)
        try:
            settings["suite"] = load_bench(recorded_bench).get("settings", {}).get("suite", settings["suite"])
        except BenchError:
            pass
    if sessions:
        settings["backend"] = sessions[0].backend
        settings["recorded_model"] = sessions[0].model_name
    bench = BenchFile(out, settings, order)
    bench.extra["recorded"] = [_recorded_outcome(s).to_dict() for s in sessions]
    bench.flush()
    for s in sessions:
        name = s.meta["task"]["name"]
        if bench.done(name):
            notify("skipped", name, bench.outcomes[name])
            continue
        notify("started", name, None)
        start = time.monotonic()
        ref = s.meta["task"]["source"]
        futures = [executor.submit(job, ref, a.source, s.backend, config.verify_config) for a in s.history]
        results: list[VerificationResult | None] = []
        error = ""
        for fut in futures:
            try:
                results.append(fut.result())
            except Exception as exc:  # one kernel the verifier could not run; the others still count
                results.append(None)
                error = error or f"verifier error: {first_line(exc, 200)}"
        t = s.meta["task"]
        outcome = outcome_from_results(name, int(t.get("level") or 1), results, tokens=s.tokens, cost=s.cost,
                                       category=t.get("category") or "", session=s.id,
                                       seconds=time.monotonic() - start)
        if error and not any(results):
            outcome.error = error
        bench.record(outcome)
        notify("finished", name, outcome)
    return bench.flush()


def _recorded_outcome(s: Session) -> TaskOutcome:
    t = s.meta["task"]
    return outcome_from_results(t["name"], int(t.get("level") or 1), [a.result for a in s.history],
                                tokens=s.tokens, cost=s.cost, category=t.get("category") or "", session=s.id,
                                seconds=s.elapsed_s, best_index=accepted_index(s))
