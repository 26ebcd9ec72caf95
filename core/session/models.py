"""What a session records about its model and verifier, how it rebuilds them, and the two as a session holds
them: `SessionModel` (the client, made on first use) and `SessionVerifier` (the verify function and settings)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, cast

from core.llm import ModelClient, ModelConfig, ScriptedModel, make_client
from core.session.records import SessionError, VerifyFn
from verifier.result import VerificationResult

if TYPE_CHECKING:
    from verifier import VerifyConfig


class SessionModel:
    """The model a session runs with: `override` when given (`False`: "the one it was created with", read
    from `recorded`, session.json's model record; None: no model, the person writes every kernel). The
    client is made at its first use; a scripted model resumes at reply `calls_so_far()` (the model calls
    the session has recorded), so a reopened session goes on where it stopped."""

    def __init__(self, override: ModelConfig | ModelClient | None | bool, recorded: dict[str, Any] | None,
                 session_id: str, calls_so_far: Callable[[], int]) -> None:
        self._override = override
        self._recorded = recorded
        self._session_id = session_id
        self._calls_so_far = calls_so_far
        self._client: ModelClient | None = None
        self._ready = False

    @property
    def client(self) -> ModelClient | None:
        if not self._ready:
            self._client = self._make()
            self._ready = True
        return self._client

    @property
    def manual(self) -> bool:
        """No model: the person supplies every kernel."""
        if self._override is not False:
            return self._override is None
        return self._recorded is None

    @property
    def name(self) -> str | None:
        m = self._override if self._override is not False else None
        if isinstance(m, ModelConfig):
            return m.model
        if m is not None:
            return getattr(m, "name", type(m).__name__)
        return self._recorded.get("name") if self._recorded else None

    def _make(self) -> ModelClient | None:
        if self._override is not False:
            return make_client(self._override)  # type: ignore[arg-type]  # not False: a model, a client or None
        meta = self._recorded
        if meta is None:
            return None
        if meta["kind"] == "scripted":
            return ScriptedModel(list(meta["replies"]), position=self._calls_so_far(), source=meta.get("source"),
                                 name=meta.get("name", "scripted"))
        if meta["kind"] == "litellm":
            return make_client(ModelConfig.from_dict(meta["config"]))
        raise SessionError(f"session {self._session_id} records an unknown model kind {meta['kind']!r}")


@dataclass
class SessionVerifier:
    """How a session verifies its kernels: `fn` (the real verifier, or a test's stand-in) with `config` (None:
    the verifier's defaults). Both may be replaced while the session is open (the app sets the task's
    settings once its checks have run)."""

    fn: VerifyFn
    config: VerifyConfig | None = None


def default_verify(reference_source: str, candidate_source: str, backend: str = "cpu", config: VerifyConfig | None = None,
                   on_gate: Callable[..., None] | None = None) -> VerificationResult:
    """The real verifier through core's one door (`core.verifying.verify_sources`; it imports torch on first use)."""
    from core.verifying import verify_sources

    return verify_sources(reference_source, candidate_source, backend=backend, config=config, on_gate=on_gate)


def _default_verify(*args: Any, **kwargs: Any) -> VerificationResult:
    """`default_verify` looked up in this module when called, so it can be replaced here (tests do:
    `monkeypatch.setattr(core.session.models, "default_verify", fake)`)."""
    return default_verify(*args, **kwargs)


def fresh_config(config: VerifyConfig | None) -> VerifyConfig:
    """The same verifier settings with the verdict cache off: a reverification must really run again."""
    from dataclasses import is_dataclass

    from verifier import VerifyConfig

    if config is None:
        return VerifyConfig(use_cache=False)
    return replace(config, use_cache=False) if is_dataclass(config) and hasattr(config, "use_cache") else config


def _model_meta(model: ModelConfig | ModelClient | None) -> dict[str, Any] | None:
    if model is None:
        return None
    if isinstance(model, ModelConfig):
        if model.model.startswith("scripted:"):
            client = cast(ScriptedModel, make_client(model))  # a scripted: model is a ScriptedModel
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


# The verifier settings a session keeps for its later verifications (`resume` has no verifier options):
# every `VerifyConfig` field but this machine's paths and sizes and the test-only switches below, each with
# the types its annotation allows (a recorded value of another type is not used: session.json is a file people
# and tools edit). Derived from the fields, so a new setting is saved unless it is named here.
NOT_SAVED_VERIFIER_SETTINGS = frozenset({
    "build_root", "max_processes", "warmup", "min_reps", "max_reps", "min_time_s", "use_cache", "warm_worker",
    "isolate", "static_scan", "hidden_paths", "min_rounds", "max_rounds", "noise_halfwidth", "round_target_ms",
    "timing_memory_mb", "magnitude_scales", "sandbox_tmp_mb", "job_dir_mb",
})


def _accepted_types(hint: Any) -> tuple[type, ...]:
    """The JSON value types a field annotated `hint` takes: `float` takes an int too, `list[str]` a list."""
    import types
    import typing

    parts = typing.get_args(hint) if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union \
        else (hint,)
    out: list[type] = []
    for part in parts:
        base = typing.get_origin(part) or part
        out.extend((int, float) if base is float else (base,))
    return tuple(dict.fromkeys(out))


def _saved_verifier_settings() -> dict[str, tuple[type, ...]]:
    import dataclasses
    import typing

    from verifier.config import VerifyConfig

    hints = typing.get_type_hints(VerifyConfig)
    return {f.name: _accepted_types(hints[f.name]) for f in dataclasses.fields(VerifyConfig)
            if f.name not in NOT_SAVED_VERIFIER_SETTINGS}


SAVED_VERIFIER_SETTINGS: dict[str, tuple[type, ...]] = _saved_verifier_settings()


def verifier_settings_meta(config: Any) -> dict[str, Any] | None:
    """The settings of `config` a session records (JSON values only), or None for the defaults."""
    if config is None:
        return None
    out: dict[str, Any] = {}
    for name in SAVED_VERIFIER_SETTINGS:
        if not hasattr(config, name):
            continue
        value = getattr(config, name)
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            continue
        out[name] = value
    return out


def config_from_meta(saved: Any) -> VerifyConfig | None:
    """A `VerifyConfig` with the recorded settings; unknown ones, and values of the wrong type, are left at
    their defaults. A session saved before the settings in `extra` became fields reads the same
    (`lift_legacy_extra`)."""
    if not isinstance(saved, dict) or not saved:
        return None
    from verifier import VerifyConfig
    from verifier.config import lift_legacy_extra

    saved = lift_legacy_extra(saved)

    ok: dict[str, Any] = {name: value for name, value in saved.items()
          if name in SAVED_VERIFIER_SETTINGS and isinstance(value, SAVED_VERIFIER_SETTINGS[name])
          and not (isinstance(value, bool) and bool not in SAVED_VERIFIER_SETTINGS[name])}
    return replace(VerifyConfig(), **ok)
