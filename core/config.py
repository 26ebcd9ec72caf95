"""User settings: the TOML config file under the user's config dir, overridable by env vars."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

CONFIG_ENV = "EVOKERNEL_CONFIG"
SESSIONS_ENV = "EVOKERNEL_SESSIONS"
MODEL_ENV = "EVOKERNEL_MODEL"
API_BASE_ENV = "EVOKERNEL_API_BASE"


class ConfigError(Exception):
    """The config file exists but cannot be read; the message says which file and why."""


def config_path() -> Path:
    """`$EVOKERNEL_CONFIG`, else `<user config dir>/evokernel/config.toml`."""
    env = os.environ.get(CONFIG_ENV)
    if env:
        return Path(env).expanduser()
    from platformdirs import user_config_dir

    return Path(user_config_dir("evokernel")) / "config.toml"


def load_config(path: Path | None = None) -> dict[str, Any]:
    """The config file as a dict; {} when there is none."""
    path = path or config_path()
    if not path.exists():
        return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from None


def sessions_root(cli_value: str | Path | None = None) -> Path:
    """Where session folders live: flag > `$EVOKERNEL_SESSIONS` > config `sessions_dir` > ./sessions."""
    if cli_value:
        return Path(cli_value).expanduser()
    env = os.environ.get(SESSIONS_ENV)
    if env:
        return Path(env).expanduser()
    configured = load_config().get("sessions_dir")
    if configured:
        return Path(str(configured)).expanduser()
    return Path("sessions")


HOW_TO_CONFIGURE = (
    f"pass --model (e.g. --model openai/gpt-4o-mini), set {MODEL_ENV}, "
    "or put `model = \"...\"` in {path}"
)


def how_to_configure() -> str:
    """One line telling a person how to configure a model."""
    return HOW_TO_CONFIGURE.format(path=config_path())
