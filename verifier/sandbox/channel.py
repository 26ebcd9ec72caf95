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

        channel = cls(fd("EVK_PROGRESS_FD"), fd("EVK_CONTROL_FD"))
        channel.fd_socket = fd("EVK_FD_SOCKET")
        return channel

    fd_socket: int | None = None  # a Unix socket for descriptors (`send_fd`, `receive_fd`), when the parent gave one

    def send_fd(self, fd: int, tag: str) -> bool:
        """Pass descriptor `fd` to the parent (SCM_RIGHTS) with a short `tag`; False when there is no socket."""
        if self.fd_socket is None:
            return False
        return send_fd(self.fd_socket, fd, tag)

    def receive_fd(self, timeout: float = 60.0) -> tuple[str, int] | None:
        """The next descriptor the parent passed: (tag, fd), or None."""
        if self.fd_socket is None:
            return None
        return receive_fd(self.fd_socket, timeout)

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


MAX_TAG = 256


def send_fd(sock_fd: int, fd: int, tag: str) -> bool:
    """One descriptor over a Unix socket, with a tag the receiver checks (`receive_fd`)."""
    import socket

    try:
        with socket.socket(fileno=os.dup(sock_fd)) as sock:
            socket.send_fds(sock, [tag.encode()[:MAX_TAG]], [fd])
    except OSError:
        return False
    return True


def receive_fd(sock_fd: int, timeout: float) -> tuple[str, int] | None:
    """(tag, descriptor) of the next message on a Unix socket, or None (timeout, closed, no descriptor).

    A peer is untrusted: at most one descriptor is accepted per message (the kernel closes any beyond the
    control buffer), a message without one is ignored, and the tag is bounded text."""
    import select
    import socket

    try:
        with socket.socket(fileno=os.dup(sock_fd)) as sock:
            ready, _, _ = select.select([sock], [], [], max(0.0, timeout))
            if not ready:
                return None
            data, fds, _flags, _addr = socket.recv_fds(sock, MAX_TAG, 1)
    except OSError:
        return None
    if not fds:
        return None
    for extra in fds[1:]:
        os.close(extra)
    return data.decode(errors="replace"), fds[0]
