"""Small file-system helpers shared by `core` and the app: atomic writes, an exception as one line,
and a per-process lock on a folder.

`memory` and `verifier` may not import `core` (see docs/ARCHITECTURE.md), so each keeps its own copy
of the atomic write (`memory.storage.atomic_write_bytes`; the verifier's build and sandbox modules);
those copies must keep the same contract: temp file in the same folder, flush, fsync, rename.
"""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

from verifier.sandbox.procs import pid_alive

try:  # POSIX; elsewhere the lock falls back to the pid written in the file
    import fcntl
except ImportError:  # pragma: no cover - not on Linux/macOS
    fcntl = None  # type: ignore[assignment]


def atomic_write_bytes(path: Path | str, payload: bytes) -> None:
    """Write to a temp file beside `path`, fsync it, rename it over `path`: readers see old or new, never half."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise


def atomic_write_text(path: Path | str, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def first_line(exc: BaseException, limit: int | None = None) -> str:
    """The first line of an error's message (its class name when it has none), cut to `limit` characters:
    what a person reads in the one line every command and the app print for a problem."""
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return line[:limit] if limit else line


def one_line(exc: BaseException, limit: int = 300) -> str:
    """`Type: first line of the message`, cut to `limit` characters: for logs, events and error lines."""
    return f"{type(exc).__name__}: {first_line(exc, limit)}"


def os_error_text(exc: OSError) -> str:
    """The reason of an OSError without the errno noise, with a hint for a full or read-only disk."""
    reason = exc.strerror or str(exc)
    if exc.errno == errno.ENOSPC:
        return f"{reason} (the disk is full: free some space)"
    if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return f"{reason} (the folder cannot be written: check its permissions or use another one)"
    return reason


# -------------------------------------------------------------------- folder lock


class LockHeld(Exception):
    """Another process holds the lock; `holder` is what it wrote into the lock file (pid and command)."""

    def __init__(self, path: Path, holder: str, pid: int | None):
        self.path, self.holder, self.pid = path, holder, pid
        super().__init__(f"{path} is held by {holder or 'another process'}")


_held: dict[str, list] = {}  # real path of the lock file -> [fd, count]
_held_guard = threading.RLock()  # re-entrant: a finalizer may release another lock during a collection inside acquire


def _holder_text() -> str:
    try:
        cmd = Path(f"/proc/{os.getpid()}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        cmd = ""
    cmd = " ".join(cmd.split())  # one line, however the command was written
    return f"{os.getpid()} {cmd[:160]}".strip()


def _parse_holder(text: str) -> tuple[int | None, str]:
    first = text.strip().split(maxsplit=1)
    if not first or not first[0].isdigit():
        return None, ""
    return int(first[0]), first[1] if len(first) > 1 else ""


class FolderLock:
    """An exclusive lock on a folder, held by this process: `flock` on `FOLDER/.lock`.

    The lock file names the holder (pid and command line) so a refusal can say who has it. The
    kernel drops an `flock` when its process dies, so a lock left by a crashed or killed process is
    simply taken over. Within one process the lock is shared (counted): the caller keeps one writer
    per folder, as the app and the commands do.
    """

    NAME = ".lock"

    def __init__(self, folder: Path | str):
        self.path = Path(folder) / self.NAME
        self._key = os.path.realpath(self.path)
        self.held = False

    def acquire(self) -> None:
        """Take the lock or raise `LockHeld`; OSError when the folder cannot hold a lock file."""
        if self.held:
            return
        with _held_guard:
            entry = _held.get(self._key)
            if entry is not None:
                entry[1] += 1
                self.held = True
                return
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
            try:
                self._lock_fd(fd)
                os.ftruncate(fd, 0)
                os.pwrite(fd, (_holder_text() + "\n").encode(), 0)
            except BaseException:
                os.close(fd)
                raise
            _held[self._key] = [fd, 1]
            self.held = True

    def _lock_fd(self, fd: int) -> None:
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                raise self._held_error(fd) from None
            except OSError as exc:
                if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                    raise
        # no flock here: trust the pid in the file while that process lives
        pid, _ = _parse_holder(os.pread(fd, 4096, 0).decode(errors="replace"))
        if pid is not None and pid != os.getpid() and pid_alive(pid):
            raise self._held_error(fd)

    def _held_error(self, fd: int) -> LockHeld:
        text = os.pread(fd, 4096, 0).decode(errors="replace").strip()
        pid, cmd = _parse_holder(text)
        if pid is None:
            return LockHeld(self.path, "another process", None)
        if not pid_alive(pid):  # the named process died but a child it forked still holds the file
            return LockHeld(self.path, f"a child of process {pid} (which has exited)", pid)
        return LockHeld(self.path, f"process {pid}" + (f" ({cmd})" if cmd else ""), pid)

    def release(self) -> None:
        if not self.held:
            return
        self.held = False
        with _held_guard:
            entry = _held.get(self._key)
            if entry is None:
                return
            entry[1] -= 1
            if entry[1] > 0:
                return
            del _held[self._key]
            fd = entry[0]
            try:
                os.ftruncate(fd, 0)
            except OSError:
                pass
            if fcntl is not None:
                # unlocked explicitly: a child forked meanwhile (a subprocess between fork and exec) holds a
                # copy of this descriptor, and closing ours alone would leave the folder locked until it execs
                try:
                    fcntl.flock(fd, fcntl.LOCK_UN)
                except OSError:
                    pass
            os.close(fd)


def release_lock(lock: FolderLock) -> None:
    """For `weakref.finalize`: release without keeping the owner alive."""
    lock.release()
