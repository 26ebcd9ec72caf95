"""The draft -> refine loop as a step machine, stored as a folder that survives a crash.

Every state change goes through `_emit`: the event is appended (fsynced) to `events.jsonl` first
and then folded into `self.state` by `core.events.apply`, the same pure fold the app's view and the
command line use. `Session.open` folds the same log, so a reopened session is exactly the session
that was running; a step that a crash cut short is finished by the next action (`_finish_interrupted`).

One process at a time writes a session: the folder's `.lock` (see `core.fsutil.FolderLock`).

A step never spawns threads or waits on anything but its own model call and verification; the
app runs `step()` in a worker and the headless commands call `run()`.
"""

from __future__ import annotations

import errno
import json
import platform
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from core.events import (
    Accepted,
    Attempt,
    Event,
    EventLog,
    PendingRefinement,
    SessionState,
    StepDone,
    StepResumed,
    apply,
    fold,
    read_events,
)
from core.extract import ExtractError, extract_kernel
from core.fsutil import FolderLock, LockHeld, atomic_write_text, os_error_text, release_lock
from core.fsutil import one_line as _one_line
from core.llm import ModelClient, ModelConfig, ModelError, ScriptedModel, make_client
from core.prompting import PromptContext, Tried, build_messages
from core.rewards import (
    best_in_frame,
    choose_start_point,
    credited_ids,
    is_improvement,
    reward_for,
    select_memories,
    store_trajectory,
)
from verifier.result import VerificationResult

FORMAT_VERSION = 1
#: A refinement the person rejected earns its memories what "no gain" earns: ln(1) = 0.
STAGES = ("draft", "refine", "done")

EventSink = Callable[[Event], None]
VerifyFn = Callable[..., VerificationResult]


class SessionBusy(Exception):
    """A step (or edit) is already running on this session."""


class SessionError(Exception):
    """A session folder or request that cannot be served; the message says what to do."""


@dataclass
class Budgets:
    """Limits of one session: model steps per stage, and optional wall time, token and cost caps."""

    draft_steps: int = 4
    refine_steps: int = 4
    wall_s: float | None = None
    max_tokens: int | None = None
    max_cost: float | None = None

    def __post_init__(self) -> None:
        if self.draft_steps < 0 or self.refine_steps < 0:
            raise SessionError("step budgets must be 0 or more")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Budgets:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


_META_FIELDS = ("format", "id", "created", "task", "backend", "model", "budgets", "shapes", "settings", "versions")


@dataclass
class SessionMeta:
    """`session.json`: what a session was created with. Read by attribute (`meta.task_name`); the
    dict-style reads (`meta["task"]["name"]`) of older callers still work."""

    id: str
    task: dict[str, Any]
    backend: str = "cpu"
    created: float = 0.0
    format: int = FORMAT_VERSION
    model: dict[str, Any] | None = None
    budgets: dict[str, Any] = field(default_factory=dict)
    shapes: str = ""
    settings: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict, repr=False)  # keys from newer versions, kept

    @property
    def task_name(self) -> str:
        return str(self.task.get("name", ""))

    @property
    def task_source(self) -> str:
        return str(self.task.get("source", ""))

    @property
    def auto_accept(self) -> bool:
        return bool(self.settings.get("auto_accept", False))

    @property
    def retrieval(self) -> dict[str, Any]:
        return dict(self.settings.get("retrieval") or {})

    def to_dict(self) -> dict[str, Any]:
        return {**self.extra, **{k: getattr(self, k) for k in _META_FIELDS}}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SessionMeta:
        if not isinstance(d, dict) or "id" not in d or not isinstance(d.get("task"), dict):
            raise SessionError("session.json lacks its id or task; the session folder is damaged")
        known = {k: d[k] for k in _META_FIELDS if k in d}
        return cls(**known, extra={k: v for k, v in d.items() if k not in _META_FIELDS})

    # dict-style access, for callers written against the JSON form
    def __getitem__(self, key: str) -> Any:
        if key in _META_FIELDS:
            return getattr(self, key)
        return self.extra[key]

    def __setitem__(self, key: str, value: Any) -> None:
        if key in _META_FIELDS:
            setattr(self, key, value)
        else:
            self.extra[key] = value

    def __contains__(self, key: object) -> bool:
        return key in _META_FIELDS or key in self.extra

    def get(self, key: str, default: Any = None) -> Any:
        try:
            value = self[key]
        except KeyError:
            return default
        return default if value is None and key not in _META_FIELDS else value


def default_verify(reference_source: str, candidate_source: str, backend: str = "cpu", config: Any = None,
                   on_gate: Callable[[str, str], None] | None = None) -> VerificationResult:
    """The real verifier, imported on first use (it pulls in torch)."""
    from verifier import verify

    return verify(reference_source, candidate_source, backend=backend, config=config, on_gate=on_gate)


class Session:
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
        self.verify_fn = verify_fn or default_verify
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
        # the memories on screen as `memory.Retrieved` objects (prompts and the app's table); not folded
        self.retrieved: list[Any] = []
        self.start_point: Any = None  # refine: the start point chosen by Q2 for this step
        self.credit_ids: list[str] = []  # the ids this step's reward credits (ranked slots + start point)

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
            session._emit("session_started", {
                "task": task_dict["name"], "backend": backend, "model": session.model_name,
                "budgets": budgets.to_dict(), "manual": session.manual,
            })
            if session.manual:
                session._start_manual()
        return session

    def _start_manual(self) -> None:
        """Manual mode: a starter kernel that builds, and the draft memories on screen from the start."""
        from core.starter import starter_kernel

        t = self.meta.task
        self._emit("starter", {"source": starter_kernel(t["name"], t.get("source", ""), self.backend)})
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
            self._emit("human_edit", {"version": attempt.version, "stage": stage, "credited": credited})
            result = self._verify(attempt)
            outcome = "verifier_error"
            if result is not None:
                outcome = result.outcome
                best_ms = best_in_frame(result, self.best)
                self._learn(stage, attempt, result, credited, best_ms)
                self._judge(stage, attempt, result, best_ms)
            self._emit("step_done", {"stage": stage, "counts": False, "outcome": outcome,
                                     "seconds": time.monotonic() - start, "feedback": self._feedback_for(result)})
            self._advance()
            return events

    def mark_used(self, item_id: str, used: bool = True, on_event: EventSink | None = None) -> list[Event]:
        """Mark a memory on screen as used (or not) by the person: only marked memories are credited
        for the person's next edit (none by default). Marks last until the next retrieval."""
        if item_id not in self.onscreen_ids:
            raise SessionError(f"memory {item_id} is not on screen; mark one of the memories shown")
        with self._exclusive(), self._collecting(on_event) as events:
            self._emit("memory_marked", {"id": item_id, "used": bool(used)})
            return events

    def accept_pending(self, on_event: EventSink | None = None) -> list[Event]:
        """Make the pending refinement the best kernel and distil an insight from it."""
        with self._exclusive(), self._collecting(on_event) as events:
            if self.pending is None:
                raise SessionError("there is no pending refinement to accept")
            from memory.values import person_reward

            before, after = self.best, self.pending
            self._emit("accepted", {"version": after.version, "by": "person", "reason": "accepted"})
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
            self._emit("rejected", {"version": rejected.version, "by": "person"})
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
                self._emit("stage_changed", {"from": self.stage, "to": stage, "reason": "set by person"})
            return events

    def add_steps(self, stage: str, n: int, on_event: EventSink | None = None) -> list[Event]:
        """Grant more model steps to a stage (and reopen it if the session had finished for lack of them)."""
        if stage not in ("draft", "refine") or n <= 0:
            raise SessionError("add_steps needs stage draft or refine and a positive count")
        with self._exclusive(), self._collecting(on_event) as events:
            self._emit("budget_changed", {"stage": stage, "add": n})
            if self.stage == "done":
                target = "refine" if self.best is not None else "draft"
                if target == stage:
                    self._emit("stage_changed", {"from": "done", "to": target, "reason": "more steps granted"})
            return events

    # ---------------------------------------------------------------- the step itself

    def _model_step(self, on_token: Callable[[str], None] | None) -> None:
        self.step_no += 1
        start = time.monotonic()
        stage = self.stage
        hits = self._retrieve(stage)
        if self.manual:
            from core.llm import manual_mode_message

            self._emit("needs_human", {"stage": stage, "message": manual_mode_message()})
            return
        messages = build_messages(stage, self._prompt_context(stage, hits))
        self._emit("prompt", {"stage": stage, "messages": messages})
        outcome, result = "model_error", None
        try:
            reply = self.client.complete(messages, on_token=on_token)
        except ModelError as exc:
            self._emit("model_error", {"stage": stage, "reason": exc.reason, "message": str(exc), "model_call": True})
            self._finish_step(stage, outcome, None, start)
            return
        self._emit("model_reply", {"stage": stage, "purpose": "kernel", "model_call": True, **reply.to_dict()})
        try:
            source = extract_kernel(reply.text)
        except ExtractError as exc:
            self._emit("model_error", {"stage": stage, "reason": "no_code", "message": str(exc)})
            self._finish_step(stage, "no_code", None, start, feedback=f"Your previous reply was not usable: {exc}.")
            return
        attempt = self._record_kernel(source, "model", stage)
        result = self._verify(attempt)
        if result is None:
            self._finish_step(stage, "verifier_error", None, start)
            return
        best_ms = best_in_frame(result, self.best)
        defer = stage == "refine" and not self.auto_accept and is_improvement(result, best_ms)
        self._learn(stage, attempt, result, list(self.credit_ids), best_ms, defer=defer)
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
                self._emit_payload(Accepted(version=attempt.version, by="person", reason="person's edit"))
                if before is not None:
                    self._distil_insight(before, attempt)
        elif stage == "draft" and result.feasible:
            self._emit_payload(Accepted(version=attempt.version, by="loop", reason="first feasible kernel"))
        elif stage == "refine" and is_improvement(result, best_ms):
            self._emit_payload(PendingRefinement(
                version=attempt.version, latency_ms=result.latency_ms, best_ms=best_ms,
                gain=(best_ms / result.latency_ms) if best_ms and result.latency_ms else None))
            if self.auto_accept:
                before = self.best
                self._emit_payload(Accepted(version=attempt.version, by="auto", reason="faster (headless)"))
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
        self._emit_payload(StepResumed(version=attempt.version, stage=stage, author=attempt.author,
                                       verified=attempt.result is not None, rewarded=attempt.rewarded))
        result = attempt.result if attempt.result is not None else self._verify(attempt)
        if result is None:
            self._emit_payload(StepDone(stage=stage, counts=counts, outcome="verifier_error",
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
        self._emit_payload(StepDone(stage=stage, counts=counts, outcome=result.outcome,
                                    seconds=time.monotonic() - start, feedback=result.feedback()))
        return True

    def _finish_step(self, stage: str, outcome: str, result: VerificationResult | None, start: float,
                     feedback: str | None = None) -> None:
        self._emit("step_done", {"stage": stage, "counts": True, "outcome": outcome,
                                 "seconds": time.monotonic() - start,
                                 "feedback": feedback if feedback is not None else self._feedback_for(result)})

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
            self._emit("stage_changed", {"from": self.stage, "to": "done", "reason": cap})
        elif self.stage == "draft" and self.best is not None:
            if self.used["refine"] < self.budgets.refine_steps:
                self._emit("stage_changed", {"from": "draft", "to": "refine", "reason": "feasible kernel found"})
            else:
                self._emit("stage_changed", {"from": "draft", "to": "done", "reason": "feasible kernel found; no refine steps"})
        elif self.stage == "draft" and self.used["draft"] >= self.budgets.draft_steps:
            self._emit("stage_changed", {"from": "draft", "to": "done", "reason": "draft budget spent without a feasible kernel"})
        elif self.stage == "refine" and self.used["refine"] >= self.budgets.refine_steps:
            self._emit("stage_changed", {"from": "refine", "to": "done", "reason": "refine budget spent"})

    def _cap_reached(self) -> str:
        b = self.budgets
        if b.wall_s is not None and self.elapsed_s >= b.wall_s:
            return f"wall-time budget of {b.wall_s:g} s spent"
        if b.max_tokens is not None and self.tokens >= b.max_tokens:
            return f"token budget of {b.max_tokens} spent"
        if b.max_cost is not None and self.cost_known >= b.max_cost:
            return f"cost budget of ${b.max_cost:g} spent"
        return ""

    def _retrieve(self, stage: str) -> list[Any]:
        """Memories for this step. The `retrieved` event records the pool they were chosen from
        (ids, similarity, Q), which slots exploration chose, and in refine the start point picked
        by Q2 among the session's feasible kernels (see `core.rewards.choose_start_point`)."""
        self.start_point = None
        if self.memory is None:
            return []
        try:
            selection = select_memories(self.policy, self.memory, self.signature, stage)
            hits = selection.hits
            extra = selection.event() if hasattr(selection, "event") else {}
            if stage == "refine":
                self.start_point = choose_start_point(self.policy, self.memory, self.history, self.log.path)
                if self.start_point is not None:
                    extra["start_point"] = self.start_point.to_dict()
        except Exception as exc:  # a broken memory bank must not stop the loop
            self._emit("error", {"where": "memory", "message": f"retrieval failed: {_one_line(exc)}"})
            return []
        self.retrieved = list(hits)
        self.credit_ids = credited_ids(hits, self.start_point)
        self._emit("retrieved", {"stage": stage, "items": [_hit_dict(h) for h in hits], **extra})
        return hits

    @property
    def policy(self) -> Any:
        if self._policy is None:
            from memory import RetrievalPolicy

            self._policy = RetrievalPolicy(**self.meta.retrieval)
        return self._policy

    def _prompt_context(self, stage: str, hits: list[Any]) -> PromptContext:
        t = self.meta.task
        last = next((a for a in reversed(self.history) if a.stage == stage), None)
        best = self.best
        ctx = PromptContext(
            task_name=t["name"], category=t.get("category") or "", level=t.get("level"),
            description=t.get("description") or "", reference=t["source"], backend=self.backend, memories=hits,
            feedback=self.feedback if last is not None or self.feedback else "",
            previous_source=last.source if last is not None and not last.feasible else "",
        )
        if stage == "refine" and best is not None:
            start = self.start_point.attempt(self.history) if getattr(self, "start_point", None) else None
            ctx.best_source = (start or best).source
            ctx.best_latency_ms = (start or best).latency_ms
            ctx.reference_ms = best.result.reference_ms if best.result else None
            ctx.profile = best.result.profile if best.result else []
            ctx.tried = [Tried(a.version, a.outcome, a.latency_ms, _failed_reason(a))
                         for a in self.history if a.stage == "refine" and a is not best]
            ctx.feedback = self.feedback if last is not None and not last.feasible else ""
        return ctx

    def _record_kernel(self, source: str, author: str, stage: str) -> Attempt:
        version = max((a.version for a in self.history), default=0) + 1
        rel = f"kernels/{version:04d}_{author}_{stage}.py"
        _atomic_write(self.path / rel, source)
        self._emit("kernel", {"version": version, "stage": stage, "author": author, "file": rel, "source": source})
        return self.history[-1]

    def _verify(self, attempt: Attempt, reverify: bool = False) -> VerificationResult | None:
        def on_gate(name: str, status: str) -> None:
            self._emit("gate", {"version": attempt.version, "name": name, "status": status})

        config = fresh_config(self.verify_config) if reverify else self.verify_config
        try:
            result = self.verify_fn(self.meta.task_source, attempt.source, backend=self.backend,
                                    config=config, on_gate=on_gate)
        except Exception as exc:  # the verifier is a seam to foreign code; report, don't crash the loop
            self._emit("error", {"where": "verifier", "version": attempt.version, "message": f"verifier crashed: {_one_line(exc)}"})
            return None
        self._emit("verification", {"version": attempt.version, "reverify": reverify, "result": result.to_dict(),
                                    "feedback": result.feedback()})
        return result

    def _learn(self, stage: str, attempt: Attempt, result: VerificationResult, ids: list[str], best_ms: float | None,
               defer: bool = False) -> None:
        """Credit `ids` with the attempt's reward and store its trajectory. With `defer` (a refinement
        pending a person's verdict) the credit waits for accept/reject, so the attempt is credited once."""
        reward = reward_for(stage, result, best_ms, scheme=getattr(self.policy, "reward", "paper"))
        self._emit("reward", {"version": attempt.version, "credited": [] if defer else ids, **reward.to_dict(),
                              **({"deferred": ids} if defer else {})})
        if self.memory is None:
            return
        try:
            if ids and not defer:
                changes = self.memory.credit(ids, stage=stage, reward=reward.value)
                self._emit("q_update", {"stage": stage, "reward": reward.value, "changes": [_as_dict(c) for c in changes]})
            item, how = store_trajectory(self.memory, self.signature, stage, attempt, result,
                                         {"session": self.id, "version": attempt.version, "model": self.model_name})
            self._emit("memory_added", {"id": item.id, "kind": item.kind, "title": item.title, "version": attempt.version,
                                        "merged": how == "merged"})
        except Exception as exc:  # memory trouble is reported; the kernel and its result are already safe
            self._emit("error", {"where": "memory", "message": f"memory update failed: {_one_line(exc)}"})

    def _credit(self, ids: list[str], stage: str, reward: float) -> None:
        if self.memory is None or not ids:
            return
        try:
            changes = self.memory.credit(ids, stage=stage, reward=reward)
        except Exception as exc:
            self._emit("error", {"where": "memory", "message": f"memory update failed: {_one_line(exc)}"})
            return
        self._emit("q_update", {"stage": stage, "reward": reward, "changes": [_as_dict(c) for c in changes]})

    def _distil_insight(self, before: Attempt, after: Attempt) -> None:
        """After an accepted improvement, ask the model for the lesson and store it as an insight."""
        if self.memory is None:
            return
        if self.manual or self.client is None:
            self._emit("insight", {"skipped": "manual mode: no model to summarise the improvement"})
            return
        speedup = (before.latency_ms / after.latency_ms) if before.latency_ms and after.latency_ms else 1.0

        def summarise(prompt: str) -> str:
            reply = self.client.complete([{"role": "user", "content": prompt}])
            self._emit("model_reply", {"stage": "refine", "purpose": "insight", "model_call": True, **reply.to_dict()})
            return reply.text

        try:
            from memory.writing import insight_from_refinement

            item = insight_from_refinement(self.signature, before=before.source, after=after.source,
                                           speedup=speedup, summarise=summarise,
                                           source={"session": self.id, "before": before.version,
                                                   "after": after.version, "model": self.model_name})
            item, how = self.memory.add_insight(item) if hasattr(self.memory, "add_insight") else (self.memory.add(item), "added")
            if how == "duplicate":
                self._emit("insight", {"skipped": f"repeats the stored insight {item.id}", "id": item.id})
                return
        except ModelError as exc:
            self._emit("model_error", {"stage": "refine", "purpose": "insight", "reason": exc.reason,
                                       "message": str(exc), "model_call": True})
            self._emit("insight", {"skipped": f"model error: {exc}"})
            return
        except Exception as exc:
            self._emit("insight", {"skipped": f"could not write the insight: {_one_line(exc)}"})
            return
        self._emit("insight", {"id": item.id, "title": item.title, "text": item.text,
                               "before": before.version, "after": after.version, "speedup": speedup})

    # ---------------------------------------------------------------- events

    def _emit(self, kind: str, data: dict[str, Any]) -> Event:
        """Record an event: append it (fsynced) to the log, fold it into `state` with `core.events.apply`,
        keep current_kernel.py equal to the kernel on screen, then tell the caller."""
        event = Event(kind, data, step=self.step_no)
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

    def _emit_payload(self, payload: Any) -> Event:
        return self._emit(payload.KIND, payload.to_data())

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


# -------------------------------------------------------------------- listing, replay

def load_meta(path: Path) -> SessionMeta:
    meta_path = Path(path) / "session.json"
    if not meta_path.exists():
        raise SessionError(f"{path} is not a session folder (no session.json)")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise SessionError(f"cannot read {meta_path}: {exc}") from None
    if not isinstance(meta, dict):
        raise SessionError(f"{meta_path} is not a session record; the session folder is damaged")
    if meta.get("format", 0) > FORMAT_VERSION:
        raise SessionError(f"{meta_path} was written by a newer evokernel (format {meta['format']}); upgrade to open it")
    return SessionMeta.from_dict(meta)


def check_not_open(path: Path) -> None:
    """SessionError naming the process that has the session at `path` open for writing, if another has.

    For callers that start something long before opening the session (the app); `Session.open` checks too.
    """
    lock = FolderLock(Path(path))
    try:
        lock.acquire()
    except LockHeld as exc:
        raise SessionError(f"session {Path(path).name} is open in {exc.holder}; close it there first "
                           f"(or wait for it to finish)") from None
    except OSError:
        return  # cannot lock here (read-only folder): opening it will say why
    lock.release()


def find_session(ref: str | Path, root: Path) -> Path:
    """A session folder from a path, an id under `root`, or a unique part of an id (prefix first)."""
    p = Path(ref)
    if (p / "session.json").exists():
        return p
    if (root / str(ref) / "session.json").exists():
        return root / str(ref)
    matches = [d for d in root.glob(f"{ref}*") if (d / "session.json").exists()] if root.is_dir() else []
    if not matches and root.is_dir():
        matches = [d for d in root.iterdir() if str(ref) in d.name and (d / "session.json").exists()]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise SessionError(f"'{ref}' matches {len(matches)} sessions under {root}; give more of the id")
    raise SessionError(f"no session '{ref}' (looked in {root}); see `evokernel sessions`")


def list_sessions(root: Path) -> list[dict[str, Any]]:
    """Summaries of every readable session under `root`, newest first; unreadable ones are marked."""
    rows: list[dict[str, Any]] = []
    if not Path(root).is_dir():
        return rows
    for d in sorted(Path(root).iterdir()):
        if not (d / "session.json").exists():
            continue
        try:
            rows.append(Session.open(d, lock=False).summary())
        except SessionError as exc:
            rows.append({"id": d.name, "path": str(d), "error": str(exc), "created": 0})
    rows.sort(key=lambda r: r.get("created") or 0, reverse=True)
    return rows


def replay(path: Path, on_event: EventSink | None = None, delay_s: float = 0.0) -> list[Event]:
    """Re-emit the recorded events in order (the app's replay mode); returns them."""
    load_meta(Path(path))
    try:
        events = read_events(Path(path) / "events.jsonl")
    except ValueError as exc:
        raise SessionError(str(exc)) from None
    for ev in events:
        if on_event is not None:
            on_event(ev)
        if delay_s:
            time.sleep(delay_s)
    return events


@dataclass
class ReverifyRow:
    """One recorded kernel verified again here, and whether the outcome moved."""

    version: int
    author: str
    recorded_outcome: str
    outcome: str
    recorded_ms: float | None
    latency_ms: float | None
    recorded_device: str = ""
    device: str = ""
    error: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def differs(self) -> bool:
        return bool(self.error) or self.recorded_outcome != self.outcome

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "differs": self.differs}


FATAL_MODEL_ERRORS = {"auth", "config", "exhausted"}


def ends_headless_run(events: list[Event]) -> bool:
    """A headless run stops when a person is needed or the model cannot be used (no key, bad config):
    retrying those would only spend the budget on the same error."""
    if not events:
        return True
    return any(e.kind == "needs_human" or (e.kind == "model_error" and e.data.get("reason") in FATAL_MODEL_ERRORS)
               for e in events)


def fresh_config(config: Any) -> Any:
    """The same verifier settings with the verdict cache off: a reverification must really run again."""
    from dataclasses import is_dataclass, replace

    from verifier import VerifyConfig

    if config is None:
        return VerifyConfig(use_cache=False)
    return replace(config, use_cache=False) if is_dataclass(config) and hasattr(config, "use_cache") else config


def reverify_all(path: Path, verify_fn: VerifyFn | None = None, verify_config: Any = None,
                 on_row: Callable[[ReverifyRow], None] | None = None) -> list[ReverifyRow]:
    """Run the verifier again on every recorded kernel (read-only: nothing is appended to the session)."""
    session = Session.open(path, lock=False)
    verify_fn = verify_fn or default_verify
    rows: list[ReverifyRow] = []
    for a in session.history:
        rec = a.result
        row = ReverifyRow(a.version, a.author, a.outcome, "", a.latency_ms, None, rec.device if rec else "")
        try:
            res = verify_fn(session.meta.task_source, a.source, backend=session.backend,
                            config=fresh_config(verify_config), on_gate=None)
            row.outcome, row.latency_ms, row.device = res.outcome, res.latency_ms, res.device
        except Exception as exc:
            row.outcome, row.error = "error", _one_line(exc)
        rows.append(row)
        if on_row is not None:
            on_row(row)
    return rows


# -------------------------------------------------------------------- helpers

def _model_meta(model: ModelConfig | ModelClient | None) -> dict[str, Any] | None:
    if model is None:
        return None
    if isinstance(model, ModelConfig):
        if model.model.startswith("scripted:"):
            client = make_client(model)
            return {"kind": "scripted", "name": client.name, "replies": client.replies, "source": client.source}
        return {"kind": "litellm", "name": model.model, "config": model.to_dict()}
    if isinstance(model, ScriptedModel):
        return {"kind": "scripted", "name": model.name, "replies": model.replies, "source": model.source}
    return {"kind": "custom", "name": getattr(model, "name", type(model).__name__)}


def _policy_meta(policy: Any) -> dict[str, Any]:
    if policy is None:
        return {}
    if hasattr(policy, "settings"):
        return policy.settings()
    return {k: getattr(policy, k) for k in ("mode", "k", "seed") if hasattr(policy, k)}


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version(), "platform": platform.platform()}
    for pkg in ("evokernel-tui", "torch", "litellm"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def _atomic_write(path: Path, text: str) -> None:
    try:
        atomic_write_text(path, text)
    except OSError as exc:
        raise SessionError(f"cannot write {path}: {os_error_text(exc)}") from None


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in name)[:40] or "task"


def _hit_dict(hit: Any) -> dict[str, Any]:
    item = hit.item
    return {"id": item.id, "kind": item.kind, "title": item.title, "text": item.text, "q1": item.q1, "q2": item.q2,
            "visits1": item.visits1, "visits2": item.visits2, "similarity": hit.similarity,
            "value": hit.value, "exploration": hit.exploration, "score": hit.score,
            "chosen_by": getattr(hit, "chosen_by", "value")}


def _as_dict(obj: Any) -> dict[str, Any]:
    return obj.to_dict() if hasattr(obj, "to_dict") else asdict(obj)


def _deferred_credit(a: Attempt) -> tuple[list[str], float]:
    """The ids and reward held back for a pending refinement (folded from its `reward` event), or
    ([], 0) when its reward was already credited (auto-accepted, or recorded before deferral)."""
    return (list(a.deferred), float(a.reward or 0.0)) if a.deferred else ([], 0.0)


def _failed_reason(a: Attempt) -> str:
    gate = a.result.failed_gate if a.result else None
    return gate.reason[:160] if gate else ""
