"""User settings: the TOML config file under the user's config dir, overridable by env vars.

`load_settings()` is the one place that reads both and checks them; every command and the app call
it (through the command line's error policy) before doing any work, so a broken config file is one
line that names the file and the fix, never a traceback and never a silent "no model configured".
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CONFIG_ENV = "EVOKERNEL_CONFIG"
SESSIONS_ENV = "EVOKERNEL_SESSIONS"
MODEL_ENV = "EVOKERNEL_MODEL"
API_BASE_ENV = "EVOKERNEL_API_BASE"
MEMORY_ENV = "EVOKERNEL_MEMORY"
API_KEY_ENV = "EVOKERNEL_API_KEY"
SCRIPTED_PREFIX = "scripted:"  # --model scripted:FILE.json: canned replies, no model called

# the key each litellm provider reads, checked before a session starts (`api_key_problem`)
_PROVIDER_KEYS = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "groq": "GROQ_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "together_ai": "TOGETHERAI_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
}

# config.toml keys and the type each must have (numbers may be written as ints)
KNOWN_KEYS: dict[str, tuple[type, ...]] = {
    "model": (str,),
    "api_base": (str,),
    "sessions_dir": (str,),
    "memory": (str,),
    "timeout_s": (int, float),
    "retries": (int,),
    "temperature": (int, float),
    "max_tokens": (int,),
    "policy": (str,),
}


class ConfigError(Exception):
    """The config file exists but cannot be used; the message says which file, why, and what to do."""


def config_path() -> Path:
    """`$EVOKERNEL_CONFIG`, else `<user config dir>/evokernel/config.toml`."""
    env = os.environ.get(CONFIG_ENV)
    if env:
        return Path(env).expanduser()
    from platformdirs import user_config_dir

    return Path(user_config_dir("evokernel")) / "config.toml"


def _fix_hint() -> str:
    return f"fix it, or set {CONFIG_ENV} to another file"


def load_config(path: Path | None = None) -> dict[str, object]:
    """The config file as a dict; {} when there is none. Raises `ConfigError` (one line) when it is
    unreadable, not TOML, or holds a known key of the wrong type."""
    path = path or config_path()
    if not path.exists():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML ({exc}); {_fix_hint()}") from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ConfigError(f"cannot read config file {path} ({reason}); {_fix_hint()}") from None
    for key, types in KNOWN_KEYS.items():
        value = data.get(key)
        if value is not None and (not isinstance(value, types) or isinstance(value, bool)):
            want = " or ".join("a number" if t in (int, float) else "a string" for t in types[:1])
            raise ConfigError(f"config file {path}: `{key}` must be {want}, not {value!r}; {_fix_hint()}")
    from verifier.policy.rules import PRESETS

    if data.get("policy") is not None and data["policy"] not in PRESETS:
        raise ConfigError(f"config file {path}: `policy` must be {' or '.join(PRESETS)}, not {data['policy']!r}; "
                          f"{_fix_hint()}")
    return data


@dataclass(frozen=True)
class Settings:
    """What the environment and config.toml say, env vars first; flags override these in the commands."""

    path: Path
    model: str | None = None
    api_base: str | None = None
    sessions_dir: Path | None = None
    memory: Path | None = None
    policy: str | None = None
    file: dict[str, Any] = field(default_factory=dict)


def load_settings(path: Path | None = None) -> Settings:
    """`EVOKERNEL_*` variables over the config file, checked; raises `ConfigError` with one line."""
    path = path or config_path()
    data = load_config(path)

    def pick(env: str, key: str) -> str | None:
        value = os.environ.get(env) or data.get(key)
        return str(value) if value else None

    sessions = pick(SESSIONS_ENV, "sessions_dir")
    memory = pick(MEMORY_ENV, "memory")
    return Settings(
        path=path,
        model=pick(MODEL_ENV, "model"),
        api_base=pick(API_BASE_ENV, "api_base"),
        sessions_dir=Path(sessions).expanduser() if sessions else None,
        memory=Path(memory).expanduser() if memory else None,
        policy=pick("EVOKERNEL_POLICY", "policy"),
        file=data,
    )


def sessions_root(cli_value: str | Path | None = None) -> Path:
    """Where session folders live: flag > `$EVOKERNEL_SESSIONS` > config `sessions_dir` > ./sessions."""
    if cli_value:
        return Path(cli_value).expanduser()
    return load_settings().sessions_dir or Path("sessions")


def api_key_problem(model: str, api_base: str | None = None) -> str | None:
    """Why `model` cannot be called from here for want of a key (one line), or None.

    Checked before a session is created, without importing litellm: a provider we know the key of
    (openai/…, anthropic/…, …) needs that variable unless an API base (a local server) or
    `EVOKERNEL_API_KEY` is given. Scripted models and unknown providers pass; litellm still checks.
    """
    if model.startswith(SCRIPTED_PREFIX) or api_base or os.environ.get(API_KEY_ENV):
        return None
    provider = model.split("/", 1)[0] if "/" in model else ("anthropic" if model.startswith("claude") else "openai")
    var = _PROVIDER_KEYS.get(provider)
    if var is None or os.environ.get(var):
        return None
    return (f"{model}: no API key; set {var} (or {API_KEY_ENV}), pass --api-base for a local "
            "OpenAI-compatible server, or leave the model out for manual mode")


def endpoint_problem(api_base: str | None, timeout_s: float = 3.0) -> str | None:
    """Why the server at `api_base` cannot be used (one line), or None: a connection and one `GET …/models`
    with a short timeout, made before a session folder or a model call, so an unreachable `--api-base` costs
    seconds, not a session's worth of retries. Any HTTP answer passes (an OpenAI-compatible server lists its
    models; one that has no such route still answers 404 or 501): what fails is nothing listening, or
    something listening that does not speak HTTP (a wrong port: a database, an SSH daemon), which a bare
    connection took for a server. No model is called (a server counting completions sees none)."""
    if not api_base:
        return None
    import socket
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(api_base if "://" in api_base else f"http://{api_base}")
        host, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        return f"--api-base {api_base} is not a URL ({exc})"
    if not host:
        return f"--api-base {api_base} names no host; give e.g. http://127.0.0.1:8000/v1"
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        return (f"cannot reach the model server at {api_base} ({host}:{port}: {reason}); start it, or fix "
                "--api-base")
    return _http_problem(api_base, parts.scheme, host, port, parts.path, timeout_s)


def _http_problem(api_base: str, scheme: str, host: str, port: int, path: str, timeout_s: float) -> str | None:
    """One `GET {path}/models` to a server that accepted a connection: None on any HTTP status line."""
    import http.client

    conn_cls = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
    conn = conn_cls(host, port, timeout=timeout_s)
    try:
        conn.request("GET", path.rstrip("/") + "/models", headers={"Accept": "application/json"})
        conn.getresponse().read(65536)
        return None
    except (http.client.HTTPException, ConnectionError) as exc:
        return (f"{host}:{port} accepted a connection but did not answer as an HTTP model server "
                f"({type(exc).__name__}); is --api-base {api_base} the right port?")
    except OSError as exc:
        reason = "no answer in time" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        return f"the model server at {api_base} did not answer a request ({reason}); check that it is running"
    finally:
        conn.close()


HOW_TO_CONFIGURE = (
    f"pass --model (e.g. --model openai/gpt-4o-mini), set {MODEL_ENV}, "
    "or put `model = \"...\"` in {path}"
)


def how_to_configure() -> str:
    """One line telling a person how to configure a model."""
    return HOW_TO_CONFIGURE.format(path=config_path())
