"""File locks between builders of one artefact: processes (bench workers, the trusted side's requests)
and threads (the prewarm, the starter's prebuild, a verification) that share a build root. `flock` on a
file opened per caller excludes threads of one process as well as other processes, and a killed holder
lets go at once."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path


@contextlib.contextmanager
def locked(path: Path):
    """Serialise builds of one artefact across processes (bench workers share a build root)."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def try_lock(path: Path):
    """The open lock file when this caller now holds it exclusively, None when another holds it."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    fh = open(path, "a+")  # noqa: SIM115 - held across a generator's yield, closed by `unlock`
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
