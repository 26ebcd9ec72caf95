"""Output comparison edge cases, and the parent's refusal to read swapped or linked result files."""

from __future__ import annotations

import os

import numpy as np
import pytest

from verifier.config import VerifyConfig
from verifier.correctness.compare import compare_tensor
from verifier.gates.evidence import _load, file_identity

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


def test_a_huge_sparse_output_file_is_refused_before_it_is_read(tmp_path):
    """A candidate file claiming far more data than the reference's output (a sparse file costs the
    candidate nothing; reading it costs the parent the memory) is refused by its size, unread."""
    from numpy.lib import format as npy_format

    from verifier.gates.evidence import compare_files

    ref, cand = tmp_path / "ref", tmp_path / "cand"
    ref.mkdir()
    cand.mkdir()
    np.save(ref / "out0.npy", np.zeros(4, dtype=np.float32))
    with open(cand / "out0.npy", "wb") as fh:
        npy_format.write_array_header_1_0(fh, {"descr": "<f4", "fortran_order": False, "shape": (50_000_000,)})
        fh.truncate(fh.tell() + 200_000_000)
    verdict = compare_files(cand, ref, [{"file": "out0.npy", "dtype": "float32"}],
                            [{"file": "out0.npy", "dtype": "float32"}], 1e-4, 1e-4, VerifyConfig(), label="trial 0")
    assert "far more than the reference's output" in verdict.get("fail", ""), verdict
    np.save(cand / "ok.npy", np.zeros(4, dtype=np.float64))  # a wrong dtype still reads as one
    verdict = compare_files(cand, ref, [{"file": "ok.npy", "dtype": "float64"}],
                            [{"file": "out0.npy", "dtype": "float32"}], 1e-4, 1e-4, VerifyConfig(), label="trial 0")
    assert "dtype float64, expected float32" in verdict.get("fail", ""), verdict
