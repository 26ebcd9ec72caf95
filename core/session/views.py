"""The public state of a `Session`: read-only views of the folded events (`core.events.SessionState`).

`StateViews` is a mixin of `Session`: every attribute here reads `self.state` (what `core.events.apply`
folded) or `self.meta` (session.json); none is stored beside the fold.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from core.events import Attempt, speed_text
from core.llm import ModelClient, ModelConfig
from core.session.records import Budgets

if TYPE_CHECKING:
    from core.tasks import Task
    from memory import TaskSignature

if TYPE_CHECKING:
    pass


class StateViews:
    """Read-only views of a session's folded state (see the module docstring)."""

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
    def task(self) -> Task:
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
    def signature(self) -> TaskSignature:
        from memory.items import TaskSignature

        t = self.meta.task
        return TaskSignature(task=t["name"], category=t.get("category") or "", backend=self.backend,
                             shapes=self.meta.shapes, text=t.get("description") or "")

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
