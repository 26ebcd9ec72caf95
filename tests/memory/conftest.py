from __future__ import annotations

import pytest


@pytest.fixture
def bank(tmp_path):
    """Path of a fresh (not yet created) bank in a temp dir."""
    return tmp_path / "bank" / "memory.json"
