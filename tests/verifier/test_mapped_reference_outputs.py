"""The timed rounds' checks map the reference's output files (`verifier.gates.evidence._map`) instead of reading
them: same array as `np.load`, and never a pickle, a link or a file shorter than its header says."""

from __future__ import annotations

import os

import numpy as np
import pytest

from verifier import VerifyConfig
from verifier.gates.evidence import _map


def test_a_mapped_file_is_the_array_np_load_gives(tmp_path):
    a = np.random.default_rng(0).standard_normal((64, 33)).astype(np.float32)
    np.save(tmp_path / "c.npy", a)
    np.save(tmp_path / "f.npy", np.asfortranarray(a))
    for name in ("c.npy", "f.npy"):
        got = _map(tmp_path, name, VerifyConfig())
        np.testing.assert_array_equal(got, a)
        assert not got.flags.writeable


def test_pickles_links_and_short_files_are_refused(tmp_path):
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="objects"):
        _map(tmp_path, "obj.npy", VerifyConfig())
    np.save(tmp_path / "ok.npy", np.zeros(1000, dtype=np.float32))
    os.symlink(tmp_path / "ok.npy", tmp_path / "link.npy")
    with pytest.raises((ValueError, OSError)):
        _map(tmp_path, "link.npy", VerifyConfig())
    raw = (tmp_path / "ok.npy").read_bytes()
    (tmp_path / "short.npy").write_bytes(raw[:-100])
    with pytest.raises(ValueError, match="shorter"):
        _map(tmp_path, "short.npy", VerifyConfig())
