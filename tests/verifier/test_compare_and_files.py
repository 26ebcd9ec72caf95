"""Output comparison edge cases, and the parent's refusal to read swapped or linked result files."""

from __future__ import annotations

import os

import numpy as np
import pytest

from verifier.compare import compare_tensor
from verifier.config import VerifyConfig
from verifier.gates import _load, file_identity

INF = np.array([1.0, np.inf, -np.inf, np.nan], dtype=np.float32)


def _ok(got, want=INF):
    return compare_tensor(got, want, "float32", "float32", 1e-2, 1e-2, "out").ok


def test_infinities_and_nans_must_match_exactly():
    assert _ok(INF.copy())
    for i, bad in [(1, -np.inf), (1, 1e30), (3, 0.0), (0, np.nan)]:
        got = INF.copy()
        got[i] = bad
        assert not _ok(got), (i, bad)
    near = INF.copy()
    near[0] = 1.005
    assert _ok(near)


def test_links_and_swapped_reference_files_are_refused(tmp_path):
    config = VerifyConfig()
    ref, cand = tmp_path / "ref", tmp_path / "cand"
    ref.mkdir()
    cand.mkdir()
    np.save(ref / "t0_out0.npy", np.ones(3, dtype=np.float32))
    np.save(cand / "t0_out0.npy", np.zeros(3, dtype=np.float32))
    identities = {"t0_out0.npy": file_identity((ref / "t0_out0.npy").lstat())}
    assert _load(ref, "t0_out0.npy", config, identities).sum() == 3

    os.replace(ref / "t0_out0.npy", tmp_path / "moved.npy")
    os.symlink(cand / "t0_out0.npy", ref / "t0_out0.npy")
    with pytest.raises(ValueError, match="link"):
        _load(ref, "t0_out0.npy", config, identities)

    os.unlink(ref / "t0_out0.npy")
    np.save(ref / "t0_out0.npy", np.zeros(3, dtype=np.float32))
    with pytest.raises(ValueError, match="changed after the reference run"):
        _load(ref, "t0_out0.npy", config, identities)
    with pytest.raises(ValueError, match="changed after the reference run"):
        _load(ref, "t0_out0.npy", config, {})
