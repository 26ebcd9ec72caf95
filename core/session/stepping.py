"""The step itself: a model step, judging a verified kernel, finishing a step a crash cut short, stage
transitions, the prompt's context, recording and verifying a kernel.

`Stepper` is a collaborator a `Session` holds: it is given the session's journal (the folded state it reads
and the one place it writes, as typed payloads), its `Learner`, its model, its verifier, its session.json
record and its budgets. The session's actions call it; it never calls them back.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from core.events import (
    Accepted,
    Attempt,
    ErrorEvent,
    GateEvent,
    GateProgress,
    Kernel,
    ModelErrorEvent,
    NeedsHuman,
    PendingRefinement,
    Prompt,
    SessionState,
    StageChanged,
    StepDone,
    StepResumed,
    Verification,
)
from core.extract import ExtractError, extract_kernel
from core.fsutil import one_line as _one_line
from core.llm import ModelError
from core.prompting import PromptContext, Tried, build_messages
from core.rewards import StartPoint, best_in_frame, is_improvement
from core.session.folder import _atomic_write
from core.session.journal import Journal
from core.session.learning import Learner, reply_payload
from core.session.models import SessionModel, SessionVerifier, fresh_config
from core.session.records import Budgets, SessionMeta
from core.verifying import tolerance_text, with_job_dir
from verifier.result import VerificationResult

if TYPE_CHECKING:
    from memory import Retrieved as Hit


class Stepper:
    """The step machine's inner steps (see the module docstring). `auto_accept`: a faster refinement is
    accepted at once (headless runs) instead of waiting, pending, for the person."""

    def __init__(self, journal: Journal, learner: Learner, model: SessionModel, verifier: SessionVerifier,
                 meta: SessionMeta, budgets: Budgets, auto_accept: bool) -> None:
        self._journal = journal
        self._learner = learner
        self._model = model
        self._verifier = verifier
        self._meta = meta
        self._base_budgets = budgets
        self.auto_accept = auto_accept

    @property
    def _state(self) -> SessionState:
        return self._journal.state

    @property
    def budgets(self) -> Budgets:
        """The budgets the session was created (or opened) with, plus the steps granted since."""
        return self._base_budgets.plus(self._journal.state.budget_added)

    # ---------------------------------------------------------------- the step itself

    def model_step(self, on_token: Callable[[str], None] | None) -> None:
        self._journal.next_step()
        start = time.monotonic()
        stage = self._journal.state.stage
        hits, start_point = self._learner.retrieve(stage)
        if self._model.manual:
            from core.llm import manual_mode_message

            self._journal.emit(NeedsHuman(stage=stage, message=manual_mode_message()))
            return
        messages = build_messages(stage, self._prompt_context(stage, hits, start_point))
        self._journal.emit(Prompt(stage=stage, messages=messages))
        outcome, result = "model_error", None
        try:
            client = self._model.client
            if client is None:  # not manual, so a model was configured: its client could not be made
                raise ModelError("no model client", reason="config")
            reply = client.complete(messages, on_token=on_token)
        except ModelError as exc:
            self._journal.emit(ModelErrorEvent(stage=stage, reason=exc.reason, message=str(exc), model_call=True))
            self.finish_step(stage, outcome, None, start)
            return
        self._journal.emit(reply_payload(stage, "kernel", reply))
        try:
            source = extract_kernel(reply.text)
        except ExtractError as exc:
            self._journal.emit(ModelErrorEvent(stage=stage, reason="no_code", message=str(exc)))
            self.finish_step(stage, "no_code", None, start, feedback=f"Your previous reply was not usable: {exc}.")
            return
        attempt = self.record_kernel(source, "model", stage)
        result = self.verify(attempt)
        if result is None:
            self.finish_step(stage, "verifier_error", None, start)
            return
        best_ms = best_in_frame(result, self._state.best)
        defer = stage == "refine" and not self.auto_accept and is_improvement(result, best_ms)
        self._learner.learn(stage, attempt, result, list(self._state.credit_ids), best_ms, defer=defer)
        self.judge(stage, attempt, result, best_ms)
        self.finish_step(stage, result.outcome, result, start)

    def judge(self, stage: str, attempt: Attempt, result: VerificationResult, best_ms: float | None) -> None:
        """What a verified kernel becomes. State changes (by `core.events.apply`):
        `accepted` makes it the best and puts it on screen (and in current_kernel.py);
        `pending_refinement` makes it the pending one, awaiting the person (or auto-accept)."""
        attempt = self._state.attempt(attempt.version) or attempt  # attempts are immutable: take the verified one
        if attempt.author in ("person", "seed"):
            if is_improvement(result, best_ms) and (stage == "draft" and self._state.best is None or stage == "refine"):
                before = self._state.best
                self._journal.emit(Accepted(version=attempt.version, by="person",
                                    reason="the starter" if attempt.author == "seed" else "person's edit"))
                if before is not None:
                    self._learner.distil_insight(before, attempt)
        elif stage == "draft" and result.feasible:
            self._journal.emit(Accepted(version=attempt.version, by="loop", reason="first feasible kernel"))
        elif stage == "refine" and is_improvement(result, best_ms):
            self._journal.emit(PendingRefinement(
                version=attempt.version, latency_ms=result.latency_ms, best_ms=best_ms,
                gain=(best_ms / result.latency_ms) if best_ms and result.latency_ms else None))
            if self.auto_accept:
                before = self._state.best
                self._journal.emit(Accepted(version=attempt.version, by="auto", reason="faster (headless)"))
                if before is not None:
                    self._learner.distil_insight(before, attempt)

    def finish_interrupted(self) -> bool:
        """Finish the step a crash cut short: verify its kernel, credit its memories, judge it, close it.

        Returns whether there was one. Whatever the log shows as done (verification, reward, a
        decision) is not done twice.
        """
        attempt = self._state.attempt(self._state.in_flight)
        if attempt is None:
            return False
        start = time.monotonic()
        stage, counts = attempt.stage, attempt.author == "model"  # a person's edit or the starter is no model step
        self._journal.emit(StepResumed(version=attempt.version, stage=stage, author=attempt.author,
                                       verified=attempt.result is not None, rewarded=attempt.rewarded))
        result = attempt.result if attempt.result is not None else self.verify(attempt)
        if result is None:
            self._journal.emit(StepDone(stage=stage, counts=counts, outcome="verifier_error",
                                        seconds=time.monotonic() - start, feedback=self._state.feedback))
            return True
        best = self._state.best if self._state.best_version != attempt.version else None
        best_ms = best_in_frame(result, best)
        if not (self._state.attempt(attempt.version) or attempt).rewarded and attempt.author != "seed":  # the starter earns nothing
            defer = (stage == "refine" and attempt.author == "model" and not self.auto_accept
                     and is_improvement(result, best_ms))
            self._learner.learn(stage, attempt, result, list(attempt.context), best_ms, defer=defer)
        if attempt.version not in (self._state.best_version, self._state.pending_version):
            self.judge(stage, attempt, result, best_ms)
        self._journal.emit(StepDone(stage=stage, counts=counts, outcome=result.outcome,
                                    seconds=time.monotonic() - start, feedback=result.feedback()))
        return True

    def finish_step(self, stage: str, outcome: str, result: VerificationResult | None, start: float,
                     feedback: str | None = None) -> None:
        self._journal.emit(StepDone(stage=stage, counts=True, outcome=outcome, seconds=time.monotonic() - start,
                            feedback=feedback if feedback is not None else self.feedback_for(result)))

    def feedback_for(self, result: VerificationResult | None) -> str:
        return result.feedback() if result is not None else self._state.feedback

    def work_stage(self) -> str:
        if self._state.stage in ("draft", "refine"):
            return self._state.stage
        return "refine" if self._state.best is not None else "draft"

    def advance(self) -> None:
        """Stage transitions that follow from the state: feasible -> refine, budgets spent -> done."""
        if self._state.stage == "done":
            return
        cap = self._cap_reached()
        if cap:
            self._journal.emit(StageChanged(from_=self._state.stage, to="done", reason=cap))
        elif self._state.stage == "draft" and self._state.best is not None:
            if self._state.used["refine"] < self.budgets.refine_steps:
                self._journal.emit(StageChanged(from_="draft", to="refine", reason="feasible kernel found"))
            else:
                self._journal.emit(StageChanged(from_="draft", to="done", reason="feasible kernel found; no refine steps"))
        elif self._state.stage == "draft" and self._state.used["draft"] >= self.budgets.draft_steps:
            self._journal.emit(StageChanged(from_="draft", to="done", reason="draft budget spent without a feasible kernel"))
        elif self._state.stage == "refine" and self._state.used["refine"] >= self.budgets.refine_steps:
            self._journal.emit(StageChanged(from_="refine", to="done", reason="refine budget spent"))

    def _cap_reached(self) -> str:
        b = self.budgets
        if b.wall_s is not None and self._state.elapsed_s >= b.wall_s:
            return f"wall-time budget of {b.wall_s:g} s spent"
        if b.max_tokens is not None and self._state.tokens >= b.max_tokens:
            return f"token budget of {b.max_tokens} spent"
        if b.max_cost is not None and self._state.cost_known >= b.max_cost:
            return f"cost budget of ${b.max_cost:g} spent"
        return ""



    def _prompt_context(self, stage: str, hits: list[Hit], start_point: StartPoint | None = None) -> PromptContext:
        t = self._meta.task
        last = next((a for a in reversed(self._state.history) if a.stage == stage), None)
        best = self._state.best
        ctx = PromptContext(
            task_name=t["name"], category=t.get("category") or "", level=t.get("level"),
            description=t.get("description") or "", reference=t["source"], backend=self._meta.backend, memories=hits,
            feedback=self._state.feedback if last is not None or self._state.feedback else "",
            previous_source=last.source if last is not None and not last.feasible else "",
            tolerance=tolerance_text(self._verifier.config),
            policy=getattr(self._verifier.config, "policy", None) or "kernelbench",
            device_class=self._learner.device_of()["class"],
        )
        if stage == "refine" and best is not None:
            # The kernel to refine is the start point Q2 chose (else the best): its source, latency,
            # speedup and profile all come from that kernel's own result, never from another's.
            start = start_point.attempt(self._state.history) if start_point is not None else None
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
                         for a in self._state.history if a.stage == "refine" and a is not shown]
            ctx.feedback = self._state.feedback if last is not None and not last.feasible else ""
        return ctx

    def record_kernel(self, source: str, author: str, stage: str) -> Attempt:
        version = max((a.version for a in self._state.history), default=0) + 1
        rel = f"kernels/{version:04d}_{author}_{stage}.py"
        _atomic_write(self._journal.path / rel, source)
        self._journal.emit(Kernel(version=version, stage=stage, author=author, file=rel, source=source))
        return self._journal.state.history[-1]

    def verify(self, attempt: Attempt, reverify: bool = False) -> VerificationResult | None:
        def on_gate(name: str, status: str, progress: object = None) -> None:
            """Gate states are recorded; a running gate's progress (trial 3/8, timing round 4) is only told."""
            if progress is not None:
                self._journal.tell(GateProgress.of(attempt.version, progress))
            else:
                self._journal.emit(GateEvent(version=attempt.version, name=name, status=status))

        config = fresh_config(self._verifier.config) if reverify else self._verifier.config
        if hasattr(config, "job_dir_mb"):  # the job directory sized from the task's estimate (a copy)
            config = with_job_dir(config, self._meta.task_source)
        try:
            result = self._verifier.fn(self._meta.task_source, attempt.source, backend=self._meta.backend,
                                    config=config, on_gate=on_gate)
        except Exception as exc:  # the verifier is a seam to foreign code; report, don't crash the loop
            self._journal.emit(ErrorEvent(where="verifier", version=attempt.version,
                                  message=f"verifier crashed: {_one_line(exc)}"))
            return None
        self._journal.emit(Verification(version=attempt.version, reverify=reverify, result=result.to_dict(),
                                feedback=result.feedback()))
        return result


def _failed_reason(a: Attempt) -> str:
    gate = a.result.failed_gate if a.result else None
    return gate.reason[:160] if gate else ""
