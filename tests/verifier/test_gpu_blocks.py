"""The GPU's timed-call check by blocks (`verifier.api.choose_blocks`, `verifier.clock.paired_calls.save_blocks`): blocks are
drawn after the round, the tail is always among them, small outputs are checked whole."""

from __future__ import annotations

import random

import numpy as np
import torch

from verifier.api import BLOCK_ELEMENTS, choose_blocks
from verifier.clock.paired_calls import save_blocks


def test_blocks_cover_the_tail_and_small_outputs_whole():
    blocks = choose_blocks(random.Random(1), [[10, 1_000_000], [5]])
    first = blocks["0"]
    assert [0, 0, 10] in first  # a small output is compared whole
    big = [b for b in first if b[0] == 1]
    assert [1, 1_000_000 - BLOCK_ELEMENTS, BLOCK_ELEMENTS] in big  # the tail
    assert all(s >= 0 and s + n <= 1_000_000 for _, s, n in big) and len(big) >= 2
    assert blocks["1"] == [[0, 0, 5]]
    # drawn afresh: another draw gives other offsets
    assert choose_blocks(random.Random(2), [[1_000_000]]) != choose_blocks(random.Random(3), [[1_000_000]])


def test_saved_blocks_are_the_slices_of_the_flattened_outputs(tmp_path):
    out = torch.arange(100, dtype=torch.float32).reshape(10, 10)
    saved = save_blocks(torch, np, tmp_path, [[out]], {"0": [[0, 90, 10], [0, 5, 3]]})
    assert [r["file"] for r in saved["0"]] == ["s0_out0_b0.npy", "s0_out0_b1.npy"]  # the default tag
    np.testing.assert_array_equal(np.load(tmp_path / "s0_out0_b0.npy"), np.arange(90, 100, dtype=np.float32))
    np.testing.assert_array_equal(np.load(tmp_path / "s0_out0_b1.npy"), np.array([5, 6, 7], dtype=np.float32))
