"""State only the trusted side writes: authenticated cached verdicts and the key that signs them.

Everything here lives under the build root, which no sandbox can see. A cached verdict is accepted
only with a valid HMAC under a per-install key (0600, created once), so a file written by anyone
without the key, or a verdict edited after it was signed, is ignored and removed.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import time
from pathlib import Path

KEY_FILE = "verdict.key"


def _key(root: Path) -> bytes:
    path = root / "trusted" / KEY_FILE
    try:
        return path.read_bytes()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        key = secrets.token_bytes(32)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(key)
            fh.flush()
            os.fsync(fh.fileno())
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)
        tmp.unlink()
        return path.read_bytes()


def _mac(key: bytes, payload: bytes) -> str:
    return hmac.new(key, payload, hashlib.sha256).hexdigest()


def write_json_atomic(path: Path, data: dict) -> None:
    """Write-then-rename with fsync: readers see the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "w") as fh:
        fh.write(json.dumps(data))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def store_verdict(root: Path, key: str, verdict: dict) -> None:
    payload = json.dumps({"verdict": verdict, "stored_at": time.time()}, sort_keys=True)
    write_json_atomic(root / "verdicts" / f"{key}.json",
                      {"payload": payload, "hmac": _mac(_key(root), payload.encode())})


def load_verdict(root: Path, key: str) -> tuple[dict, float] | None:
    """(verdict, stored_at) when a correctly signed verdict is cached; a forged one is deleted."""
    path = root / "verdicts" / f"{key}.json"
    try:
        wrapper = json.loads(path.read_text())
        payload = wrapper["payload"]
        ok = isinstance(payload, str) and hmac.compare_digest(str(wrapper["hmac"]), _mac(_key(root), payload.encode()))
    except (OSError, ValueError, KeyError, TypeError):
        ok, payload = False, None
    if not ok:
        with contextlib.suppress(OSError):
            path.unlink()
        return None
    body = json.loads(payload)
    stored_at = float(body.get("stored_at", 0))
    if stored_at > time.time() + 60:
        return None
    return body["verdict"], stored_at
