"""What a session records about its model and verifier, and how it rebuilds them."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from core.llm import ModelClient, ModelConfig, ScriptedModel, make_client
from verifier.result import VerificationResult

if TYPE_CHECKING:
    from verifier import VerifyConfig


def default_verify(reference_source: str, candidate_source: str, backend: str = "cpu", config: VerifyConfig | None = None,
                   on_gate: Callable[..., None] | None = None) -> VerificationResult:
    """The real verifier, imported on first use (it pulls in torch)."""
    from verifier import verify

    return verify(reference_source, candidate_source, backend=backend, config=config, on_gate=on_gate)


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


# The verifier settings a session keeps for its later verifications (`resume` has no verifier options):
# what a person chooses on the command line, not this machine's paths or the test-only switches; each with
# the types a recorded value must have to be used (session.json is a file people and tools edit).
_NUMBER = (int, float)
SAVED_VERIFIER_SETTINGS: dict[str, tuple[type, ...]] = {
    "trials": (int,), "atol": (*_NUMBER, type(None)), "rtol": (*_NUMBER, type(None)), "seed": (int,),
    "memory_gb": _NUMBER, "threads": (int, type(None)), "run_timeout_s": _NUMBER, "build_timeout_s": _NUMBER,
    "timing_budget_s": _NUMBER, "input_distributions": (list,), "policy": (str,), "allow": (list,),
    "gpu_memory_fraction": (*_NUMBER, type(None)), "time_kernels": (bool,), "compare_compile": (bool,),
    "ncu": (bool,), "magnitude_probe": (bool,), "shape_probe": (bool,), "extra": (dict,),
}


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
    their defaults."""
    if not isinstance(saved, dict) or not saved:
        return None
    from verifier import VerifyConfig

    ok = {name: value for name, value in saved.items()
          if name in SAVED_VERIFIER_SETTINGS and isinstance(value, SAVED_VERIFIER_SETTINGS[name])
          and not (isinstance(value, bool) and bool not in SAVED_VERIFIER_SETTINGS[name])}
    return replace(VerifyConfig(), **ok)
