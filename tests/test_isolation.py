"""The suite never writes where a developer's own bank, sessions, config or build cache live, even when the
developer's shell points EVOKERNEL_* at them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROBE = "EVOKERNEL_ISOLATION_PROBE"


def test_locations_point_into_the_suite_folder():
    from tests.conftest import ISOLATED, OWN_ROOT, SUITE_ROOT

    for name, value in ISOLATED.items():
        assert os.environ[name] == value
        if name == "EVOKERNEL_SCRATCH":  # a folder this process made for itself (tests/conftest.py `_own_scratch`)
            assert Path(value).name.startswith("evk-") and Path(value).parent in (Path("/dev/shm"), OWN_ROOT)
            assert Path(value).is_dir() and Path(value).stat().st_uid == os.getuid()
        elif name != "EVOKERNEL_BUILD_DIR" or not os.environ.get("EVOKERNEL_TEST_BUILD_DIR"):
            assert Path(value).is_relative_to(SUITE_ROOT), name
    from core.config import sessions_root
    from memory.store import default_path

    assert sessions_root(None).resolve().is_relative_to(SUITE_ROOT.resolve())
    assert Path(default_path()).resolve().is_relative_to(SUITE_ROOT.resolve())
    assert "EVOKERNEL_MODEL" not in os.environ
    if os.environ.get(PROBE):  # run by the test below with a developer's variables set
        mine = Path(os.environ[PROBE])
        assert not any(Path(os.environ[n]).is_relative_to(mine) for n in ISOLATED), dict(os.environ)


def test_a_developers_own_locations_are_overridden(tmp_path):
    mine = tmp_path / "developer"
    env = {**os.environ, PROBE: str(mine), "EVOKERNEL_MEMORY": str(mine / "bank.json"),
           "EVOKERNEL_SESSIONS": str(mine / "sessions"), "EVOKERNEL_BUILD_DIR": str(mine / "builds"),
           "EVOKERNEL_CONFIG": str(mine / "config.toml"), "EVOKERNEL_MODEL": "openai/gpt-4o"}
    env.pop("EVOKERNEL_TEST_BUILD_DIR", None)
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:logging", "-p", "no:cacheprovider",
                          f"{Path(__file__)}::test_locations_point_into_the_suite_folder"],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:]
    assert "1 passed" in out.stdout
    assert not mine.exists()
