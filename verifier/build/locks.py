"""File locks between builders of one artefact: processes (bench workers, the trusted side's requests)
and threads (the prewarm, the starter's prebuild, a verification) that share a build root. `flock` on a
file opened per caller excludes threads of one process as well as other processes, and a killed holder
lets go at once.

A lock of the trusted shared tree (`ROOT/shared`, which every sandbox sees read-only) lives outside it, in
`ROOT/shared.locks` (`lock_path`): a read-only descriptor is enough to hold an `flock`, so a candidate
that could open a lock file of the shared tree could hold every other verification's build behind it
(issue 37). The directory a lock guards is still made where it was (`_guarded_dir`): the bindings'
builder writes its scratch files beside its lock, and a first attempt that moved the lock without it left
the trusted copy of the bindings unbuilt."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

SHARED_TREE = "shared"  # the trusted tree the sandbox sees read-only (`ROOT/shared`)
LOCKS_BESIDE = "shared.locks"  # its locks, beside it (`ROOT/shared.locks`), never bound into a sandbox


def keep_locks_outside(shared_root: str | Path) -> None:
    """Trusted side: make `ROOT/shared.locks` beside the shared tree `ROOT/shared`, so that from now on
    every lock of that tree lives there (`lock_path`)."""
    root = Path(shared_root)
    if root.name == SHARED_TREE:
        (root.parent / LOCKS_BESIDE).mkdir(parents=True, exist_ok=True)


def lock_path(path: Path) -> Path:
    """Where the lock `path` is really taken: a lock inside a shared tree whose `shared.locks` exists
    beside it goes there (same relative path); any other lock stays where it is."""
    path = Path(path)
    for anc in path.parents:
        if anc.name == SHARED_TREE:
            beside = anc.parent / LOCKS_BESIDE
            if beside.is_dir():
                return beside / path.relative_to(anc)
            break
    return path


def _open_lock(path: Path):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)  # the guarded directory, where the builder also writes
    real = lock_path(path)
    if real != path:
        real.parent.mkdir(parents=True, exist_ok=True)
    return open(real, "a+")


@contextlib.contextmanager
def locked(path: Path):
    """Serialise builds of one artefact across processes (bench workers share a build root)."""
    import fcntl

    with _open_lock(path) as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def try_lock(path: Path):
    """The open lock file when this caller now holds it exclusively, None when another holds it."""
    import fcntl

    fh = _open_lock(path)  # held across a generator's yield, closed by `unlock`
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.close()
        return None
    return fh


def unlock(fh) -> None:
    import fcntl

    with contextlib.suppress(OSError):
        fcntl.flock(fh, fcntl.LOCK_UN)
    fh.close()


def wait_for_lock(path: Path, deadline: float) -> bool:
    """Wait until whoever holds `path` lets it go (a finished or killed builder): False at `deadline`."""
    while (fh := try_lock(path)) is None:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    unlock(fh)
    return True


class KernelBaton:
    """Drop-in for torch's `cpp_extension.FileBaton`, held by `flock` (the kernel lets go when the holder
    dies), for the trusted processes that build through torch's own `load_inline`/`load` (the reference
    worker running a task whose reference is itself an extension; the CUDA fallback build).

    Torch's baton is a file made with O_EXCL and removed on release; a builder killed mid-build (SIGKILL, a
    reference timeout, a cancelled verification) leaves it, and every later build of that extension name
    polls for it to vanish, forever: seen in session hostile6, a stale
    `~/.cache/torch_extensions/py311_cpu/evk_candidate_relu/lock` held each later verification whose
    trusted reference built that extension until the reference timeout. Here the file is only the name of
    an `flock`: a leftover file, whoever left it, is free to take. `try_acquire` waits for the lock and
    always returns True, so each caller builds in turn; torch's own check (`version != old_version`, then
    ninja) finds a finished build up to date and a half-finished one to complete, so a waiter never imports
    a library its killed predecessor never wrote. The file exists while the lock is held and is removed on
    release (the inode check in `try_acquire` makes that safe), so an unpatched torch process building in
    the same folder still waits for it as for its own baton."""

    def __init__(self, lock_file_path, wait_seconds: float = 0.1, warn_after_seconds: float | None = None) -> None:
        self.lock_file_path = str(lock_file_path)
        self.wait_seconds = wait_seconds
        self.warn_after_seconds = warn_after_seconds
        self.fd: int | None = None

    def try_acquire(self) -> bool:
        import fcntl
        import os

        while True:
            fd = os.open(self.lock_file_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                mine = os.fstat(fd)
                try:
                    now = os.stat(self.lock_file_path)
                except FileNotFoundError:
                    now = None
            except BaseException:
                os.close(fd)
                raise
            if now is not None and (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino):
                # the holder, for a person reading the folder (nothing decides by it: the flock is the lock)
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
                self.fd = fd
                return True
            os.close(fd)  # the file we waited on was released and removed: take the one there now

    def wait(self) -> None:
        """Until whoever holds the lock lets go (never needed by torch: `try_acquire` returns True)."""
        if self.try_acquire():
            self.release()

    def release(self) -> None:
        import contextlib
        import os

        if self.fd is None:
            return
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.lock_file_path)  # still held: no other caller can be taking this inode now
        os.close(self.fd)
        self.fd = None


def use_kernel_batons() -> None:
    """Make this process's torch builds (`cpp_extension.load_inline`, `load`) lock with `KernelBaton`:
    a killed build's lock never holds a later one. Trusted processes only (the sandbox's `load_inline`
    is the verifier's own builder)."""
    from torch.utils import cpp_extension

    cpp_extension.FileBaton = KernelBaton
