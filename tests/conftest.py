"""Suite-wide isolation: no test touches the person's real memory bank, config or build cache.

All tests share one build root per pytest run (EVOKERNEL_BUILD_DIR), so the precompiled headers and the
pybind objects are built once and reused; each test still gets its own verdicts where it asks for
`use_cache=False`.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

_SESSION_ROOT = Path(tempfile.mkdtemp(prefix="evokernel-tests-"))
os.environ.setdefault("EVOKERNEL_BUILD_DIR", str(_SESSION_ROOT / "builds"))
os.environ.setdefault("EVOKERNEL_MEMORY", str(_SESSION_ROOT / "memory" / "memory.json"))
os.environ.setdefault("EVOKERNEL_CONFIG_DIR", str(_SESSION_ROOT / "config"))
os.environ.setdefault("EVOKERNEL_CONFIG", str(_SESSION_ROOT / "config" / "config.toml"))
os.environ.setdefault("EVOKERNEL_SESSIONS", str(_SESSION_ROOT / "sessions"))
os.environ.pop("EVOKERNEL_MODEL", None)


@pytest.fixture(scope="session")
def shared_build_root() -> Path:
    """The one build root of this pytest run (precompiled headers built once)."""
    return Path(os.environ["EVOKERNEL_BUILD_DIR"])
