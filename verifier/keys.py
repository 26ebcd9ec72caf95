"""One content key for everything the verifier caches or shares (verdicts, reference workers, builds,
bindings, CUDA objects): the same parts give the same key on the trusted side and in the sandbox, and
parts are separated, so ("ab", "c") and ("a", "bc") never collide."""

from __future__ import annotations

import hashlib
import json


def content_key(*parts: object) -> str:
    """24 hex digits of SHA-256 over each part as sorted JSON (str() for anything JSON cannot say)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(json.dumps(part, sort_keys=True, default=str).encode())
        h.update(b"\0")
    return h.hexdigest()[:24]
