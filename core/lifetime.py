"""The app's and the commands' side of "every child dies with us" (`verifier.sandbox.lifetime`, re-exported
here because the app reaches the verifier only through core): SIGTERM/SIGINT handlers that kill every
child first, the exit code they ask for (130, 143), and `spawn`/`run` for processes core starts itself
(the task probe)."""

from __future__ import annotations

from verifier.sandbox.lifetime import (
    Cancelled,
    die_with_parent,
    exit_code,
    exit_within,
    install_handlers,
    kill_all,
    run,
    shutting_down,
    signal_name,
    spawn,
)

__all__ = ["Cancelled", "die_with_parent", "exit_code", "exit_within", "install_handlers", "kill_all", "run", "shutting_down",
           "signal_name", "spawn"]
