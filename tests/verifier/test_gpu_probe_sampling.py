"""The side-stream probe's snapshot of an output too large for the flush buffer (`verifier.clock.gpu_timing`):
a strided sample of chunks from a drawn offset, and a blockwise bit comparison. The arithmetic is device-free
and checked here on the CPU; the probe itself runs in tests/gpu."""

from __future__ import annotations

import torch

from verifier.clock import gpu_timing
from verifier.clock.gpu_timing import SAMPLE_CHUNK, _bitwise_equal, _sampler


def test_the_sample_is_every_step_th_chunk_from_the_drawn_offset():
    chunks = 10
    data = torch.arange(chunks * SAMPLE_CHUNK // 4, dtype=torch.int32)
    pick = _sampler(torch, 2, 3, 3)
    part = pick(data)
    assert part.shape == (3, SAMPLE_CHUNK)
    raw = data.view(torch.uint8).view(chunks, SAMPLE_CHUNK)
    for row, k in zip(part, (2, 5, 8), strict=True):
        assert torch.equal(row, raw[k])
    assert _bitwise_equal(torch, torch.equal, part.clone(), pick(data))
    before = part.clone()
    data[(5 * SAMPLE_CHUNK + 64) // 4] += 1  # a write inside a sampled chunk shows
    assert not _bitwise_equal(torch, torch.equal, before, pick(data))
    outside = pick(data).clone()
    data[(4 * SAMPLE_CHUNK + 64) // 4] += 1  # one in a chunk the offset skipped does not (the host check's part)
    assert _bitwise_equal(torch, torch.equal, outside, pick(data))


def test_blockwise_equality_sees_a_difference_in_any_block(monkeypatch):
    monkeypatch.setattr(gpu_timing, "EQUAL_BLOCK", 64)
    a = torch.randn(1000)
    b = a.clone()
    assert _bitwise_equal(torch, torch.equal, a, b)
    b[999] = float("nan")
    assert not _bitwise_equal(torch, torch.equal, a, b)
    c = a.clone()
    c[0] = -0.0 if a[0] == 0 else a[0] * 2
    assert not _bitwise_equal(torch, torch.equal, a, c)
    assert not _bitwise_equal(torch, torch.equal, a, a[:999])
