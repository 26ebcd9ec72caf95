"""Trusted shared builds belong to the verification that asked for them.

A sandboxed build asks the trusted side for a shared artefact (a precompiled header, a pybind11 TU);
the trusted side runs `python -m verifier.build.shared_artefacts --shared ...` in its own session. Without an owner such
a build outlives the verdict: a candidate that asks for several and finishes at once leaves compilers
running and half-written `.gch` files behind. `TrustedBuilds` is that owner, one per `_Run`:

* at most `MAX_CONCURRENT` of these builds run at once in this process (all runs together);
* `close()` kills the process group of every build still running (they start with
  `start_new_session=True`, so the compilers they spawn are in the group) and waits for them;
* artefacts are written to `<name>.tmp<pid>` and renamed on success (`verifier/build/split_build.py`), so a killed
  build leaves only temp names with its pid: `close()` removes those and counts them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from verifier.sandbox import lifetime

MAX_CONCURRENT = 2  # trusted compilers outside the sandbox at once, over every verification in this process
_SLOTS = threading.BoundedSemaphore(MAX_CONCURRENT)


class TrustedBuilds:
    """The trusted build processes of one verification."""

    def __init__(self, shared_root: Path):
        self.shared_root = Path(shared_root)
        self.procs: list[subprocess.Popen] = []
        self.closed = False
        self.killed = 0
        self.leftovers = 0
        self._lock = threading.Lock()

    def run(self, argv: list[str], env: dict[str, str], log, timeout: float) -> int | None:
        """Run one build to the end (in the caller's thread), waiting for a slot first; None when the
        verification closed before it finished, or it timed out (then it is killed)."""
        while not _SLOTS.acquire(timeout=0.2):
            if self.closed:
                return None
        try:
            with self._lock:
                if self.closed:
                    return None
                # forked from the launcher thread: this build thread ends before the verification does
                proc = lifetime.spawn(argv, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
                self.procs.append(proc)
            try:
                return proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self._kill(proc)
                return None
        finally:
            _SLOTS.release()

    def alive(self) -> list[int]:
        return [p.pid for p in self.procs if p.poll() is None]

    def _kill(self, proc: subprocess.Popen) -> bool:
        if proc.poll() is not None:
            return False
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
        return True

    def close(self) -> None:
        """Kill every build of this verification still running and remove what they left half-written."""
        with self._lock:
            self.closed = True
            procs = list(self.procs)
        for proc in procs:
            if self._kill(proc):
                self.killed += 1
            # the group outlives its leader if a compiler was mid-fork: one more sweep, by group id
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        if procs:
            self.leftovers += remove_leftovers(self.shared_root, [p.pid for p in procs])


def remove_leftovers(root: Path, pids: list[int]) -> int:
    """Remove `*.tmp<pid>*` files (temp names of unfinished artefacts) of the given build pids under
    `root`; returns how many were removed."""
    if not pids or not root.is_dir():
        return 0
    marks = tuple(f".tmp{pid}" for pid in pids)
    removed = 0
    deadline = time.monotonic() + 5.0
    for dirpath, _dirs, files in os.walk(root):
        if time.monotonic() > deadline:
            break
        for name in files:
            if any(m in name and (name.endswith(m) or name[name.index(m) + len(m)] == ".") for m in marks):
                with contextlib.suppress(OSError):
                    Path(dirpath, name).unlink()
                    removed += 1
    return removed


def run_in_background(builds: TrustedBuilds, argv: list[str], env: dict[str, str], log_path: Path, timeout: float,
                      done: Callable[[], object], name: str) -> threading.Thread:
    """`builds.run` in a daemon thread; `done()` is called afterwards whatever happened."""

    def body() -> None:
        try:
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                log_path.parent.mkdir(parents=True, exist_ok=True)
                with open(log_path, "w") as log:
                    builds.run(argv, env, log, timeout)
        finally:
            done()

    thread = threading.Thread(target=body, name=name, daemon=True)
    thread.start()
    return thread
