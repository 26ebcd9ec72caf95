"""Retrieval and learning: memories for a step, rewards and Q updates, trajectories and insights.

`Learning` is a mixin of `Session`; its methods emit events through `Session._emit`."""

from __future__ import annotations

import os
from dataclasses import asdict
from typing import Any

from core.events import Attempt
from core.fsutil import one_line as _one_line
from core.llm import ModelError
from core.rewards import (
    choose_start_point,
    credited_ids,
    earlier_refine_rewards,
    reward_for,
    select_memories,
    store_trajectory,
    z_normalised,
)
from verifier.result import VerificationResult

#: Set to 0 to keep failure lessons rule-based even with a model configured (saves one call per failure).
LESSONS_ENV = "EVOKERNEL_MODEL_LESSONS"


class Learning:
    """Retrieval and learning of a `Session` (see the module docstring)."""

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

    def _learn(self, stage: str, attempt: Attempt, result: VerificationResult, ids: list[str], best_ms: float | None,
               defer: bool = False) -> None:
        """Credit `ids` with the attempt's reward and store its trajectory. With `defer` (a refinement
        pending a person's verdict) the credit waits for accept/reject, so the attempt is credited once."""
        reward = reward_for(stage, result, best_ms, scheme=getattr(self.policy, "reward", "paper"))
        if stage == "refine" and getattr(self.policy, "refine_norm", False):
            reward = z_normalised(reward, earlier_refine_rewards(self.log.path))
        self._emit("reward", {"version": attempt.version, "credited": [] if defer else ids, **reward.to_dict(),
                              **({"deferred": ids} if defer else {})})
        if self.memory is None:
            return
        try:
            if ids and not defer:
                changes = self.memory.credit(ids, stage=stage, reward=reward.value)
                self._emit("q_update", {"stage": stage, "reward": reward.value, "changes": [_as_dict(c) for c in changes]})
            if self._is_untouched_starter(attempt.source):
                return  # the starter copies its input by design: verifying it as it is teaches nothing
            lesson = "" if result.feasible else self._failure_lesson(stage, attempt, result)
            source = {"session": self.id, "version": attempt.version, "model": self.model_name,
                      **({"lesson": "model"} if lesson else {})}
            item, how = store_trajectory(self.memory, self.signature, stage, attempt, result, source, lesson)
            self._emit("memory_added", {"id": item.id, "kind": item.kind, "title": item.title, "version": attempt.version,
                                        "merged": how == "merged"})
        except Exception as exc:  # memory trouble is reported; the kernel and its result are already safe
            self._emit("error", {"where": "memory", "message": f"memory update failed: {_one_line(exc)}"})

    def _is_untouched_starter(self, source: str) -> bool:
        from core.starter import starter_kernel

        t = self.meta.task
        try:
            return source.strip() == starter_kernel(t["name"], t.get("source", ""), self.backend).strip()
        except Exception:  # a task the starter cannot be made for has no starter to compare with
            return False

    def _writes_lessons(self) -> bool:
        """Failed attempts get a model-written lesson when a real model (litellm) is configured, unless
        $EVOKERNEL_MODEL_LESSONS is 0; scripted models keep their replies for kernels."""
        from core.llm import LiteLLMClient

        if self.manual or os.environ.get(LESSONS_ENV, "1").strip() == "0":
            return False
        client = self.client
        while hasattr(client, "inner"):  # a wrapper such as bench's BoundedClient: ask what it wraps
            client = client.inner
        return isinstance(client, LiteLLMClient)

    def _failure_lesson(self, stage: str, attempt: Attempt, result: VerificationResult) -> str:
        """The model's lesson from a failed attempt, or "" (the rule-based lesson is used then)."""
        if not self._writes_lessons():
            return ""

        def write(prompt: str) -> str:
            reply = self.client.complete([{"role": "user", "content": prompt}])
            self._emit("model_reply", {"stage": stage, "purpose": "lesson", "model_call": True, **reply.to_dict()})
            return reply.text

        try:
            from memory.writing import model_lesson

            return model_lesson(self.signature, stage, result.outcome, result.feedback(), attempt.source, write)
        except ModelError as exc:
            self._emit("model_error", {"stage": stage, "purpose": "lesson", "reason": exc.reason,
                                       "message": str(exc), "model_call": True})
            return ""

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
