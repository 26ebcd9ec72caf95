"""Shared fixtures: an isolated config dir, a memory bank per test, and session builders."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from support import VerdictVerifier  # noqa: E402


@pytest.fixture(autouse=True)
def config_dir(tmp_path, monkeypatch):
    """Theme choices and model config never touch the person's real config."""
    cfg = tmp_path / "config"
    monkeypatch.setenv("EVOKERNEL_CONFIG_DIR", str(cfg))
    monkeypatch.setenv("EVOKERNEL_CONFIG", str(cfg / "config.toml"))
    monkeypatch.delenv("EVOKERNEL_MODEL", raising=False)
    return cfg


@pytest.fixture
def verifier():
    return VerdictVerifier()


@pytest.fixture
def store(tmp_path):
    from memory import MemoryStore

    s = MemoryStore(tmp_path / "memory.json", fsync=False)
    yield s
    s.close()


@pytest.fixture
def make_session(tmp_path, store, verifier):
    """A real Session on relu with a scripted model (None = manual mode) and the verdict verifier."""
    from core.llm import ScriptedModel
    from core.session import Budgets, Session
    from core.tasks import load_task

    def make(replies: list | None, task: str = "relu", draft: int = 3, refine: int = 3):
        model = ScriptedModel(list(replies)) if replies is not None else None
        return Session.create(load_task(task), model=model, memory=store, root=tmp_path / "sessions",
                              verify_fn=verifier, budgets=Budgets(draft_steps=draft, refine_steps=refine))

    return make
