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
