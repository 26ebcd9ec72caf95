"""A warm worker: a clean process that has imported torch once and forks a fresh sandbox per candidate.

Importing torch costs about a second per candidate; interactive tuning pays it once per app instead.
The zygote is never the app: it is started with `python -m verifier.zygote`, imports only torch, numpy
and the harness, starts no threads, and for each request forks a *supervisor* (new session, child
subreaper) which forks the job with the sandbox's resource limits. Each candidate therefore still runs
in a fresh process of its own. Whenever the zygote cannot serve, callers fall back to a cold spawn.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from verifier.sandbox import _apply_limits, become_subreaper, finish_job


class Zygote:
    """Parent side: owns one zygote process; `launch` returns the forked supervisor's pid or None."""

    def __init__(self, env: dict[str, str] | None = None):
        self._env = env
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._sock: socket.socket | None = None
        self._broken = False

    def _start(self) -> bool:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = dict(os.environ if self._env is None else self._env)
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env.pop("EVK_PROGRESS_FD", None)
        # numpy's OpenBLAS would start a worker thread at import; a forking process must have none.
        env["OPENBLAS_NUM_THREADS"] = "1"
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "verifier.zygote", str(child.fileno())],
                pass_fds=(child.fileno(),), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True,
            )
        except OSError:
            return False
        finally:
            child.close()
        parent.settimeout(120)
        try:
            ready = json.loads(parent.recv(4096) or b"{}")
        except (OSError, ValueError):
            ready = {}
        if not ready.get("ready"):
            self.close()
            return False
        self._sock = parent
        return True

    def ensure_started(self) -> bool:
        """Start the zygote now (it takes about a second) instead of at the first verification."""
        with self._lock:
            if self._broken:
                return False
            if self._proc is None or self._proc.poll() is not None:
                self._broken = not self._start()
            return not self._broken

    def launch(self, job_dir: str, limits: dict, status_path: Path, progress_fd: int) -> int | None:
        with self._lock:
            if self._broken:
                return None
            if (self._proc is None or self._proc.poll() is not None) and not self._start():
                self._broken = True
                return None
            assert self._sock is not None
            request = json.dumps({"job_dir": job_dir, "limits": limits, "status": str(status_path)}).encode()
            try:
                socket.send_fds(self._sock, [request], [progress_fd])
                reply = json.loads(self._sock.recv(4096) or b"{}")
            except (OSError, ValueError):
                self.close()
                return None
            pid = reply.get("pid")
            return int(pid) if isinstance(pid, int) else None

    def close(self) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
            self._sock = None
        if self._proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                self._proc.wait(timeout=5)
            self._proc = None


def _serve(fd: int) -> None:
    """Zygote main: preload, say ready, then fork one supervisor per request until the parent goes away."""
    sock = socket.socket(fileno=fd)
    import numpy  # noqa: F401
    import torch  # noqa: F401

    import verifier.backends.cpu  # noqa: F401
    import verifier.build  # noqa: F401
    import verifier.harness  # noqa: F401

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # supervisors are reaped automatically
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:
        sock.send(json.dumps({"ready": False, "threads": threads}).encode())
        return
    sock.send(json.dumps({"ready": True}).encode())
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 65536, 4)
        except OSError:
            return
        if not msg:
            return
        req = json.loads(msg)
        pid = os.fork()
        if pid == 0:
            sock.close()
            _supervise_forked(req, fds[0] if fds else None)
        for f in fds:
            os.close(f)
        sock.send(json.dumps({"pid": pid}).encode())


def _supervise_forked(req: dict, progress_fd: int | None) -> None:
    """In the forked supervisor: new session, subreaper, fork the job with limits, wait, clean up. Never returns."""
    try:
        os.setsid()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        become_subreaper()
        start = time.monotonic()
        job_dir = Path(req["job_dir"])
        pid = os.fork()
        if pid == 0:
            _run_job(job_dir, req["limits"], progress_fd)
        if progress_fd is not None:
            os.close(progress_fd)
        finish_job(pid, req["limits"], Path(req["status"]), start)
    finally:
        os._exit(0)


def _run_job(job_dir: Path, limits: dict, progress_fd: int | None) -> None:
    code = 4
    try:
        _apply_limits(limits)
        os.chdir(job_dir)
        err = os.open(job_dir / "stderr.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(err, 1)
        os.dup2(err, 2)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        if progress_fd is not None:
            os.environ["EVK_PROGRESS_FD"] = str(progress_fd)
        sys.argv = ["verifier.harness", str(job_dir)]
        from verifier import harness

        code = harness.main()
    finally:
        os._exit(code)


if __name__ == "__main__":
    _serve(int(sys.argv[1]))
