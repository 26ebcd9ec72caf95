"""session.json as a SessionMeta: attributes for new code, dict reads for old, unknown keys kept, damage is one line."""

from __future__ import annotations

import json

import pytest

from core.session import Session, SessionError, SessionMeta, load_meta
from core.tasks import load_task
from tests.fakes.verdicts import fake_verify


def test_meta_round_trips_and_reads_both_ways(tmp_path):
    s = Session.create(load_task("relu"), model=None, root=tmp_path, verify_fn=fake_verify, shapes="x: 4x4 f32")
    s.close()
    raw = json.loads((s.path / "session.json").read_text())
    raw["from_a_newer_version"] = {"x": 1}
    (s.path / "session.json").write_text(json.dumps(raw))
    meta = load_meta(s.path)
    assert isinstance(meta, SessionMeta) and meta.task_name == "relu" and meta["task"]["name"] == "relu"
    assert meta.shapes == meta.get("shapes") == "x: 4x4 f32" and meta.model is None and "settings" in meta
    assert meta.to_dict() == raw  # nothing dropped, not even keys this version does not know
    assert meta.get("missing", 7) == 7


@pytest.mark.parametrize("text", ["[1, 2]", '{"id": "x"}', "{not json"])
def test_a_damaged_session_json_is_one_line(tmp_path, text):
    (tmp_path / "session.json").write_text(text)
    with pytest.raises(SessionError) as err:
        load_meta(tmp_path)
    assert "\n" not in str(err.value) and "session" in str(err.value)
