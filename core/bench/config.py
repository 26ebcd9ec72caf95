"""`BenchConfig`: every setting of a bench run besides its tasks (backend, steps, retrieval and the
memory ablations, executor, workers), validated once, and what `bench.json` records of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from core.bench.records import BenchError
from core.bench.selection import ORDERS

if TYPE_CHECKING:
    from memory import RetrievalPolicy
    from verifier import VerifyConfig

RETRIEVAL_MODES = ("value", "similarity", "random")
MEMORY_MODES = ("shared", "per-task", "none")


@dataclass
class BenchConfig:
    """Everything a bench run needs besides the tasks; `settings()` is what bench.json records."""

    backend: str = "cpu"
    draft_steps: int = 4
    refine_steps: int = 4
    retrieval: str = "value"
    seed: int = 0
    workers: int = 1
    executor: str = "inprocess"
    suite: str = "builtin"
    memory: str | None = None
    verify_config: VerifyConfig | None = None  # the one place a run's verifier settings are set
    wall_s: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # ablations of the memory (None: the RetrievalPolicy default)
    epsilon: float | None = None
    pool_size: int | None = None
    k: int | None = None
    memory_mode: str = "shared"
    order: str = "curriculum"
    budget: int | None = None  # T: model steps per task shared by draft and refine
    refine_norm: bool = False  # z-normalised refine rewards (`RetrievalPolicy.refine_norm`)

    def __post_init__(self) -> None:
        if self.retrieval not in RETRIEVAL_MODES:
            raise BenchError(f"unknown retrieval {self.retrieval!r}; choose value, similarity or random")
        if self.workers < 1:
            raise BenchError("--workers must be 1 or more")
        if self.memory_mode not in MEMORY_MODES:
            raise BenchError(f"unknown memory mode {self.memory_mode!r}; choose shared, per-task or none")
        if self.order not in ORDERS:
            raise BenchError(f"unknown order {self.order!r}; choose curriculum or mixed")
        if self.epsilon is not None and not 0.0 <= self.epsilon <= 1.0:
            raise BenchError(f"--epsilon must be within 0..1, got {self.epsilon}")
        if (self.k is not None and self.k < 1) or (self.pool_size is not None and self.pool_size < 1):
            raise BenchError("--k and --pool-size must be 1 or more")
        if self.k is not None and self.pool_size is not None and self.pool_size < self.k:
            raise BenchError(f"--pool-size ({self.pool_size}) must be at least --k ({self.k})")
        if self.budget is not None and self.budget < 1:
            raise BenchError("--budget must be 1 or more")

    def policy(self, index: int) -> RetrievalPolicy:
        """The retrieval policy of the task at `index` (its own seed, the ablation settings)."""
        from memory import RetrievalPolicy

        kw: dict[str, Any] = {k: v for k, v in (("epsilon", self.epsilon), ("pool_size", self.pool_size),
                                                ("k", self.k)) if v is not None}
        if self.refine_norm:
            kw["refine_norm"] = True
        try:
            return RetrievalPolicy(mode=self.retrieval, seed=self.seed + index, **kw)
        except ValueError as exc:
            raise BenchError(str(exc)) from None

    def settings(self, model: str | None, mode: str = "run") -> dict[str, object]:
        """bench.json's record of the run; the verifier's settings read from `verify_config` (the one
        place they are set), `extra` for what only the command line knows (the GPUs)."""
        judged = {} if self.verify_config is None else {"compare_compile": self.verify_config.compare_compile,
                                                        "tolerance": self.verify_config.tolerance}
        return {
            "mode": mode, "suite": self.suite, "backend": self.backend, "model": model,
            "draft_steps": self.draft_steps, "refine_steps": self.refine_steps, "retrieval": self.retrieval,
            "seed": self.seed, "workers": self.workers, "executor": self.executor, "memory": self.memory,
            "wall_s": self.wall_s, "epsilon": self.epsilon, "pool_size": self.pool_size, "k": self.k,
            "memory_mode": self.memory_mode, "order": self.order, "budget": self.budget,
            "refine_norm": self.refine_norm,
            "policy": self.verify_config.policy if self.verify_config is not None else "kernelbench",
            "allow": list(self.verify_config.allow or []) if self.verify_config is not None else [],
            **judged, **self.extra,
        }
