"""How the trusted side's files reach a candidate's job directory, which the candidate can write in
while the parent works there: fresh directories held by descriptor from creation, hand-over without
following links, checks that a held directory is not a trusted one, and emptying it after use.

`JobFiles` is a collaborator of one verification (`verifier.run.verification._Run` holds it as `files`): the
held directories it made in one job, given only where that job is (`job_dir`, as the trusted side reaches
it, and the job's own tmpfs when it has one). `hand_over`, `check_held` and `drop_held` need nothing else.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import time
from pathlib import Path

from verifier.errors import JobTampered
from verifier.sandbox.job_dir import HeldDir, create_held, create_in_own_fs, empty_dir


class JobFiles:
    """The hand-over directories of one candidate job: `job_dir` is the job directory as the trusted side
    reaches it, `mount_fd` the descriptor of the job's own tmpfs when it has one (`job_mount`)."""

    def __init__(self, job_dir: Path, mount_fd: int | None = None) -> None:
        self.job_dir = job_dir
        self.mount_fd = mount_fd
        self.held: list[HeldDir] = []

    def subdir(self, prefix: str) -> HeldDir:
        """A fresh directory in the job, made in the run's hidden `stage` area, opened there and only
        then renamed into the job (`job_dir.create_held`): the descriptor it returns is what every
        later write and read of it uses, whatever the candidate renames or links meanwhile. Closed by
        `close`."""
        name = f"{prefix}-{secrets.token_hex(8)}"
        try:
            if self.mount_fd is not None:  # the job's own tmpfs, held by descriptor
                held = create_in_own_fs(self.mount_fd, self.job_dir, name)
            else:
                held = create_held(self.job_dir.parent / "stage", self.job_dir, name)
        except OSError as exc:
            raise JobTampered(f"{name} could not be placed in the job ({exc.strerror or exc})") from None
        self.held.append(held)
        return held

    def hand_over(self, src: Path, dst: Path | HeldDir, prefix: str, move: bool = True) -> None:
        """`hand_over` into this job (one place a test can watch every hand-over of a run)."""
        hand_over(src, dst, prefix, move)

    def close(self) -> None:
        """Close every directory `subdir` made (their entries go with the run directory)."""
        held, self.held = self.held, []
        for d in held:
            d.close()


def hand_over(src: Path, dst: Path | HeldDir, prefix: str, move: bool = True) -> None:
    """Files written by the trusted side (one call's inputs: `prefix`.json and `prefix`*.npy; every
    file when `prefix` is empty) into a fresh directory of the job, just before they are needed:
    moved (a rename, no copy) when no one else needs them, copied otherwise. The candidate can
    write in the job while this runs, so the directory is opened without following links and
    every file is created relative to it: a directory swapped for a link cannot redirect the
    trusted side's writes out of the job. What stays trusted is the reference's outputs and
    digests, never these files."""
    names = ([f.name for f in src.iterdir() if f.is_file()] if not prefix
             else [f"{prefix}.json", *(f.name for f in src.glob(f"{prefix}*.npy"))])
    if isinstance(dst, HeldDir):  # the descriptor held since creation: nothing to look up by name
        fd = os.dup(dst.fd)
    else:
        try:
            fd = os.open(dst, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError as exc:
            raise JobTampered(f"{dst.name} was replaced while the verifier handed inputs over ({exc.strerror})") from None
    try:
        for name in names:
            if move:
                try:
                    os.replace(src / name, name, dst_dir_fd=fd)
                    continue
                except OSError as exc:  # the job's own tmpfs (`job_mount`): copied, then removed here
                    if exc.errno != errno.EXDEV:
                        raise
            try:
                out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=fd)
            except FileExistsError:
                raise JobTampered(f"{name} appeared in {dst.name} before the verifier wrote it") from None
            try:
                with open(src / name, "rb") as fin, os.fdopen(out, "wb") as fout:
                    shutil.copyfileobj(fin, fout, 1 << 20)
            except OSError as exc:
                if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                    raise
                raise JobTampered(f"the job directory was full when the verifier handed {name} over (its "
                                  "own tmpfs is capped: `job_dir_mb`); leave room in it") from None
            if move:
                (src / name).unlink()
    finally:
        os.close(fd)


def check_held(held: HeldDir, trusted: Path, run_trusted: Path | None) -> None:
    """Belt and braces: the held descriptor is never a trusted directory, `trusted` (the call's own) or
    `run_trusted` (the run's) (it cannot be, since the trusted side made it; a failure here means a bug or
    a tampered scratch)."""
    mine, theirs = os.fstat(held.fd), os.stat(trusted)
    for st in (theirs, os.stat(run_trusted) if run_trusted is not None else None):
        if st is not None and (mine.st_dev, mine.st_ino) == (st.st_dev, st.st_ino):
            raise JobTampered(f"{held.name} is the verifier's own trusted directory")


def drop_held(held: HeldDir) -> None:
    """Empty a finished hand-over directory through its descriptor (its files are RAM on tmpfs),
    then close it; its now empty entry goes with the run directory."""
    with contextlib.suppress(OSError):
        empty_dir(held.fd, time.monotonic() + 30)
    held.close()
