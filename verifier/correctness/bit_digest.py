"""Keyed chunk digests of a tensor's bits, and bitwise equality block by block: the decoy probes' record of
what a custom-kernel call's arguments held before it ran, without a copy of them.

Why: the probes (`verifier.correctness.decoy`) find what a call wrote by comparing each argument's bits
before and after it. They kept a full copy of every argument, and `torch.equal` of two tensors makes a
result as large as them: on a 6.4 GB ReLU's trials the candidate's harness peaked at 3.8x the problem's
inputs and outputs (49 GB on an H200, session 17), where the memory plan allows about 3x and KernelBench's
own loop holds 1x. A digest per 32 MB chunk costs a few bytes per chunk and one chunk-sized temporary.

The digest of a chunk is the wrapping 64-bit sum of its 8-byte words, each multiplied by a key word (odd,
drawn from `os.urandom` when the digest object is made, so nothing is fixed before the probe starts); tail
bytes are keyed words of their own. One changed word always changes its chunk's sum (an odd key is
invertible modulo 2^64); changes that cancel across words need the keys, which live in this process only
for the length of one probe. A collision can only cost the candidate: a write the probes miss is left
ungarbled, so its output does not change under the probe and reads as a decoy; a result whose digest
matches an input's reads as a copy. Neither makes a verdict pass that bit-for-bit copies would refuse.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

CHUNK_BYTES = 32 << 20  # one chunk's bytes: the largest temporary a digest or a comparison makes


@dataclass(frozen=True)
class Bits:
    """What a tensor held: its shape, dtype name, element count and one digest per chunk (a device tensor)."""

    shape: tuple[int, ...]
    dtype: object
    numel: int
    sums: object

    def same_values(self, other: Bits) -> bool:
        """The same elements in the same order and dtype (any shape)."""
        return (self.dtype == other.dtype and self.numel == other.numel
                and bool(_equal(self.sums, other.sums)))

    def same(self, other: Bits) -> bool:
        """Bitwise the same tensor: shape, dtype and every byte."""
        return self.shape == other.shape and self.same_values(other)


def _equal(a, b) -> bool:
    if a.shape != b.shape:
        return False
    if a.device != b.device:
        b = b.to(a.device)
    return bool((a == b).all())


def _signed(constant: int) -> int:
    """A 64-bit constant as the signed integer torch's int64 arithmetic takes."""
    return constant - (1 << 64) if constant >= 1 << 63 else constant


def _flat_bytes(torch, chunk):
    """A 1-d chunk's bytes as uint8, the chunk itself where it is contiguous."""
    c = chunk if chunk.is_contiguous() else chunk.contiguous()
    return c.view(torch.uint8)


class KeyedDigest:
    """Digests under one key (see the module's docstring); one object per probe."""

    def __init__(self, torch, chunk_bytes: int = CHUNK_BYTES):
        self.torch = torch
        self.chunk_bytes = max(64, int(chunk_bytes) // 8 * 8)
        self.seed = int.from_bytes(os.urandom(8), "little") >> 2
        self._keys: dict[str, Any] = {}

    def _key(self, device, words: int):
        """At least `words` odd int64 key words on `device`. Word i is a mix of i and the seed, so a key made
        longer later starts with the same words (a digest before a call and one after agree on its key)."""
        torch = self.torch
        name = str(device)
        key = self._keys.get(name)
        if key is None or key.numel() < words:
            size = min(self.chunk_bytes // 8 + 8, max(words, 1024))
            z = torch.arange(size, dtype=torch.int64, device=device).add_(self.seed)
            z = z.mul_(_signed(0x9E3779B97F4A7C15))
            z = z.bitwise_xor_(z >> 30).mul_(_signed(0xBF58476D1CE4E5B9))
            z = z.bitwise_xor_(z >> 27).mul_(_signed(0x94D049BB133111EB))
            key = z.bitwise_xor_(z >> 31).bitwise_or_(1)  # odd: every word's change shows in its chunk's sum
            self._keys[name] = key
        return key

    def _chunk_sum(self, chunk_bytes):
        torch = self.torch
        n = chunk_bytes.numel()
        words = n // 8
        key = self._key(chunk_bytes.device, words + (n - words * 8))
        total = torch.zeros((), dtype=torch.int64, device=chunk_bytes.device)
        if words:
            head = chunk_bytes[:words * 8]
            try:
                w = head.view(torch.int64)
            except RuntimeError:  # not 8-byte aligned in its storage (a view at an odd offset): a copy of the chunk
                w = head.clone().view(torch.int64)
            total = total + (w * key[:words]).sum()
        if n > words * 8:
            tail = chunk_bytes[words * 8:].to(torch.int64)
            total = total + (tail * key[words:words + tail.numel()]).sum()
        return total

    def of(self, t, as_dtype=None) -> Bits:
        """`t`'s digest; with `as_dtype`, the digest of `t.to(as_dtype)`, converted one chunk at a time."""
        torch = self.torch
        t = t.detach()
        dtype = as_dtype if as_dtype is not None else t.dtype
        flat = t.reshape(-1)  # a view where `t` is contiguous; a non-contiguous argument is copied once
        per = max(1, self.chunk_bytes // max(1, torch.empty((), dtype=dtype).element_size()))
        sums = []
        for i in range(0, flat.numel(), per):
            chunk = flat[i:i + per]
            if chunk.dtype != dtype:
                chunk = chunk.to(dtype)
            sums.append(self._chunk_sum(_flat_bytes(torch, chunk)))
        stacked = torch.stack(sums) if sums else torch.zeros(0, dtype=torch.int64, device=t.device)
        return Bits(tuple(t.shape), dtype, int(flat.numel()), stacked)


def equal_bits(torch, a, b, chunk_bytes: int = CHUNK_BYTES) -> bool:
    """Equal shape, dtype and bytes (NaN payloads and signed zeros included), compared one chunk at a time:
    `torch.equal` of the whole makes a temporary as large as the tensors."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    fa, fb = a.detach().reshape(-1), b.detach().reshape(-1)
    n = fa.numel()
    if not n:
        return True
    per = max(1, int(chunk_bytes) // max(1, fa.element_size()))
    for i in range(0, n, per):
        if not torch.equal(_flat_bytes(torch, fa[i:i + per]), _flat_bytes(torch, fb[i:i + per])):
            return False
    return True


def round_trips(torch, t, dtype, chunk_bytes: int = CHUNK_BYTES) -> bool:
    """`t` converted to `dtype` and back gives `t`'s bits: nothing was lost (a lossless copy in another dtype)."""
    flat = t.detach().reshape(-1)
    per = max(1, int(chunk_bytes) // max(1, flat.element_size()))
    for i in range(0, flat.numel(), per):
        chunk = flat[i:i + per]
        if not torch.equal(_flat_bytes(torch, chunk), _flat_bytes(torch, chunk.to(dtype).to(chunk.dtype))):
            return False
    return True
