"""The trusted side's only ways into a directory a candidate can write: held descriptors, typed reads,
and a remover nothing the candidate leaves behind can stop.

A candidate keeps running (or leaves forked helpers) while the trusted side reads its results, so
every name in its job directory may change between two system calls. Hence:

* A hand-over directory is created by the trusted side in a place the candidate cannot see, opened
  once (`O_DIRECTORY | O_NOFOLLOW`) and only then renamed into the job (`HeldDir`). Every later read
  goes through that descriptor: renaming the directory and planting a link in its place (towards the
  reference's files, say) changes nothing the trusted side reads. No path through a candidate-writable
  directory is ever resolved or walked.
* A file is opened relative to its held directory with `O_NOFOLLOW | O_NONBLOCK` (a FIFO cannot block
  the open), then `fstat` must say a regular file no larger than the caller's bound (`open_regular`);
  links, FIFOs, sockets and devices are refused with one line, never read.
* `remove_tree` is iterative and descriptor based: no recursion (a 3000-deep chain of directories
  breaks `shutil.rmtree` with a RecursionError), a bounded number of open descriptors (deep levels are
  renamed up to the top and removed from there), links never followed, permissions the candidate
  took away given back, and a time budget after which it gives up instead of blocking a verification.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import secrets
import stat
import time
from pathlib import Path

log = logging.getLogger("evokernel.verifier")

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
MAX_DEPTH = 48  # descriptors one removal holds at most; deeper directories are moved up to the top
MAX_JSON_BYTES = 4 * 1024 * 1024


class HeldDir:
    """A directory the trusted side created and holds open: `fd` is what every read uses, `name` is
    what the candidate is told, `path` only words messages (it may point anywhere by now)."""

    def __init__(self, path: Path, fd: int):
        self.path, self.fd, self.name = path, fd, path.name

    def close(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1

    def __repr__(self) -> str:
        return f"HeldDir({self.name!r}, fd={self.fd})"


def create_held(stage: Path, dest: Path, name: str) -> HeldDir:
    """`dest/name`, created in `stage` (a trusted directory the candidate cannot see), opened there and
    then renamed into `dest`: the descriptor is certainly the directory the trusted side made, whatever
    the candidate does to names in `dest` before or after. Raises OSError when the rename is refused
    (something already sits at that name)."""
    stage.mkdir(mode=0o700, exist_ok=True)
    stage_fd = os.open(stage, _DIR_FLAGS)
    try:
        os.mkdir(name, 0o700, dir_fd=stage_fd)
        fd = os.open(name, _DIR_FLAGS, dir_fd=stage_fd)
        try:
            dest_fd = os.open(dest, _DIR_FLAGS)
            try:
                os.rename(name, name, src_dir_fd=stage_fd, dst_dir_fd=dest_fd)
            finally:
                os.close(dest_fd)
        except OSError:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.rmdir(name, dir_fd=stage_fd)
            raise
    finally:
        os.close(stage_fd)
    return HeldDir(dest / name, fd)


def create_in_own_fs(dest_fd: int, dest: Path, name: str) -> HeldDir:
    """`dest/name` where `dest` (held open as `dest_fd`) is the job's own tmpfs (`verifier.sandbox.job_mount`):
    made there and opened without following links; the descriptor must be an empty directory of that file
    system. No stage is
    needed (a rename into another file system is not possible anyway): should the candidate swap the
    new directory for one of its own between the two calls, what the trusted side holds is still a
    directory of the job's tmpfs, which holds no trusted file (a hard link cannot cross file systems,
    links are never followed, every file is created with O_EXCL and read as a bounded regular file)."""
    dev = os.fstat(dest_fd).st_dev
    os.mkdir(name, 0o700, dir_fd=dest_fd)
    fd = os.open(name, _DIR_FLAGS, dir_fd=dest_fd)
    st = os.fstat(fd)
    if st.st_dev != dev or any(True for _ in os.scandir(fd)):
        os.close(fd)
        raise OSError(errno.EEXIST, "the new directory was replaced before the verifier opened it")
    return HeldDir(dest / name, fd)


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not name or "/" in name or "\0" in name or name.startswith("."):
        raise ValueError(f"bad file name {name!r}")
    return name


def open_regular(dir_fd: int, name: str, max_bytes: int | None = None) -> tuple[int, os.stat_result]:
    """(descriptor, stat) of the regular file `name` directly in the directory `dir_fd`. Links, FIFOs,
    sockets and devices are refused (ValueError) without blocking; so is a file over `max_bytes`."""
    _check_name(name)
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):
            raise ValueError(f"{name} is a link, not a regular file") from None
        if exc.errno in (errno.ENXIO, errno.EOPNOTSUPP, errno.ENODEV):
            raise ValueError(f"{name} is not a regular file (a socket or a device)") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = ("a FIFO" if stat.S_ISFIFO(st.st_mode) else "a directory" if stat.S_ISDIR(st.st_mode)
                    else "a device or socket")
            raise ValueError(f"{name} is {kind}, not a regular file")
        if max_bytes is not None and st.st_size > max_bytes:
            raise ValueError(f"{name} holds {st.st_size} bytes, more than the {max_bytes} allowed")
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_bytes(dir_fd: int, name: str, max_bytes: int) -> bytes:
    """The whole of a regular file (see `open_regular`), never more than `max_bytes`."""
    fd, _ = open_regular(dir_fd, name, max_bytes)
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ValueError(f"{name} grew past {max_bytes} bytes while it was read")
    return data


def read_json(dir_fd: int, name: str, max_bytes: int = MAX_JSON_BYTES):
    return json.loads(read_bytes(dir_fd, name, max_bytes))


def digest_fd(fd: int, limit: int, chunk: bytearray | None = None) -> str:
    """SHA-256 of what the open file holds, reading at most `limit` + 1 bytes (a file growing under the
    reader costs nothing more); into `chunk` when given (reused: no fresh buffer per read)."""
    h = hashlib.sha256()
    left = limit + 1
    if chunk is not None and len(chunk):
        view = memoryview(chunk)
        while left > 0:
            n = os.readv(fd, [view[:min(len(view), left)]])
            if not n:
                break
            h.update(view[:n])
            left -= n
        return h.hexdigest()
    while left > 0:
        data = os.read(fd, min(1 << 22, left))
        if not data:
            break
        h.update(data)
        left -= len(data)
    return h.hexdigest()


# ---------------------------------------------------------------------------------------------------
# removal


class _OutOfTime(Exception):
    pass


def _open_dir(parent_fd: int, name: str) -> int:
    """A subdirectory, without following links; read, write and search permission given back first
    when the candidate took them away (the trusted user owns every file the sandbox made)."""
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except PermissionError:
        path_fd = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent_fd)
        try:
            os.chmod(f"/proc/self/fd/{path_fd}", 0o700)
        finally:
            os.close(path_fd)
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    with contextlib.suppress(OSError):
        if stat.S_IMODE(os.fstat(fd).st_mode) & 0o700 != 0o700:
            os.fchmod(fd, 0o700)
    return fd


def _scan(fd: int, deadline: float | None) -> list[str]:
    """Unlink every non-directory in `fd`; the names of its subdirectories."""
    subdirs = []
    for entry in os.scandir(fd):
        if deadline is not None and time.monotonic() > deadline:
            raise _OutOfTime
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError:
            is_dir = False
        if is_dir:
            subdirs.append(entry.name)
            continue
        try:
            os.unlink(entry.name, dir_fd=fd)
        except FileNotFoundError:
            pass
        except IsADirectoryError:
            subdirs.append(entry.name)
    return subdirs


def empty_dir(root_fd: int, deadline: float | None = None) -> None:
    """Remove everything inside the open directory `root_fd`, iteratively. At most `MAX_DEPTH`
    descriptors are held: a directory met deeper than that is renamed into the root under a fresh name
    and removed from there later, so any depth is removed with bounded memory and descriptors."""
    stack: list[list] = [[root_fd, None, _scan(root_fd, deadline), 0]]
    try:
        while True:
            if deadline is not None and time.monotonic() > deadline:
                raise _OutOfTime
            fd, name, pending, _tries = top = stack[-1]
            if pending:
                sub = pending.pop()
                if len(stack) >= MAX_DEPTH:
                    flat = f".evk-flat-{secrets.token_hex(8)}"
                    try:
                        os.rename(sub, flat, src_dir_fd=fd, dst_dir_fd=root_fd)
                    except FileNotFoundError:
                        continue
                    stack[0][2].append(flat)
                    continue
                try:
                    sub_fd = _open_dir(fd, sub)
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                        raise
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(sub, dir_fd=fd)  # it became a link or a file meanwhile
                    continue
                stack.append([sub_fd, sub, _scan(sub_fd, deadline), 0])
                continue
            if len(stack) == 1:
                again = _scan(root_fd, deadline)
                if not again:
                    return
                top[3] += 1
                if top[3] > 100:
                    raise OSError(errno.ENOTEMPTY, "the directory keeps filling up while it is removed")
                top[2] = again
                continue
            parent_fd = stack[-2][0]
            try:
                os.rmdir(name, dir_fd=parent_fd)
            except OSError as exc:
                if exc.errno == errno.ENOENT:
                    pass
                elif exc.errno in (errno.ENOTEMPTY, errno.EEXIST) and top[3] < 100:
                    top[3] += 1
                    top[2] = _scan(fd, deadline)
                    continue
                else:
                    raise
            os.close(fd)
            stack.pop()
    finally:
        for fd, *_ in stack[1:]:
            with contextlib.suppress(OSError):
                os.close(fd)


def remove_tree(path: Path, budget_s: float | None = 60.0) -> bool:
    """Remove `path` (a directory tree or a single entry) without recursion and without following any
    link; True when it is gone. Never raises: a failure or a tree that takes longer than `budget_s`
    leaves what remains and returns False. `path`'s parent must be a trusted directory."""
    deadline = None if budget_s is None else time.monotonic() + budget_s
    try:
        parent_fd = os.open(path.parent, _DIR_FLAGS)
    except FileNotFoundError:
        return True
    except OSError as exc:
        log.warning("cannot open %s to remove %s: %s", path.parent, path.name, exc)
        return False
    try:
        try:
            st = os.stat(path.name, dir_fd=parent_fd, follow_symlinks=False)
        except FileNotFoundError:
            return True
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(path.name, dir_fd=parent_fd)
            return True
        root_fd = _open_dir(parent_fd, path.name)
        try:
            empty_dir(root_fd, deadline)
        finally:
            os.close(root_fd)
        os.rmdir(path.name, dir_fd=parent_fd)
        return True
    except FileNotFoundError:
        return True
    except _OutOfTime:
        log.warning("removing %s took longer than %.0f s; left for later", path, budget_s)
        return False
    except Exception as exc:  # noqa: BLE001 - removal must never stop a verification
        log.warning("could not remove %s: %s: %s", path, type(exc).__name__, exc)
        return False
    finally:
        os.close(parent_fd)


def discard(path: Path, trash: Path, budget_s: float | None = 60.0) -> bool:
    """`remove_tree(path)`; what cannot be removed now is renamed into `trash` (retried by
    `isolation.clean_stale_runs`), so its name is free and nothing waits on it. Never raises."""
    if remove_tree(path, budget_s):
        return True
    try:
        trash.mkdir(mode=0o700, exist_ok=True)
        os.rename(path, trash / f"{path.name}-{secrets.token_hex(4)}")
    except OSError as exc:
        log.warning("could not move %s into %s: %s", path, trash, exc)
    return False
