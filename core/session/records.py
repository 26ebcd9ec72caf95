"""Records of a session: errors, budgets, `session.json` as SessionMeta, reverify rows."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from core.events import Event
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

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    def plus(self, added: Mapping[str, int]) -> Budgets:
        """These budgets with the model steps granted since (`budget_changed` events, folded per stage)."""
        return replace(self, draft_steps=self.draft_steps + added.get("draft", 0),
                       refine_steps=self.refine_steps + added.get("refine", 0))

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
    def retrieval(self) -> dict[str, object]:
        return dict(self.settings.get("retrieval") or {})

    def to_dict(self) -> dict[str, object]:
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

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "differs": self.differs}


FATAL_MODEL_ERRORS = {"auth", "config", "exhausted"}
