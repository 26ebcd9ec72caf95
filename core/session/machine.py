"""The step machine: `Session` (create/open, actions, the public state), one writer per folder.

A `Session` is composed of collaborators it makes in `__init__`, each given what it reads: the `Journal`
(core/session/journal.py: the event log, its fold and the folder lock; every change is written there),
the `SessionModel` and `SessionVerifier` (core/session/models.py), the `Learner` (retrieval, rewards,
insights: core/session/learning.py) and the `Stepper` (the step itself: core/session/stepping.py). None
of them holds the session. What the app uses of it is `core.session.port.SessionPort`.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.events import (
    Accepted,
    Attempt,
    BudgetChanged,
    Event,
    HumanEdit,
    MemoryMarked,
    Rejected,
    RetrievedItem,
    SessionStarted,
    SessionState,
    StageChanged,
    Starter,
    StepDone,
    fold,
    read_events,
    speed_text,
)
from core.fsutil import os_error_text, release_lock
from core.llm import ModelClient, ModelConfig
from core.rewards import best_in_frame
from core.session.folder import _atomic_write, _slug, _versions, load_meta
from core.session.journal import Journal
from core.session.learning import Learner, _deferred_credit
from core.session.models import (
    SessionModel,
    SessionVerifier,
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
from core.session.stepping import Stepper

if TYPE_CHECKING:
    from core.tasks import Task
    from memory import MemoryStore, RetrievalPolicy
    from verifier import VerifyConfig


class Session:
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
        #: the event log and everything folded from it: the session's only state
        self.journal = Journal(self.path, self.id)
        journal = self.journal
        self.model = SessionModel(model, self.meta.model, self.id, lambda: journal.state.model_calls)
        self.verifier = SessionVerifier(verify_fn or _default_verify, verify_config)
        self.learner = Learner(journal, self.model, self.meta, memory, policy)
        self.stepper = Stepper(journal, self.learner, self.model, self.verifier, self.meta,
                               Budgets.from_dict(self.meta.budgets),
                               self.meta.auto_accept if auto_accept is None else auto_accept)
        self._lock = threading.Lock()
        # the folder lock is released by close(), or when the session is collected or the process ends
        self._release_folder = weakref.finalize(self, release_lock, journal.folder_lock)

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
        session.journal.take_lock()
        with session.journal.collecting(None):
            session.journal.emit(SessionStarted(task=task_dict["name"], backend=backend, model=session.model_name,
                                         budgets=budgets.to_dict(), manual=session.manual))
            if session.manual:
                session._start_manual()
        return session

    def _start_manual(self) -> None:
        """Manual mode: a starter kernel that builds, and the draft memories on screen from the start."""
        from core.starter import starter_kernel

        t = self.meta.task
        self.journal.emit(Starter(source=starter_kernel(t["name"], t.get("source", ""), self.backend)))
        self.learner.retrieve(self.stage if self.stage in ("draft", "refine") else "draft")

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
            session.journal.take_lock(quiet_if_read_only=True)
        try:
            events = read_events(path / "events.jsonl")
        except ValueError as exc:
            raise SessionError(str(exc)) from None
        session.journal.state = fold(events)
        if session.current_source and not session.kernel_path.exists() and session.journal.folder_lock.held:
            _atomic_write(session.kernel_path, session.current_source)
        return session

    def close(self) -> None:
        """Let other processes open this session (also done when the object is collected or the process ends)."""
        self._release_folder()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---------------------------------------------------------------- actions

    def step(self, on_event: EventSink | None = None, on_token: Callable[[str], None] | None = None) -> list[Event]:
        """Run one draft or refine step and return its events; [] once the session is done."""
        with self._exclusive(), self.journal.collecting(on_event) as events:
            if self.stepper.finish_interrupted():
                self.stepper.advance()
                return events
            self.stepper.advance()
            if self.stage == "done":
                return events
            self.stepper.model_step(on_token)
            self.stepper.advance()
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
        with self._exclusive(), self.journal.collecting(on_event) as events:
            self.stepper.finish_interrupted()
            self.journal.next_step()
            start = time.monotonic()
            stage = self.stepper.work_stage()
            seed = self.learner.is_untouched_starter(source)
            credited = [i for i in self.onscreen_ids if self.state.marked.get(i)]  # marked used since retrieval
            attempt = self.stepper.record_kernel(source, "seed" if seed else "person", stage)
            if not seed:
                self.journal.emit(HumanEdit(version=attempt.version, stage=stage, credited=credited))
            result = self.stepper.verify(attempt)
            outcome = "verifier_error"
            if result is not None:
                outcome = result.outcome
                best_ms = best_in_frame(result, self.best)
                if not seed:
                    self.learner.learn(stage, attempt, result, credited, best_ms)
                self.stepper.judge(stage, attempt, result, best_ms)
            self.journal.emit(StepDone(stage=stage, counts=False, outcome=outcome, seconds=time.monotonic() - start,
                                feedback=self.stepper.feedback_for(result)))
            self.stepper.advance()
            return events

    def mark_used(self, item_id: str, used: bool = True, on_event: EventSink | None = None) -> list[Event]:
        """Mark a memory on screen as used (or not) by the person: only marked memories are credited
        for the person's next edit (none by default). Marks last until the next retrieval."""
        if item_id not in self.onscreen_ids:
            raise SessionError(f"memory {item_id} is not on screen; mark one of the memories shown")
        with self._exclusive(), self.journal.collecting(on_event) as events:
            self.journal.emit(MemoryMarked(id=item_id, used=bool(used)))
            return events

    def accept_pending(self, on_event: EventSink | None = None) -> list[Event]:
        """Make the pending refinement the best kernel and distil an insight from it."""
        with self._exclusive(), self.journal.collecting(on_event) as events:
            if self.pending is None:
                raise SessionError("there is no pending refinement to accept")
            from memory.values import person_reward

            before, after = self.best, self.pending
            self.journal.emit(Accepted(version=after.version, by="person", reason="accepted"))
            ids, value = _deferred_credit(after)
            self.learner.credit(ids, "refine", person_reward("accepted", value), after)
            if before is not None:
                self.learner.distil_insight(before, after)
            return events

    def reject_pending(self, on_event: EventSink | None = None) -> list[Event]:
        """Drop the pending refinement; the best kernel goes back on screen."""
        with self._exclusive(), self.journal.collecting(on_event) as events:
            if self.pending is None:
                raise SessionError("there is no pending refinement to reject")
            rejected = self.pending
            self.journal.emit(Rejected(version=rejected.version, by="person"))
            from memory.values import person_reward

            ids, value = _deferred_credit(rejected)
            self.learner.credit(ids, "refine", person_reward("rejected", value), rejected)
            return events

    def reverify(self, version: int | None = None, on_event: EventSink | None = None) -> list[Event]:
        """Verify a recorded kernel again (default: the best, else the latest); values are not credited."""
        with self._exclusive(), self.journal.collecting(on_event) as events:
            target = self.attempt(version) if version is not None else (self.best or (self.history[-1] if self.history else None))
            if target is None:
                raise SessionError("no kernel to verify" if version is None else f"no kernel version {version}")
            self.stepper.verify(target, reverify=True)
            return events

    def set_stage(self, stage: str, on_event: EventSink | None = None) -> list[Event]:
        """Move to another stage by hand (refining needs a feasible kernel)."""
        if stage not in STAGES:
            raise SessionError(f"unknown stage {stage!r}; expected one of {', '.join(STAGES)}")
        with self._exclusive(), self.journal.collecting(on_event) as events:
            if stage == "refine" and self.best is None:
                raise SessionError("cannot refine yet: no feasible kernel")
            if stage != self.stage:
                self.journal.emit(StageChanged(from_=self.stage, to=stage, reason="set by person"))
            return events

    def add_steps(self, stage: str, n: int, on_event: EventSink | None = None) -> list[Event]:
        """Grant more model steps to a stage (and reopen it if the session had finished for lack of them)."""
        if stage not in ("draft", "refine") or n <= 0:
            raise SessionError("add_steps needs stage draft or refine and a positive count")
        with self._exclusive(), self.journal.collecting(on_event) as events:
            self.journal.emit(BudgetChanged(stage=stage, add=n))
            if self.stage == "done":
                target = "refine" if self.best is not None else "draft"
                if target == stage:
                    self.journal.emit(StageChanged(from_="done", to=target, reason="more steps granted"))
            return events


    # ---------------------------------------------------------------- settings the session holds

    @property
    def verify_fn(self) -> VerifyFn:
        """The verifier (the real one unless a stand-in was given); may be replaced while open."""
        return self.verifier.fn

    @verify_fn.setter
    def verify_fn(self, fn: VerifyFn) -> None:
        self.verifier.fn = fn

    @property
    def verify_config(self) -> VerifyConfig | None:
        """The verifier settings (None: its defaults); may be replaced while open."""
        return self.verifier.config

    @verify_config.setter
    def verify_config(self, config: VerifyConfig | None) -> None:
        self.verifier.config = config

    @property
    def auto_accept(self) -> bool:
        """A faster refinement is accepted at once (headless) rather than left pending for the person."""
        return self.stepper.auto_accept

    @property
    def memory(self) -> MemoryStore | None:
        return self.learner.memory

    @property
    def policy(self) -> RetrievalPolicy:
        """The retrieval policy (the one given, else the one session.json records)."""
        return self.learner.policy

    # ---------------------------------------------------------------- public state (read from the fold)

    @property
    def state(self) -> SessionState:
        """Everything folded from the events (`core.events.apply`); the attributes below read it."""
        return self.journal.state

    @property
    def stage(self) -> str:
        """Draft, refine or done."""
        return self.state.stage

    @property
    def done_reason(self) -> str:
        return self.state.done_reason

    @property
    def used(self) -> dict[str, int]:
        """Model steps spent per stage."""
        return dict(self.state.used)

    @property
    def history(self) -> tuple[Attempt, ...]:
        """Every kernel version, oldest first."""
        return self.state.history

    @property
    def best(self) -> Attempt | None:
        """The accepted kernel."""
        return self.state.best

    @property
    def pending(self) -> Attempt | None:
        """A faster refinement awaiting accept/reject."""
        return self.state.pending

    @property
    def current_source(self) -> str:
        """The kernel on screen."""
        return self.state.current_source

    @property
    def feedback(self) -> str:
        """The last step's feedback for the next prompt."""
        return self.state.feedback

    @property
    def tokens(self) -> int:
        return self.state.tokens

    @property
    def cost_known(self) -> float:
        return self.state.cost_known

    @property
    def cost_unknown(self) -> bool:
        return self.state.cost_unknown

    @property
    def model_calls(self) -> int:
        return self.state.model_calls

    @property
    def elapsed_s(self) -> float:
        return self.state.elapsed_s

    @property
    def onscreen_ids(self) -> list[str]:
        """Ids of the memories on screen."""
        return list(self.state.onscreen_ids)

    @property
    def retrieved(self) -> list[RetrievedItem]:
        """The memories on screen as the last retrieval recorded them."""
        return list(self.state.retrieved)

    @property
    def credit_ids(self) -> list[str]:
        """The ids a model step's reward credits (ranked slots and the start point)."""
        return list(self.state.credit_ids)

    @property
    def step_no(self) -> int:
        """The number of the latest step."""
        return self.state.step

    @property
    def budgets(self) -> Budgets:
        """The budgets the session was created (or opened) with, plus the steps granted since."""
        return self.stepper.budgets

    @property
    def interrupted(self) -> Attempt | None:
        """The kernel of a step that a crash cut short (recorded, never finished); the next action finishes it."""
        return self.state.attempt(self.state.in_flight)

    @property
    def task(self) -> Task:
        from core.tasks import Task

        return Task.from_dict(self.meta.task)

    @property
    def kernel_path(self) -> Path:
        """The file the app watches: always the kernel currently on screen."""
        return self.journal.kernel_path

    @property
    def client(self) -> ModelClient | None:
        return self.model.client

    @property
    def manual(self) -> bool:
        """No model: the person supplies every kernel."""
        return self.model.manual

    @property
    def model_name(self) -> str | None:
        return self.model.name

    @property
    def cost(self) -> float | None:
        """Money spent on model calls; None when any call's price was unknown."""
        return self.state.cost

    @property
    def busy(self) -> bool:
        return self._lock.locked()

    def attempt(self, version: int) -> Attempt | None:
        return self.state.attempt(version)

    def summary(self) -> dict[str, object]:
        """A JSON-able digest for listings, `--json` output and the app's header."""
        best = self.best
        return {
            "id": self.id,
            "path": str(self.path),
            "task": self.meta.task_name,
            "backend": self.backend,
            "model": self.model_name,
            "stage": self.stage,
            "done_reason": self.done_reason,
            "steps": dict(self.used),
            "kernels": len(self.history),
            "feasible": best is not None,
            "best": best.summary() if best else None,
            "best_speedup": best.speedup if best else None,
            "best_speed": speed_text(best, "x"),  # the figure as every surface shows it (noisy, cached marked)
            "pending": self.pending.version if self.pending else None,
            "tokens": self.tokens,
            "cost": self.cost,
            "elapsed_s": round(self.elapsed_s, 3),
            "created": self.meta.created,
        }

    # ---------------------------------------------------------------- plumbing

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        """One action at a time per session object: a second is refused (SessionBusy), never queued."""
        if not self._lock.acquire(blocking=False):
            raise SessionBusy(f"session {self.id} is busy with another step")
        try:
            yield
        finally:
            self._lock.release()


def ends_headless_run(events: list[Event]) -> bool:
    """A headless run stops when a person is needed or the model cannot be used (no key, bad config):
    retrying those would only spend the budget on the same error."""
    if not events:
        return True
    return any(e.kind == "needs_human" or (e.kind == "model_error" and e.data.get("reason") in FATAL_MODEL_ERRORS)
               for e in events)
