"""The step machine: `Session` (create/open, actions, the step, events), one writer per folder."""

from __future__ import annotations

import errno
import json
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.events import (
    PAYLOADS,
    Accepted,
    Attempt,
    BudgetChanged,
    ErrorEvent,
    Event,
    EventLog,
    GateEvent,
    HumanEdit,
    Kernel,
    MemoryMarked,
    ModelErrorEvent,
    NeedsHuman,
    Payload,
    PendingRefinement,
    Prompt,
    Rejected,
    SessionStarted,
    SessionState,
    StageChanged,
    Starter,
    StepDone,
    StepResumed,
    Verification,
    apply,
    fold,
    read_events,
    speed_text,
)
from core.extract import ExtractError, extract_kernel
from core.fsutil import FolderLock, LockHeld, os_error_text, release_lock
from core.fsutil import one_line as _one_line
from core.llm import ModelClient, ModelConfig, ModelError, ScriptedModel, make_client
from core.prompting import PromptContext, Tried, build_messages
from core.rewards import StartPoint, best_in_frame, is_improvement
from core.session.folder import _atomic_write, _slug, _versions, load_meta
from core.session.learning import Learning, _deferred_credit, reply_payload
from core.session.models import _default_verify, _model_meta, _policy_meta, fresh_config
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
from core.verifying import tolerance_text
from verifier.result import VerificationResult

if TYPE_CHECKING:
    from memory import Retrieved as Hit


class Session(Learning):
    """A task being drafted and refined; see the module docstring and docs/ARCHITECTURE.md."""

    def __init__(self, path: Path, meta: SessionMeta | dict[str, Any], *,
                 model: ModelConfig | ModelClient | None | bool = False,
                 memory: Any = None, verify_fn: VerifyFn | None = None, verify_config: Any = None,
                 policy: Any = None, auto_accept: bool | None = None):
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
    def create(cls, task: Any, backend: str = "cpu", model: ModelConfig | ModelClient | None = None,
               memory: Any = None, budgets: Budgets | None = None, root: Path | str = Path("sessions"), *,
               verify_fn: VerifyFn | None = None, verify_config: Any = None, policy: Any = None,
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
                           settings={"auto_accept": auto_accept, "retrieval": _policy_meta(policy)},
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
    def open(cls, path: Path | str, *, model: ModelConfig | ModelClient | None | bool = False, memory: Any = None,
             verify_fn: VerifyFn | None = None, verify_config: Any = None, policy: Any = None,
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


    # ---------------------------------------------------------------- public state (read from `state`)

    stage = property(lambda self: self.state.stage, doc="draft, refine or done")
    done_reason = property(lambda self: self.state.done_reason)
    used = property(lambda self: dict(self.state.used), doc="model steps spent per stage")
    history = property(lambda self: self.state.history, doc="every kernel version, oldest first")
    best = property(lambda self: self.state.best, doc="the accepted kernel")
    pending = property(lambda self: self.state.pending, doc="a faster refinement awaiting accept/reject")
    current_source = property(lambda self: self.state.current_source, doc="the kernel on screen")
    feedback = property(lambda self: self.state.feedback, doc="the last step's feedback for the next prompt")
    tokens = property(lambda self: self.state.tokens)
    cost_known = property(lambda self: self.state.cost_known)
    cost_unknown = property(lambda self: self.state.cost_unknown)
    model_calls = property(lambda self: self.state.model_calls)
    elapsed_s = property(lambda self: self.state.elapsed_s)
    onscreen_ids = property(lambda self: list(self.state.onscreen_ids), doc="ids of the memories on screen")
    retrieved = property(lambda self: list(self.state.retrieved),
                         doc="the memories on screen as the last retrieval recorded them (`RetrievedItem`s)")
    credit_ids = property(lambda self: list(self.state.credit_ids),
                          doc="the ids a model step's reward credits (ranked slots and the start point)")

    @property
    def step_no(self) -> int:
        return self.state.step

    @step_no.setter
    def step_no(self, value: int) -> None:
        self.state = replace(self.state, step=value)

    @property
    def budgets(self) -> Budgets:
        """The budgets the session was created (or opened) with, plus the steps granted since."""
        b, added = self._base_budgets, self.state.budget_added
        return replace(b, draft_steps=b.draft_steps + added.get("draft", 0),
                       refine_steps=b.refine_steps + added.get("refine", 0))

    @property
    def interrupted(self) -> Attempt | None:
        """The kernel of a step that a crash cut short (recorded, never finished); the next action finishes it."""
        return self.state.attempt(self.state.in_flight)

    @property
    def task(self) -> Any:
        from core.tasks import Task

        return Task.from_dict(self.meta.task)

    @property
    def kernel_path(self) -> Path:
        """The file the app watches: always the kernel currently on screen."""
        return self.path / "current_kernel.py"

    @property
    def client(self) -> ModelClient | None:
        if not self._client_ready:
            self._client = self._make_client()
            self._client_ready = True
        return self._client

    @property
    def manual(self) -> bool:
        """No model: the person supplies every kernel."""
        if self._model_override is not False:
            return self._model_override is None
        return self.meta.model is None

    @property
    def model_name(self) -> str | None:
        m = self._model_override if self._model_override is not False else None
        if isinstance(m, ModelConfig):
            return m.model
        if m is not None:
            return getattr(m, "name", type(m).__name__)
        meta = self.meta.model
        return meta.get("name") if meta else None

    @property
    def cost(self) -> float | None:
        """Money spent on model calls; None when any call's price was unknown."""
        return self.state.cost

    @property
    def busy(self) -> bool:
        return self._lock.locked()

    @property
    def signature(self) -> Any:
        from memory.items import TaskSignature

        t = self.meta.task
        return TaskSignature(task=t["name"], category=t.get("category") or "", backend=self.backend,
                             shapes=self.meta.shapes, text=t.get("description") or "")

    def attempt(self, version: int) -> Attempt | None:
        return self.state.attempt(version)

    def summary(self) -> dict[str, Any]:
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
        """Verify a person's kernel, record it with author "person" and credit the memories on screen."""
        if not source.strip():
            raise SessionError("the edited kernel is empty")
        with self._exclusive(), self._collecting(on_event) as events:
            self._finish_interrupted()
            self.step_no += 1
            start = time.monotonic()
            stage = self._work_stage()
            credited = [i for i in self.onscreen_ids if self.state.marked.get(i)]  # marked used since retrieval
            attempt = self._record_kernel(source, "person", stage)
            self._emit(HumanEdit(version=attempt.version, stage=stage, credited=credited))
            result = self._verify(attempt)
            outcome = "verifier_error"
            if result is not None:
                outcome = result.outcome
                best_ms = best_in_frame(result, self.best)
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
            self._credit(ids, "refine", person_reward("accepted", value))
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
            self._credit(ids, "refine", person_reward("rejected", value))
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

    # ---------------------------------------------------------------- the step itself

    def _model_step(self, on_token: Callable[[str], None] | None) -> None:
        self.step_no += 1
        start = time.monotonic()
        stage = self.stage
        hits, start_point = self._retrieve(stage)
        if self.manual:
            from core.llm import manual_mode_message

            self._emit(NeedsHuman(stage=stage, message=manual_mode_message()))
            return
        messages = build_messages(stage, self._prompt_context(stage, hits, start_point))
        self._emit(Prompt(stage=stage, messages=messages))
        outcome, result = "model_error", None
        try:
            reply = self.client.complete(messages, on_token=on_token)
        except ModelError as exc:
            self._emit(ModelErrorEvent(stage=stage, reason=exc.reason, message=str(exc), model_call=True))
            self._finish_step(stage, outcome, None, start)
            return
        self._emit(reply_payload(stage, "kernel", reply))
        try:
            source = extract_kernel(reply.text)
        except ExtractError as exc:
            self._emit(ModelErrorEvent(stage=stage, reason="no_code", message=str(exc)))
            self._finish_step(stage, "no_code", None, start, feedback=f"Your previous reply was not usable: {exc}.")
            return
        attempt = self._record_kernel(source, "model", stage)
        result = self._verify(attempt)
        if result is None:
            self._finish_step(stage, "verifier_error", None, start)
            return
        best_ms = best_in_frame(result, self.best)
        defer = stage == "refine" and not self.auto_accept and is_improvement(result, best_ms)
        self._learn(stage, attempt, result, list(self.state.credit_ids), best_ms, defer=defer)
        self._judge(stage, attempt, result, best_ms)
        self._finish_step(stage, result.outcome, result, start)

    def _judge(self, stage: str, attempt: Attempt, result: VerificationResult, best_ms: float | None) -> None:
        """What a verified kernel becomes. State changes (by `core.events.apply`):
        `accepted` makes it the best and puts it on screen (and in current_kernel.py);
        `pending_refinement` makes it the pending one, awaiting the person (or auto-accept)."""
        attempt = self.attempt(attempt.version) or attempt  # attempts are immutable: take the verified one
        if attempt.author == "person":
            if is_improvement(result, best_ms) and (stage == "draft" and self.best is None or stage == "refine"):
                before = self.best
                self._emit(Accepted(version=attempt.version, by="person", reason="person's edit"))
                if before is not None:
                    self._distil_insight(before, attempt)
        elif stage == "draft" and result.feasible:
            self._emit(Accepted(version=attempt.version, by="loop", reason="first feasible kernel"))
        elif stage == "refine" and is_improvement(result, best_ms):
            self._emit(PendingRefinement(
                version=attempt.version, latency_ms=result.latency_ms, best_ms=best_ms,
                gain=(best_ms / result.latency_ms) if best_ms and result.latency_ms else None))
            if self.auto_accept:
                before = self.best
                self._emit(Accepted(version=attempt.version, by="auto", reason="faster (headless)"))
                if before is not None:
                    self._distil_insight(before, attempt)

    def _finish_interrupted(self) -> bool:
        """Finish the step a crash cut short: verify its kernel, credit its memories, judge it, close it.

        Returns whether there was one. Whatever the log shows as done (verification, reward, a
        decision) is not done twice.
        """
        attempt = self.interrupted
        if attempt is None:
            return False
        start = time.monotonic()
        stage, counts = attempt.stage, attempt.author != "person"
        self._emit(StepResumed(version=attempt.version, stage=stage, author=attempt.author,
                                       verified=attempt.result is not None, rewarded=attempt.rewarded))
        result = attempt.result if attempt.result is not None else self._verify(attempt)
        if result is None:
            self._emit(StepDone(stage=stage, counts=counts, outcome="verifier_error",
                                        seconds=time.monotonic() - start, feedback=self.feedback))
            return True
        best = self.best if self.state.best_version != attempt.version else None
        best_ms = best_in_frame(result, best)
        if not self.attempt(attempt.version).rewarded:
            defer = (stage == "refine" and attempt.author != "person" and not self.auto_accept
                     and is_improvement(result, best_ms))
            self._learn(stage, attempt, result, list(attempt.context), best_ms, defer=defer)
        if attempt.version not in (self.state.best_version, self.state.pending_version):
            self._judge(stage, attempt, result, best_ms)
        self._emit(StepDone(stage=stage, counts=counts, outcome=result.outcome,
                                    seconds=time.monotonic() - start, feedback=result.feedback()))
        return True

    def _finish_step(self, stage: str, outcome: str, result: VerificationResult | None, start: float,
                     feedback: str | None = None) -> None:
        self._emit(StepDone(stage=stage, counts=True, outcome=outcome, seconds=time.monotonic() - start,
                            feedback=feedback if feedback is not None else self._feedback_for(result)))

    def _feedback_for(self, result: VerificationResult | None) -> str:
        return result.feedback() if result is not None else self.feedback

    def _work_stage(self) -> str:
        if self.stage in ("draft", "refine"):
            return self.stage
        return "refine" if self.best is not None else "draft"

    def _advance(self) -> None:
        """Stage transitions that follow from the state: feasible -> refine, budgets spent -> done."""
        if self.stage == "done":
            return
        cap = self._cap_reached()
        if cap:
            self._emit(StageChanged(from_=self.stage, to="done", reason=cap))
        elif self.stage == "draft" and self.best is not None:
            if self.used["refine"] < self.budgets.refine_steps:
                self._emit(StageChanged(from_="draft", to="refine", reason="feasible kernel found"))
            else:
                self._emit(StageChanged(from_="draft", to="done", reason="feasible kernel found; no refine steps"))
        elif self.stage == "draft" and self.used["draft"] >= self.budgets.draft_steps:
            self._emit(StageChanged(from_="draft", to="done", reason="draft budget spent without a feasible kernel"))
        elif self.stage == "refine" and self.used["refine"] >= self.budgets.refine_steps:
            self._emit(StageChanged(from_="refine", to="done", reason="refine budget spent"))

    def _cap_reached(self) -> str:
        b = self.budgets
        if b.wall_s is not None and self.elapsed_s >= b.wall_s:
            return f"wall-time budget of {b.wall_s:g} s spent"
        if b.max_tokens is not None and self.tokens >= b.max_tokens:
            return f"token budget of {b.max_tokens} spent"
        if b.max_cost is not None and self.cost_known >= b.max_cost:
            return f"cost budget of ${b.max_cost:g} spent"
        return ""



    def _prompt_context(self, stage: str, hits: list[Hit], start_point: StartPoint | None = None) -> PromptContext:
        t = self.meta.task
        last = next((a for a in reversed(self.history) if a.stage == stage), None)
        best = self.best
        ctx = PromptContext(
            task_name=t["name"], category=t.get("category") or "", level=t.get("level"),
            description=t.get("description") or "", reference=t["source"], backend=self.backend, memories=hits,
            feedback=self.feedback if last is not None or self.feedback else "",
            previous_source=last.source if last is not None and not last.feasible else "",
            tolerance=tolerance_text(self.verify_config),
            policy=getattr(self.verify_config, "policy", None) or "kernelbench",
        )
        if stage == "refine" and best is not None:
            # The kernel to refine is the start point Q2 chose (else the best): its source, latency,
            # speedup and profile all come from that kernel's own result, never from another's.
            start = start_point.attempt(self.history) if start_point is not None else None
            shown = start if start is not None and start.result is not None else best
            ctx.best_source = shown.source
            ctx.best_latency_ms = shown.latency_ms
            ctx.reference_ms = shown.result.reference_ms if shown.result else None
            ctx.profile = shown.result.profile if shown.result else []
            ctx.refine_version = shown.version
            ctx.session_best_version = best.version
            ctx.session_best_ms = best.latency_ms
            ctx.session_best_reference_ms = best.result.reference_ms if best.result else None
            ctx.tried = [Tried(a.version, a.outcome, a.latency_ms, _failed_reason(a))
                         for a in self.history if a.stage == "refine" and a is not shown]
            ctx.feedback = self.feedback if last is not None and not last.feasible else ""
        return ctx

    def _record_kernel(self, source: str, author: str, stage: str) -> Attempt:
        version = max((a.version for a in self.history), default=0) + 1
        rel = f"kernels/{version:04d}_{author}_{stage}.py"
        _atomic_write(self.path / rel, source)
        self._emit(Kernel(version=version, stage=stage, author=author, file=rel, source=source))
        return self.history[-1]

    def _verify(self, attempt: Attempt, reverify: bool = False) -> VerificationResult | None:
        def on_gate(name: str, status: str) -> None:
            self._emit(GateEvent(version=attempt.version, name=name, status=status))

        config = fresh_config(self.verify_config) if reverify else self.verify_config
        try:
            result = self.verify_fn(self.meta.task_source, attempt.source, backend=self.backend,
                                    config=config, on_gate=on_gate)
        except Exception as exc:  # the verifier is a seam to foreign code; report, don't crash the loop
            self._emit(ErrorEvent(where="verifier", version=attempt.version,
                                  message=f"verifier crashed: {_one_line(exc)}"))
            return None
        self._emit(Verification(version=attempt.version, reverify=reverify, result=result.to_dict(),
                                feedback=result.feedback()))
        return result




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


def _failed_reason(a: Attempt) -> str:
    gate = a.result.failed_gate if a.result else None
    return gate.reason[:160] if gate else ""
