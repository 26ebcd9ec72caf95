"""Retrieval and learning: memories for a step, rewards and Q updates, trajectories and insights.

`Learner` is a collaborator a `Session` holds: everything it reads is given to it (the session's journal, its
model, its session.json record, the memory bank and the retrieval policy) and every change it makes is an
event it emits through the journal."""

from __future__ import annotations

import os
from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Any

from core.events import (
    Attempt,
    ErrorEvent,
    Insight,
    MemoryAdded,
    ModelErrorEvent,
    ModelReply,
    QUpdate,
    Retrieved,
    RetrievedItem,
)
from core.fsutil import one_line as _one_line
from core.llm import Completion, ModelError
from core.rewards import (
    StartPoint,
    choose_start_point,
    reward_for,
    select_memories,
    store_trajectory,
    z_normalised,
)
from core.session.journal import Journal
from core.session.models import SessionModel
from core.session.records import SessionMeta
from verifier.result import VerificationResult

if TYPE_CHECKING:
    from memory import MemoryStore, RetrievalPolicy, TaskSignature
    from memory import Retrieved as Hit

#: Set to 0 to keep failure lessons rule-based even with a model configured (saves one call per failure).
LESSONS_ENV = "EVOKERNEL_MODEL_LESSONS"


class Learner:
    """Retrieval and learning for the session recorded in `journal` (see the module docstring). `policy`
    None: the retrieval settings session.json records (`meta.retrieval`), built at the first retrieval."""

    def __init__(self, journal: Journal, model: SessionModel, meta: SessionMeta, memory: MemoryStore | None,
                 policy: RetrievalPolicy | None = None) -> None:
        self._journal = journal
        self._model = model
        self._meta = meta
        self.memory = memory
        self._policy = policy

    @property
    def signature(self) -> TaskSignature:
        """The task as the memory bank indexes it."""
        from memory.items import TaskSignature

        t = self._meta.task
        return TaskSignature(task=t["name"], category=t.get("category") or "", backend=self._meta.backend,
                             shapes=self._meta.shapes, text=t.get("description") or "")

    def retrieve(self, stage: str) -> tuple[list[Hit], StartPoint | None]:
        """Memories for this step and, in refine, the start point picked by Q2 among the session's feasible
        kernels (see `core.rewards.choose_start_point`). The `retrieved` event records them with the pool
        they were chosen from (ids, similarity, Q) and which slots exploration chose; the fold keeps the
        items on screen and the ids the step's reward credits (`SessionState.retrieved`, `credit_ids`)."""
        if self.memory is None:
            return [], None
        start = None
        try:
            selection = select_memories(self.policy, self.memory, self.signature, stage)
            hits = list(selection.hits)
            extra = selection.event() if hasattr(selection, "event") else {}
            if stage == "refine":
                start = choose_start_point(self.policy, self.memory, self._journal.state.history)
                if start is not None:
                    extra["start_point"] = start.to_dict()
        except Exception as exc:  # a broken memory bank must not stop the loop
            self._journal.emit(ErrorEvent(where="memory", message=f"retrieval failed: {_one_line(exc)}"))
            return [], None
        self._journal.emit(Retrieved(stage=stage, items=[RetrievedItem.from_hit(h) for h in hits], **extra))
        return hits, start

    @property
    def policy(self) -> RetrievalPolicy:
        if self._policy is None:
            from memory import RetrievalPolicy

            self._policy = RetrievalPolicy.from_settings(self._meta.retrieval)
        return self._policy

    def device_of(self, attempt: Attempt | None = None) -> dict[str, Any]:
        """Where `attempt` was measured (default: the latest verified kernel, else this machine), as data
        for the memory: {"backend", "kind", "name", "capability", "class"} (`core.device`)."""
        from core.device import device_record

        if attempt is None:
            attempt = next((a for a in reversed(self._journal.state.history) if a.result is not None), None)
        measured = attempt.result.device if attempt is not None and attempt.result is not None else ""
        return device_record(self._meta.backend, measured)

    def learn(self, stage: str, attempt: Attempt, result: VerificationResult, ids: list[str], best_ms: float | None,
               defer: bool = False) -> None:
        """Credit `ids` with the attempt's reward and store its trajectory. With `defer` (a refinement
        pending a person's verdict) the credit waits for accept/reject, so the attempt is credited once."""
        reward = reward_for(stage, result, best_ms, scheme=getattr(self.policy, "reward", "paper"))
        if stage == "refine" and getattr(self.policy, "refine_norm", False):
            reward = z_normalised(reward, self._journal.state.refine_rewards)
        value = float(reward.value or 0.0)  # reward_for and z_normalised always set it
        self._journal.emit(replace(reward, version=attempt.version, credited=[] if defer else list(ids),
                           deferred=list(ids) if defer else None))
        if self.memory is None:
            return
        device = self.device_of(attempt)
        try:
            if ids and not defer:
                changes = self.memory.credit(ids, stage=stage, reward=value, device=device["class"],
                                             rule=getattr(self.policy, "credit", "mc"))
                self._journal.emit(QUpdate(stage=stage, reward=value, changes=[_as_dict(c) for c in changes],
                                   device=device["class"], backend=self._meta.backend))
            if self.is_untouched_starter(attempt.source):
                return  # the starter copies its input by design: verifying it as it is teaches nothing
            lesson = "" if result.feasible else self._failure_lesson(stage, attempt, result)
            source: dict[str, object] = {"session": self._meta.id, "version": attempt.version, "model": self._model.name,
                      **({"lesson": "model"} if lesson else {})}
            item, how = store_trajectory(self.memory, self.signature, stage, attempt, result, source, lesson,
                                         device=device)
            self._journal.emit(MemoryAdded(id=item.id, kind=item.kind, title=item.title, version=attempt.version,
                                   merged=how == "merged"))
        except Exception as exc:  # memory trouble is reported; the kernel and its result are already safe
            self._journal.emit(ErrorEvent(where="memory", message=f"memory update failed: {_one_line(exc)}"))

    def is_untouched_starter(self, source: str) -> bool:
        from core.starter import starter_kernel

        t = self._meta.task
        try:
            return source.strip() == starter_kernel(t["name"], t.get("source", ""), self._meta.backend).strip()
        except Exception:  # a task the starter cannot be made for has no starter to compare with
            return False

    def _writes_lessons(self) -> bool:
        """Failed attempts get a model-written lesson when a real model (litellm) is configured, unless
        $EVOKERNEL_MODEL_LESSONS is 0; scripted models keep their replies for kernels."""
        from core.llm import LiteLLMClient

        if self._model.manual or os.environ.get(LESSONS_ENV, "1").strip() == "0":
            return False
        client: Any = self._model.client
        while hasattr(client, "inner"):  # a wrapper such as bench's BoundedClient: ask what it wraps
            client = client.inner
        return isinstance(client, LiteLLMClient)

    def _failure_lesson(self, stage: str, attempt: Attempt, result: VerificationResult) -> str:
        """The model's lesson from a failed attempt, or "" (the rule-based lesson is used then)."""
        if not self._writes_lessons():
            return ""

        def write(prompt: str) -> str:
            reply = self._complete(prompt)
            self._journal.emit(reply_payload(stage, "lesson", reply))
            return reply.text

        try:
            from memory.writing import model_lesson

            return model_lesson(self.signature, stage, result.outcome, result.feedback(), attempt.source, write)
        except ModelError as exc:
            self._journal.emit(ModelErrorEvent(stage=stage, purpose="lesson", reason=exc.reason, message=str(exc),
                                       model_call=True))
            return ""

    def credit(self, ids: list[str], stage: str, reward: float, attempt: Attempt | None = None) -> None:
        if self.memory is None or not ids:
            return
        device = self.device_of(attempt)["class"]
        try:
            changes = self.memory.credit(ids, stage=stage, reward=reward, device=device,
                                         rule=getattr(self.policy, "credit", "mc"))
        except Exception as exc:
            self._journal.emit(ErrorEvent(where="memory", message=f"memory update failed: {_one_line(exc)}"))
            return
        self._journal.emit(QUpdate(stage=stage, reward=reward, changes=[_as_dict(c) for c in changes], device=device,
                           backend=self._meta.backend))

    def distil_insight(self, before: Attempt, after: Attempt) -> None:
        """After an accepted improvement, ask the model for the lesson and store it as an insight."""
        if self.memory is None:
            return
        if self._model.manual or self._model.client is None:
            self._journal.emit(Insight(skipped="manual mode: no model to summarise the improvement"))
            return
        speedup = (before.latency_ms / after.latency_ms) if before.latency_ms and after.latency_ms else 1.0

        def summarise(prompt: str) -> str:
            reply = self._complete(prompt)
            self._journal.emit(reply_payload("refine", "insight", reply))
            return reply.text

        try:
            from memory.writing import insight_from_refinement

            item = insight_from_refinement(self.signature, before=before.source, after=after.source,
                                           speedup=speedup, summarise=summarise,
                                           source={"session": self._meta.id, "before": before.version,
                                                   "after": after.version, "model": self._model.name},
                                           device=self.device_of(after))
            item, how = self.memory.add_insight(item) if hasattr(self.memory, "add_insight") else (self.memory.add(item), "added")
            if how == "duplicate":
                self._journal.emit(Insight(skipped=f"repeats the stored insight {item.id}", id=item.id))
                return
        except ModelError as exc:
            self._journal.emit(ModelErrorEvent(stage="refine", purpose="insight", reason=exc.reason, message=str(exc),
                                       model_call=True))
            self._journal.emit(Insight(skipped=f"model error: {exc}"))
            return
        except Exception as exc:
            self._journal.emit(Insight(skipped=f"could not write the insight: {_one_line(exc)}"))
            return
        self._journal.emit(Insight(id=item.id, title=item.title, text=item.text, before=before.version, after=after.version,
                           speedup=speedup))

    def _complete(self, prompt: str) -> Completion:
        """One call of the session's model for a lesson or an insight (only made when it has one)."""
        client = self._model.client
        if client is None:
            raise ModelError("no model is configured", reason="no_model")
        return client.complete([{"role": "user", "content": prompt}])


def reply_payload(stage: str, purpose: str, reply: Completion) -> ModelReply:
    """The `model_reply` payload of one model call: its text and accounting (`Completion`)."""
    return ModelReply(stage=stage, purpose=purpose, model_call=True, **reply.to_dict())


def _as_dict(obj: Any) -> dict[str, Any]:
    return obj.to_dict() if hasattr(obj, "to_dict") else asdict(obj)


def _deferred_credit(a: Attempt) -> tuple[list[str], float]:
    """The ids and reward held back for a pending refinement (folded from its `reward` event), or
    ([], 0) when its reward was already credited (auto-accepted, or recorded before deferral)."""
    return (list(a.deferred), float(a.reward or 0.0)) if a.deferred else ([], 0.0)
