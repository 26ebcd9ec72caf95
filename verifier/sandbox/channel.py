"""JSON-line messages over inherited file descriptors: how the trusted side and a worker talk.

The worker writes marks (`{"phase": ...}`) on `EVK_PROGRESS_FD` and reads commands (`{"cmd": ...}`) on
`EVK_CONTROL_FD`. Everything a sandboxed worker says is a claim: the parent checks files and times it
can verify, and bounds every message's size.
"""

from __future__ import annotations

import json
import os

MAX_LINE = 4 * 1024 * 1024


class Channel:
    """Worker side: send marks, receive commands (blocking)."""

    def __init__(self, out_fd: int | None, in_fd: int | None):
        self._out = out_fd
        self._in = in_fd
        self._buf = b""

    @classmethod
    def from_env(cls) -> Channel:
        def fd(name: str) -> int | None:
            value = os.environ.get(name)
            return int(value) if value else None

        return cls(fd("EVK_PROGRESS_FD"), fd("EVK_CONTROL_FD"))

    def mark(self, phase: str, **extra) -> None:
        if self._out is None:
            return
        line = (json.dumps({"phase": phase, **extra}, default=str) + "\n").encode()
        try:
            view = memoryview(line)
            while view:
                n = os.write(self._out, view)
                view = view[n:]
        except OSError:
            self._out = None

    def recv(self) -> dict:
        """The next command; {"cmd": "finish"} when the parent has gone away."""
        if self._in is None:
            return {"cmd": "finish"}
        while b"\n" not in self._buf:
            try:
                chunk = os.read(self._in, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                return {"cmd": "finish"}
            self._buf += chunk
            if len(self._buf) > MAX_LINE:
                return {"cmd": "finish"}
        line, self._buf = self._buf.split(b"\n", 1)
        try:
            msg = json.loads(line)
        except ValueError:
            return {"cmd": "finish"}
        return msg if isinstance(msg, dict) else {"cmd": "finish"}


def send(fd: int, message: dict) -> bool:
    """Parent side: one command line; False when the worker has gone."""
    data = (json.dumps(message) + "\n").encode()
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
    except OSError:
        return False
    return True
