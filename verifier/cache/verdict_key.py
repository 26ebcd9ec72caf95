"""A verdict apart from the run that produced it: its cache key (every setting that can change it),
the signed cache lookup (`verifier.cache.signed_verdicts` stores them), and `_finish`, which orders the gates and
fills in the skipped ones before anyone is told of them.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import sys
import time
from collections.abc import Callable
from pathlib import Path

from verifier.backends import Backend
from verifier.config import VerifyConfig
from verifier.keys import content_key
from verifier.result import FAIL, GATE_ORDER, SKIP, GateResult, Progress, VerificationResult

#: `(gate, state)` or `(gate, state, progress)`: what `verify(on_gate=...)` takes. A callback that accepts a
#: third argument is also called with `(gate, "running", Progress)` as a gate's work moves on
#: (`Notify`); one that takes two gets the gate states only, exactly as before progress was told.
GateCallback = Callable[..., None]


class Notify:
    """The one path from a verification to whoever watches it: gate states (`notify(gate, state)`) and,
    within a running gate, its progress (`notify(gate, "running", progress)`; see `verifier.result.Progress`).

    Progress goes only to a callback that can take it (three positional arguments), so existing two-argument
    callbacks keep seeing each state once. A watcher's failure never fails the verification: its exceptions
    are swallowed here, as `_finish` always did for the final states."""

    def __init__(self, on_gate: GateCallback | None):
        self.on_gate = on_gate
        self.takes_progress = on_gate is not None and _accepts_three(on_gate)

    def __call__(self, gate: str, state: str, progress: Progress | None = None) -> None:
        if self.on_gate is None:
            return
        with contextlib.suppress(Exception):
            if progress is None:
                self.on_gate(gate, state)
            elif self.takes_progress:
                self.on_gate(gate, state, progress)


def _accepts_three(fn: Callable[..., None]) -> bool:
    try:
        inspect.signature(fn).bind("gate", "running", None)
    except TypeError:
        return False
    except ValueError:  # no signature to read (a builtin): assume the plain two-argument form
        return False
    return True


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def _cached_verdict(root: Path, key: str, isolated: bool) -> VerificationResult | None:
    from verifier.cache.signed_verdicts import load_verdict

    found = load_verdict(root, key)
    if found is None:
        return None
    data, stored_at = found
    try:
        cached = VerificationResult.from_dict(data)
    except (KeyError, TypeError, ValueError):
        return None
    if cached.isolated != isolated:
        return None
    cached.cached = True
    cached.measured_at = cached.measured_at or stored_at
    cached.notes = [*cached.notes, f"cached verdict: {cached.timing_label()}"]
    return cached


@functools.cache
def verifier_version() -> str:
    """A hash of the verifier package's source files, computed once per process: a verdict cached by an
    earlier verifier (before a fix) is never served by a later one (issue 37)."""
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _verdict_key(reference_source: str, candidate_source: str, be: Backend, config: VerifyConfig) -> str:
    settings = {k: v for k, v in config.to_dict().items()
                if k not in {"use_cache", "build_root", "warm_worker", "hidden_paths"}}
    return content_key("verdict-v3", reference_source, candidate_source, be.name, be.device, settings, sys.version_info[:2],
                       verifier_version())


def _finish(result: VerificationResult, gates: list[GateResult], notify: GateCallback, started: float) -> VerificationResult:
    """Fill in skipped gates after the first failure, in gate order; gates light up only now, once the
    trusted side has decided."""
    by_name = {g.name: g for g in gates}
    failed = False
    ordered = []
    for name in GATE_ORDER:
        g = by_name.get(name)
        if (g is None or failed) and (g is None or g.status != FAIL):
            g = GateResult(name, SKIP, 0.0, "an earlier gate failed" if failed or any(
                    x.status == FAIL for x in gates) else "not run")
        ordered.append(g)
        if g.status == FAIL:
            failed = True
    result.gates = ordered
    for g in ordered:
        with contextlib.suppress(Exception):
            notify(g.name, g.status)
    result.seconds = time.monotonic() - started
    return result
