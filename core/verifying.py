"""The loop's and the command line's way into the verifier: one call, errors as one-line `VerifyError`s."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from core.tasks import Task
from verifier import VerificationResult, VerifyConfig


class VerifyError(Exception):
    """The verification could not run (no compiler, no GPU, a task whose reference fails)."""


def verify_task(
    task: Task,
    source: str,
    backend: str = "cpu",
    config: VerifyConfig | None = None,
    on_gate: Callable[[str, str], None] | None = None,
) -> VerificationResult:
    """Verify `source` against `task`; bad candidates come back as failing gates, never as exceptions."""
    from verifier.api import VerifierError, verify
    from verifier.backends import BackendUnavailable

    try:
        return verify(task.source, source, backend=backend, config=config, on_gate=on_gate)
    except (VerifierError, BackendUnavailable) as exc:
        raise VerifyError(str(exc)) from None


def prewarm_in_background(backend: str = "cpu", config: VerifyConfig | None = None):
    """Warm the verifier (worker process, precompiled headers) on a daemon thread; failures are ignored
    because the first verification simply pays the cost instead."""
    import threading

    def run() -> None:
        from verifier.api import prewarm

        with contextlib.suppress(Exception):
            prewarm(backend, config)

    thread = threading.Thread(target=run, name="evokernel-prewarm", daemon=True)
    thread.start()
    return thread
