"""The draft -> refine loop as a step machine, stored as a folder that survives a crash.

Every state change goes through `Journal.emit`: the event is appended (fsynced) to `events.jsonl` first
and then folded into the journal's `state` by `core.events.apply`, the same pure fold the app's view and the
command line use. `Session.open` folds the same log, so a reopened session is exactly the session that was
running; a step that a crash cut short is finished by the next action (`Stepper.finish_interrupted`).

One process at a time writes a session: the folder's `.lock` (see `core.fsutil.FolderLock`).

A step never spawns threads or waits on anything but its own model call and verification; the
app runs `step()` in a worker and the headless commands call `run()`.

The package, by concern: `records` (errors, budgets, SessionMeta), `folder` (session.json, finding a
session, the lock), `models` (model and verifier records; `SessionModel`, `SessionVerifier`), `journal` (the
log, its fold and the folder lock: the one writer), `learning` (`Learner`: retrieval, rewards, insights),
`stepping` (`Stepper`: the step itself), `machine` (the `Session`, composed of those: create/open, actions and
its read-only views of the fold), `port` (`SessionPort`: what the app uses) and `replay` (listings, replay,
reverification).
"""

from __future__ import annotations

from core.events import Attempt
from core.session.folder import check_not_open, find_session, load_meta
from core.session.machine import Session, ends_headless_run
from core.session.models import default_verify, fresh_config
from core.session.records import (
    FATAL_MODEL_ERRORS,
    FORMAT_VERSION,
    STAGES,
    Budgets,
    EventSink,
    ReverifyRow,
    SessionBusy,
    SessionError,
    SessionMeta,
    VerifyFn,
)
from core.session.replay import list_sessions, replay, reverify_all

__all__ = [
    "Attempt",
    "Budgets",
    "EventSink",
    "FATAL_MODEL_ERRORS",
    "FORMAT_VERSION",
    "ReverifyRow",
    "STAGES",
    "Session",
    "SessionBusy",
    "SessionError",
    "SessionMeta",
    "VerifyFn",
    "check_not_open",
    "default_verify",
    "ends_headless_run",
    "find_session",
    "fresh_config",
    "list_sessions",
    "load_meta",
    "replay",
    "reverify_all",
]
