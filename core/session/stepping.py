"""The step itself: a model step, judging a verified kernel, finishing a step a crash cut short, stage
transitions, the prompt's context, recording and verifying a kernel.

`Stepping` is a mixin of `Session`; every state change goes through `Session._emit` as a typed payload.
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
from core.session.learning import reply_payload
from core.session.models import fresh_config
from core.verifying import tolerance_text, with_job_dir
from verifier.result import VerificationResult

if TYPE_CHECKING:
    from memory import Retrieved as Hit


class Stepping:
    """The step machine's inner steps (see the module docstring)."""

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
        if attempt.author in ("person", "seed"):
            if is_improvement(result, best_ms) and (stage == "draft" and self.best is None or stage == "refine"):
                before = self.best
                self._emit(Accepted(version=attempt.version, by="person",
                                    reason="the starter" if attempt.author == "seed" else "person's edit"))
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
        stage, counts = attempt.stage, attempt.author == "model"  # a person's edit or the starter is no model step
        self._emit(StepResumed(version=attempt.version, stage=stage, author=attempt.author,
                                       verified=attempt.result is not None, rewarded=attempt.rewarded))
        result = attempt.result if attempt.result is not None else self._verify(attempt)
        if result is None:
            self._emit(StepDone(stage=stage, counts=counts, outcome="verifier_error",
                                        seconds=time.monotonic() - start, feedback=self.feedback))
            return True
        best = self.best if self.state.best_version != attempt.version else None
        best_ms = best_in_frame(result, best)
        if not self.attempt(attempt.version).rewarded and attempt.author != "seed":  # the starter earns nothing
            defer = (stage == "refine" and attempt.author == "model" and not self.auto_accept
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
            device_class=self._device_of()["class"],
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
        def on_gate(name: str, status: str, progress: object = None) -> None:
            """Gate states are recorded; a running gate's progress (trial 3/8, timing round 4) is only told."""
            if progress is not None:
                self._tell(GateProgress.of(attempt.version, progress))
            else:
                self._emit(GateEvent(version=attempt.version, name=name, status=status))

        config = fresh_config(self.verify_config) if reverify else self.verify_config
        if hasattr(config, "job_dir_mb"):  # the job directory sized from the task's estimate (a copy)
            config = with_job_dir(config, self.meta.task_source)
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


def _failed_reason(a: Attempt) -> str:
    gate = a.result.failed_gate if a.result else None
    return gate.reason[:160] if gate else ""
