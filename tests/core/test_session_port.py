"""`SessionPort`: what the app uses of a session, kept in step with `Session` (issue 32)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from core.session import Session
from core.session.port import ACTIONS, SessionPort

APP = Path(__file__).resolve().parents[2] / "evokernel_tui"


def test_every_action_the_app_starts_by_name_is_a_session_method_taking_on_event():
    for name in ACTIONS:
        method = getattr(Session, name)
        assert "on_event" in inspect.signature(method).parameters, name
    called = {m for f in APP.rglob("*.py") for m in re.findall(r'_plain_call\(\s*"(\w+)"', f.read_text())}
    assert called and called <= set(ACTIONS), called - set(ACTIONS)


def test_session_has_every_member_of_the_port():
    members = {n for n in dir(SessionPort) if not n.startswith("_")} | set(SessionPort.__annotations__)
    instance_attributes = set(SessionPort.__annotations__)  # set in Session.__init__
    missing = [n for n in members - instance_attributes if not hasattr(Session, n)]
    assert not missing, missing
    init = inspect.getsource(Session.__init__)
    assert all(f"self.{n} " in init or f"self.{n}:" in init for n in instance_attributes), instance_attributes
