"""The step machine: `Session` (create/open, actions, the step, events), one writer per folder."""

from __future__ import annotations

import errno
import json
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.events import (
    PAYLOADS,
    TOLD_PAYLOADS,
    Accepted,
    BudgetChanged,
    Event,
    EventLog,
    HumanEdit,
    MemoryMarked,
    Payload,
    Rejected,
    SessionStarted,
    SessionState,
    StageChanged,
    Starter,
    StepDone,
    apply,
    fold,
    read_events,
)
from core.fsutil import FolderLock, LockHeld, os_error_text, release_lock
from core.llm import ModelClient, ModelConfig, ScriptedModel, make_client
from core.rewards import best_in_frame
from core.session.folder import _atomic_write, _slug, _versions, load_meta
from core.session.learning import Learning, _deferred_credit
from core.session.models import (
    _default_verify,
    _model_meta,
    _policy_meta,
    config_from_meta,
    verifier_settings_meta,
)
from core.session.records import (
    FATAL_MODEL_ERRORS,
    STAGES,
    Budgets,
    EventSink,
    SessionBusy,
    SessionError,
    SessionMeta,
    VerifyFn,
)
from core.session.stepping import Stepping
from core.session.views import StateViews

if TYPE_CHECKING:
    from core.tasks import Task
    from memory import MemoryStore, RetrievalPolicy
    from verifier import VerifyConfig
    pass


class Session(Stepping, StateViews, Learning):
    """A task being drafted and refined; see the module docstring and docs/ARCHITECTURE.md."""

    def __init__(self, path: Path, meta: SessionMeta | dict[str, object], *,
                 model: ModelConfig | ModelClient | None | bool = False,
                 memory: MemoryStore | None = None, verify_fn: VerifyFn | None = None,
                 verify_config: VerifyConfig | None = None, policy: RetrievalPolicy | None = None,
                 auto_accept: bool | None = None):
        self.path = Path(path)
        self.meta = meta if isinstance(meta, SessionMeta) else SessionMeta.from_dict(meta)
        self.id: str = self.meta.id
        self.backend: str = self.meta.backend
        self._base_budgets = Budgets.from_dict(self.meta.budgets)
        self.auto_accept = self.meta.auto_accept if auto_accept is None else auto_accept
        self.memory = memory
        self.verify_fn = verify_fn or _default_verify
        self.verify_config = verify_config
        self._policy = policy
        self._model_override = model
        self._client: ModelClient | None = None
        self._client_ready = False
        self.log = EventLog(self.path / "events.jsonl")
        self._lock = threading.Lock()
        self._collect: list[Event] | None = None
        self._on_event: EventSink | None = None
        # one writer per session folder across processes (see `FolderLock`); released by close() or GC
        self.folder_lock = FolderLock(self.path)
        self._release_folder = weakref.finalize(self, release_lock, self.folder_lock)
        # everything folded from events lives in `state` (core.events.apply); the attributes below
        # (stage, history, best, pending, ...) read it
        self.state = SessionState()

    # ---------------------------------------------------------------- create / open

    @classmethod
    def create(cls, task: Task, backend: str = "cpu", model: ModelConfig | ModelClient | None = None,
               memory: MemoryStore | None = None, budgets: Budgets | None = None, root: Path | str = Path("sessions"), *,
               verify_fn: VerifyFn | None = None, verify_config: VerifyConfig | None = None,
               policy: RetrievalPolicy | None = None,
               auto_accept: bool = False, shapes: str = "", session_id: str | None = None) -> Session:
        """Make a new session folder under `root` and record `session_started`."""
        task_dict = task.to_dict() if hasattr(task, "to_dict") else dict(vars(task))
        budgets = budgets or Budgets()
        sid = session_id or f"{time.strftime('%Y%m%d-%H%M%S')}-{_slug(task_dict['name'])}-{uuid.uuid4().hex[:4]}"
        path = Path(root) / sid
        try:
            (path / "kernels").mkdir(parents=True, exist_ok=False)
        except FileExistsError:
            raise SessionError(f"session folder {path} already exists; pick another id") from None
        except OSError as exc:
            raise SessionError(f"cannot create session folder {path}: {os_error_text(exc)}") from None
        meta = SessionMeta(id=sid, task=task_dict, backend=backend, created=time.time(), model=_model_meta(model),
                           budgets=budgets.to_dict(), shapes=shapes,
                           settings={"auto_accept": auto_accept, "retrieval": _policy_meta(policy),
                                     "verifier": verifier_settings_meta(verify_config)},
                           versions=_versions())
        _atomic_write(path / "session.json", json.dumps(meta.to_dict(), indent=2, default=str))
        session = cls(path, meta, model=model, memory=memory, verify_fn=verify_fn, verify_config=verify_config,
                      policy=policy, auto_accept=auto_accept)
        session._take_folder_lock()
        with session._collecting(None):
            session._emit(SessionStarted(task=task_dict["name"], backend=backend, model=session.model_name,
                                         budgets=budgets.to_dict(), manual=session.manual))
            if session.manual:
                session._start_manual()
        return session

    def _start_manual(self) -> None:
        """Manual mode: a starter kernel that builds, and the draft memories on screen from the start."""
        from core.starter import starter_kernel

        t = self.meta.task
        self._emit(Starter(source=starter_kernel(t["name"], t.get("source", ""), self.backend)))
        self._retrieve(self.stage if self.stage in ("draft", "refine") else "draft")

    @classmethod
    def open(cls, path: Path | str, *, model: ModelConfig | ModelClient | None | bool = False,
             memory: MemoryStore | None = None, verify_fn: VerifyFn | None = None,
             verify_config: VerifyConfig | None = None, policy: RetrievalPolicy | None = None,
             auto_accept: bool | None = None, budgets: Budgets | None = None, lock: bool = True) -> Session:
        """Rebuild a session from its folder; `model=False` means "the model it was created with".

        With `lock` (the default) the session is opened for writing: if another process has it open
        (a second `resume` or `tui --session`), SessionError names that process. Readers (listings,
        replay) pass `lock=False`; a session opened so takes the lock at its first write.
        """
        path = Path(path)
        meta = load_meta(path)
        if budgets is not None:
            meta.budgets = budgets.to_dict()
        if verify_config is None:  # the settings it was created with (tolerance, policy, memory, threads...)
            verify_config = config_from_meta(meta.settings.get("verifier"))
        session = cls(path, meta, model=model, memory=memory, verify_fn=verify_fn, verify_config=verify_config,
                      policy=policy, auto_accept=auto_accept)
        if lock:
            session._take_folder_lock(quiet_if_read_only=True)
        try:
            events = read_events(path / "events.jsonl")
        except ValueError as exc:
            raise SessionError(str(exc)) from None
        session.state = fold(events)
        if session.current_source and not session.kernel_path.exists() and session.folder_lock.held:
            _atomic_write(session.kernel_path, session.current_source)
        return session

    def close(self) -> None:
        """Let other processes open this session (also done when the object is collected or the process ends)."""
        self._release_folder()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _take_folder_lock(self, quiet_if_read_only: bool = False) -> None:
        try:
            self.folder_lock.acquire()
        except LockHeld as exc:
            raise SessionError(f"session {self.id} is open in {exc.holder}; close it there first "
                               f"(or wait for it to finish)") from None
        except OSError as exc:
            if quiet_if_read_only and exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
                return  # a read-only folder can still be read; the first write says why it cannot
            raise SessionError(f"cannot lock session {self.id} in {self.path}: {os_error_text(exc)}") from None

    # ---------------------------------------------------------------- actions

    def step(self, on_event: EventSink | None = None, on_token: Callable[[str], None] | None = None) -> list[Event]:
        """Run one draft or refine step and return its events; [] once the session is done."""
        with self._exclusive(), self._collecting(on_event) as events:
            if self._finish_interrupted():
                self._advance()
                return events
            self._advance()
            if self.stage == "done":
                return events
            self._model_step(on_token)
            self._advance()
            return events

    def run(self, on_event: EventSink | None = None, on_token: Callable[[str], None] | None = None) -> list[Event]:
        """Headless: step until done, or until a person is needed (manual mode)."""
        out: list[Event] = []
        while self.stage != "done":
            events = self.step(on_event=on_event, on_token=on_token)
            out += events
            if ends_headless_run(events):
                break
        return out

    def submit_human_edit(self, source: str, on_event: EventSink | None = None) -> list[Event]:
        """Verify a person's kernel, record it with author "person" and credit the memories on screen.

        The starter as written (`v` or ctrl+s before any change) is nobody's work: it is recorded with
        author "seed", with no `human_edit`, no reward and no memory credited (the person's marks stand
        for their own next edit)."""
        if not source.strip():
            raise SessionError("the edited kernel is empty")
        with self._exclusive(), self._collecting(on_event) as events:
            self._finish_interrupted()
            self.step_no += 1
            start = time.monotonic()
            stage = self._work_stage()
            seed = self._is_untouched_starter(source)
            credited = [i for i in self.onscreen_ids if self.state.marked.get(i)]  # marked used since retrieval
            attempt = self._record_kernel(source, "seed" if seed else "person", stage)
            if not seed:
                self._emit(HumanEdit(version=attempt.version, stage=stage, credited=credited))
            result = self._verify(attempt)
            outcome = "verifier_error"
            if result is not None:
                outcome = result.outcome
                best_ms = best_in_frame(result, self.best)
                if not seed:
                    self._learn(stage, attempt, result, credited, best_ms)
                self._judge(stage, attempt, result, best_ms)
            self._emit(StepDone(stage=stage, counts=False, outcome=outcome, seconds=time.monotonic() - start,
                                feedback=self._feedback_for(result)))
            self._advance()
            return events

    def mark_used(self, item_id: str, used: bool = True, on_event: EventSink | None = None) -> list[Event]:
        """Mark a memory on screen as used (or not) by the person: only marked memories are credited
        for the person's next edit (none by default). Marks last until the next retrieval."""
        if item_id not in self.onscreen_ids:
            raise SessionError(f"memory {item_id} is not on screen; mark one of the memories shown")
        with self._exclusive(), self._collecting(on_event) as events:
            self._emit(MemoryMarked(id=item_id, used=bool(used)))
            return events

    def accept_pending(self, on_event: EventSink | None = None) -> list[Event]:
        """Make the pending refinement the best kernel and distil an insight from it."""
        with self._exclusive(), self._collecting(on_event) as events:
            if self.pending is None:
                raise SessionError("there is no pending refinement to accept")
            from memory.values import person_reward

            before, after = self.best, self.pending
            self._emit(Accepted(version=after.version, by="person", reason="accepted"))
            ids, value = _deferred_credit(after)
            self._credit(ids, "refine", person_reward("accepted", value), after)
            if before is not None:
                self._distil_insight(before, after)
            return events

    def reject_pending(self, on_event: EventSink | None = None) -> list[Event]:
        """Drop the pending refinement; the best kernel goes back on screen."""
        with self._exclusive(), self._collecting(on_event) as events:
            if self.pending is None:
                raise SessionError("there is no pending refinement to reject")
            rejected = self.pending
            self._emit(Rejected(version=rejected.version, by="person"))
            from memory.values import person_reward

            ids, value = _deferred_credit(rejected)
            self._credit(ids, "refine", person_reward("rejected", value), rejected)
            return events

    def reverify(self, version: int | None = None, on_event: EventSink | None = None) -> list[Event]:
        """Verify a recorded kernel again (default: the best, else the latest); values are not credited."""
        with self._exclusive(), self._collecting(on_event) as events:
            target = self.attempt(version) if version is not None else (self.best or (self.history[-1] if self.history else None))
            if target is None:
                raise SessionError("no kernel to verify" if version is None else f"no kernel version {version}")
            self._verify(target, reverify=True)
            return events

    def set_stage(self, stage: str, on_event: EventSink | None = None) -> list[Event]:
        """Move to another stage by hand (refining needs a feasible kernel)."""
        if stage not in STAGES:
            raise SessionError(f"unknown stage {stage!r}; expected one of {', '.join(STAGES)}")
        with self._exclusive(), self._collecting(on_event) as events:
            if stage == "refine" and self.best is None:
                raise SessionError("cannot refine yet: no feasible kernel")
            if stage != self.stage:
                self._emit(StageChanged(from_=self.stage, to=stage, reason="set by person"))
            return events

    def add_steps(self, stage: str, n: int, on_event: EventSink | None = None) -> list[Event]:
        """Grant more model steps to a stage (and reopen it if the session had finished for lack of them)."""
        if stage not in ("draft", "refine") or n <= 0:
            raise SessionError("add_steps needs stage draft or refine and a positive count")
        with self._exclusive(), self._collecting(on_event) as events:
            self._emit(BudgetChanged(stage=stage, add=n))
            if self.stage == "done":
                target = "refine" if self.best is not None else "draft"
                if target == stage:
                    self._emit(StageChanged(from_="done", to=target, reason="more steps granted"))
            return events

    # ---------------------------------------------------------------- events

    def _emit(self, payload: Payload) -> Event:
        """Record an event: append it (fsynced) to the log, fold it into `state` with `core.events.apply`,
        keep current_kernel.py equal to the kernel on screen, then tell the caller (once: `on_event`
        while a caller listens, else the list an action returns).

        Only typed payloads are written. The JSON form is the payload's `to_data()` read back through
        its type (so a recording holds exactly what a reader of that type sees); a payload of a kind
        `core.events` does not register, or one carrying keys its type has no field for, is refused."""
        kind = payload.KIND
        typed = PAYLOADS.get(kind)
        if typed is None or not isinstance(payload, typed):
            raise ValueError(f"no event payload type for {kind!r}: add it to core.events")
        if payload.extra:  # every key written has a typed field: readers never meet an untyped one
            raise ValueError(f"{typed.__name__} has no field for {sorted(payload.extra)}")
        event = Event(kind, typed.from_data(payload.to_data()).to_data(), step=self.step_no)
        if not self.folder_lock.held:
            self._take_folder_lock()
        try:
            self.log.append(event)
        except OSError as exc:
            raise SessionError(f"cannot write to session {self.id} ({self.log.path}): {os_error_text(exc)}; "
                               f"then `evokernel resume {self.id}`") from None
        before = self.state.current_source
        self.state = apply(self.state, event)
        if kind in ("kernel", "accepted", "rejected", "starter") or self.state.current_source != before:
            _atomic_write(self.kernel_path, self.current_source)
        if self._collect is not None:
            self._collect.append(event)
        if self._on_event is not None:
            self._on_event(event)
        return event

    def _tell(self, payload: Payload) -> None:
        """Tell the listener (`on_event`) something that is not recorded (`core.events.TOLD_PAYLOADS`: a
        running gate's progress): no log line, no fold, not in the list an action returns."""
        if type(payload) is not TOLD_PAYLOADS.get(payload.KIND):
            raise ValueError(f"{payload.KIND!r} is recorded, not told: use _emit")
        if self._on_event is not None:
            self._on_event(Event(payload.KIND, payload.to_data(), step=self.step_no))

    def _make_client(self) -> ModelClient | None:
        if self._model_override is not False:
            return make_client(self._model_override)
        meta = self.meta.model
        if meta is None:
            return None
        if meta["kind"] == "scripted":
            return ScriptedModel(list(meta["replies"]), position=self.model_calls, source=meta.get("source"),
                                 name=meta.get("name", "scripted"))
        if meta["kind"] == "litellm":
            return make_client(ModelConfig.from_dict(meta["config"]))
        raise SessionError(f"session {self.id} records an unknown model kind {meta['kind']!r}")

    # ---------------------------------------------------------------- plumbing

    def _exclusive(self):
        if not self._lock.acquire(blocking=False):
            raise SessionBusy(f"session {self.id} is busy with another step")
        return _Release(self._lock)

    def _collecting(self, on_event: EventSink | None):
        return _Collect(self, on_event)


class _Release:
    def __init__(self, lock: threading.Lock):
        self.lock = lock

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        self.lock.release()


class _Collect:
    def __init__(self, session: Session, on_event: EventSink | None):
        self.session, self.on_event = session, on_event

    def __enter__(self) -> list[Event]:
        self.session._collect, self.session._on_event = [], self.on_event
        return self.session._collect

    def __exit__(self, *exc: Any) -> None:
        self.session._collect, self.session._on_event = None, None


def ends_headless_run(events: list[Event]) -> bool:
    """A headless run stops when a person is needed or the model cannot be used (no key, bad config):
    retrying those would only spend the budget on the same error."""
    if not events:
        return True
    return any(e.kind == "needs_human" or (e.kind == "model_error" and e.data.get("reason") in FATAL_MODEL_ERRORS)
               for e in events)
