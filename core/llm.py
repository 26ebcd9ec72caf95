"""Model calls: which model to use, a litellm client with our own retries, and a scripted stand-in.

litellm is imported on first call only (it is slow to import) and always with the local cost map,
so nothing here touches the network until a completion is requested.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from core.config import (  # noqa: F401  (SCRIPTED_PREFIX, API_KEY_ENV: imported from here by callers)
    _PROVIDER_KEYS,
    API_BASE_ENV,
    API_KEY_ENV,
    MODEL_ENV,
    SCRIPTED_PREFIX,
    ConfigError,
    how_to_configure,
    load_config,
)
from core.fsutil import first_line

Messages = list[dict[str, str]]
TokenSink = Callable[[str], None]


class ModelError(Exception):
    """A model call that failed for good; the message is one line a person can act on."""

    def __init__(self, message: str, reason: str = "error"):
        super().__init__(message)
        self.reason = reason


@dataclass
class ModelConfig:
    """Which model to call and how; JSON-able (never holds an API key)."""

    model: str
    api_base: str | None = None
    timeout_s: float = 120.0
    retries: int = 3
    temperature: float = 0.2
    max_tokens: int = 4096
    backoff_s: float = 1.0

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ModelConfig:
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        return cls(**known)


@dataclass
class Completion:
    """One finished model reply with its accounting; `cost` None means the price is unknown."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None
    model: str = ""
    seconds: float = 0.0
    tokens_estimated: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class ModelClient(Protocol):
    """Anything that turns chat messages into a `Completion`, streaming text to `on_token`."""

    name: str

    def complete(self, messages: Messages, on_token: TokenSink | None = None) -> Completion: ...


def resolve_model(cli_model: str | None = None, cli_api_base: str | None = None) -> ModelConfig | None:
    """The model to use: flag > $EVOKERNEL_MODEL > config.toml `model`; None means manual mode."""
    try:
        cfg: dict[str, Any] = load_config()  # load_config checks the known keys' types
    except ConfigError:
        cfg = {}
    model = cli_model or os.environ.get(MODEL_ENV) or cfg.get("model")
    if not model:
        return None
    api_base = cli_api_base or os.environ.get(API_BASE_ENV) or cfg.get("api_base")
    extra = {k: cfg[k] for k in ("timeout_s", "retries", "temperature", "max_tokens") if k in cfg}
    return ModelConfig(model=str(model), api_base=api_base or None, **extra)


def make_client(model: ModelConfig | ModelClient | None) -> ModelClient | None:
    """A client for a config (`scripted:FILE.json` gives a ScriptedModel); clients pass through."""
    if model is None or not isinstance(model, ModelConfig):
        return model
    if model.model.startswith(SCRIPTED_PREFIX):
        return ScriptedModel.from_file(model.model[len(SCRIPTED_PREFIX):])
    return LiteLLMClient(model)


@dataclass
class ScriptedModel:
    """Replays canned replies in order (tests, demos, `--model scripted:FILE.json`).

    Each reply is a string, or `{"error": "message"}` to simulate a failed call.
    """

    replies: list[Any]
    position: int = 0
    source: str | None = None
    chunk_chars: int = 24
    name: str = field(default="scripted")

    @classmethod
    def from_file(cls, path: str | Path) -> ScriptedModel:
        p = Path(path).expanduser()
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ModelError(f"cannot read scripted replies from {p}: {exc}", reason="config") from None
        if isinstance(data, dict):
            data = data.get("replies")
        if not isinstance(data, list):
            raise ModelError(f"{p} must hold a JSON list of replies (strings)", reason="config")
        return cls(replies=data, source=str(p.resolve()), name=f"{SCRIPTED_PREFIX}{p.name}")

    def complete(self, messages: Messages, on_token: TokenSink | None = None) -> Completion:
        start = time.monotonic()
        if self.position >= len(self.replies):
            raise ModelError(f"the scripted model has no replies left (it had {len(self.replies)})", "exhausted")
        reply = self.replies[self.position]
        self.position += 1
        if isinstance(reply, dict):
            raise ModelError(str(reply.get("error", "scripted error")), reason="scripted")
        text = str(reply)
        if on_token is not None:
            for i in range(0, len(text), self.chunk_chars):
                on_token(text[i : i + self.chunk_chars])
        prompt_chars = sum(len(m.get("content", "")) for m in messages)
        return Completion(
            text=text,
            prompt_tokens=prompt_chars // 4,
            completion_tokens=len(text) // 4,
            cost=0.0,
            model=self.name,
            seconds=time.monotonic() - start,
            tokens_estimated=True,
        )




def _litellm():
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_LOG", "ERROR")
    import litellm

    litellm.suppress_debug_info = True
    litellm.telemetry = False
    return litellm


def key_hint(model: str) -> str:
    """The env var a person should set for this model's provider."""
    provider = model.split("/", 1)[0] if "/" in model else "openai"
    if provider not in _PROVIDER_KEYS and model.startswith("claude"):
        provider = "anthropic"
    var = _PROVIDER_KEYS.get(provider, f"{provider.upper()}_API_KEY")
    return f"set {var} (or pass --api-base for a local OpenAI-compatible server)"


class LiteLLMClient:
    """Streaming litellm completions with a timeout and our own retry loop (backoff on 429/5xx/timeouts)."""

    def __init__(self, config: ModelConfig, sleep: Callable[[float], None] = time.sleep):
        self.config = config
        self.name = config.model
        self._sleep = sleep

    def complete(self, messages: Messages, on_token: TokenSink | None = None) -> Completion:
        litellm = _litellm()
        retryable = (
            litellm.RateLimitError,
            litellm.InternalServerError,
            litellm.ServiceUnavailableError,
            litellm.BadGatewayError,
            litellm.APIConnectionError,
            litellm.Timeout,
        )
        attempts = max(1, self.config.retries + 1)
        for attempt in range(attempts):
            try:
                return self._once(litellm, messages, on_token)
            except ModelError:
                raise
            except litellm.AuthenticationError:
                raise ModelError(f"{self.config.model}: authentication failed; {key_hint(self.config.model)}", "auth") from None
            except retryable as exc:
                if attempt + 1 >= attempts:
                    raise ModelError(self._describe(litellm, exc, attempts), _reason(litellm, exc)) from None
                self._sleep(self._delay(attempt))
            except Exception as exc:  # litellm raises many types; anything else is final
                raise ModelError(f"{self.config.model}: {first_line(exc, 300)}", "error") from None
        raise AssertionError("unreachable")

    def _delay(self, attempt: int) -> float:
        return self.config.backoff_s * (2**attempt) * (1 + 0.1 * random.random())

    def _kwargs(self) -> dict[str, Any]:
        c = self.config
        kw: dict[str, Any] = {
            "model": c.model,
            "timeout": c.timeout_s,
            "num_retries": 0,
            "temperature": c.temperature,
            "max_tokens": c.max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if c.api_base:
            kw["api_base"] = c.api_base
            kw["api_key"] = os.environ.get(API_KEY_ENV) or os.environ.get("OPENAI_API_KEY") or "none"
        elif os.environ.get(API_KEY_ENV):
            kw["api_key"] = os.environ[API_KEY_ENV]
        return kw

    def _once(self, litellm, messages: Messages, on_token: TokenSink | None, **extra: Any) -> Completion:
        start = time.monotonic()
        self._check_key(litellm)
        stream = litellm.completion(messages=messages, **self._kwargs(), **extra)
        parts: list[str] = []
        usage = None
        for chunk in stream:
            if getattr(chunk, "usage", None):
                usage = chunk.usage
            choices = getattr(chunk, "choices", None) or []
            delta = getattr(choices[0].delta, "content", None) if choices else None
            if delta:
                parts.append(delta)
                if on_token is not None:
                    on_token(delta)
        text = "".join(parts)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        estimated = False
        if not prompt_tokens and not completion_tokens:
            prompt_tokens, completion_tokens = _estimate_tokens(litellm, self.config.model, messages, text)
            estimated = True
        return Completion(
            text=text,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost=self._cost(litellm, prompt_tokens, completion_tokens),
            model=self.config.model,
            seconds=time.monotonic() - start,
            tokens_estimated=estimated,
        )

    def _check_key(self, litellm) -> None:
        if self.config.api_base or os.environ.get(API_KEY_ENV):
            return
        try:
            env = litellm.validate_environment(model=self.config.model)
        except Exception:
            return
        if env.get("missing_keys"):
            missing = " or ".join(env["missing_keys"])
            raise ModelError(f"{self.config.model}: no API key; set {missing} (or pass --api-base for a local server)", "auth")

    def _cost(self, litellm, prompt_tokens: int, completion_tokens: int) -> float | None:
        """Price from litellm's local cost map; None for unmapped models and custom endpoints."""
        if self.config.api_base:
            return None
        try:
            info = litellm.get_model_info(self.config.model)
        except Exception:
            return None
        inp, out = info.get("input_cost_per_token"), info.get("output_cost_per_token")
        if inp is None or out is None:
            return None
        return prompt_tokens * float(inp) + completion_tokens * float(out)

    def _describe(self, litellm, exc: Exception, attempts: int) -> str:
        m = self.config.model
        if isinstance(exc, litellm.RateLimitError):
            return f"{m}: rate limited after {attempts} attempts; wait a minute or lower the request rate"
        if isinstance(exc, litellm.Timeout):
            return f"{m}: no reply within {self.config.timeout_s:g} s after {attempts} attempts"
        if _is_connection_error(litellm, exc):
            where = self.config.api_base or "the provider"
            return f"{m}: cannot reach {where} after {attempts} attempts ({first_line(exc, 300)})"
        return f"{m}: server error after {attempts} attempts ({first_line(exc, 300)})"

    def summarise(self, prompt: str) -> str:
        return self.complete([{"role": "user", "content": prompt}]).text


def _is_connection_error(litellm, exc: Exception) -> bool:
    """litellm reports a refused connection as an InternalServerError saying "Connection error"."""
    if isinstance(exc, litellm.Timeout):
        return False
    if isinstance(exc, litellm.APIConnectionError) and not isinstance(exc, litellm.InternalServerError):
        return True
    return "connection error" in str(exc).lower()


def _reason(litellm, exc: Exception) -> str:
    if isinstance(exc, litellm.RateLimitError):
        return "rate_limit"
    if isinstance(exc, litellm.Timeout):
        return "timeout"
    if _is_connection_error(litellm, exc):
        return "connection"
    if isinstance(exc, litellm.InternalServerError | litellm.ServiceUnavailableError | litellm.BadGatewayError):
        return "server_error"
    return "connection"


def _estimate_tokens(litellm, model: str, messages: Messages, text: str) -> tuple[int, int]:
    try:
        return int(litellm.token_counter(model=model, messages=messages)), int(litellm.token_counter(model=model, text=text))
    except Exception:
        return sum(len(m.get("content", "")) for m in messages) // 4, len(text) // 4


def manual_mode_message() -> str:
    """The one line every command and the app shows when no model is configured."""
    return f"No model configured (manual mode: you supply every kernel). To use a model, {how_to_configure()}."
