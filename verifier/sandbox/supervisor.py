"""Run untrusted code in a fresh child process with time, memory, file-size and process limits.

Layout: the caller starts a small *supervisor* (`python -m verifier.sandbox.supervisor`) in a new session. The
supervisor makes itself a child subreaper (so double-forked grandchildren stay its descendants), starts
the job with resource limits, waits with a deadline, then kills every descendant and reaps them. The
caller also kills the supervisor's whole process group on its own deadline. Nothing is left running,
and the caller never shares an address space with the candidate.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import queue
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verifier.sandbox import lifetime
from verifier.sandbox.procs import descendants

PR_SET_CHILD_SUBREAPER = 36


@dataclass
class Limits:
    """Per-run limits; memory is address space (RLIMIT_AS) in bytes."""

    wall_s: float = 300.0
    memory_bytes: int = 8 * 1024**3
    file_bytes: int = 2 * 1024**3
    max_processes: int = 512
    cpu_s: int | None = None


@dataclass
class SandboxOutcome:
    """How the child ended, as seen from outside."""

    exit_code: int | None
    signal: int | None
    timed_out: bool
    seconds: float
    stderr_tail: str = ""
    marks: list[tuple[float, dict]] = field(default_factory=list)

    @property
    def crashed(self) -> bool:
        return self.signal is not None and not self.timed_out

    def describe(self) -> str:
        if self.timed_out:
            return f"timed out after {self.seconds:.1f} s and was killed"
        if self.signal is not None:
            name = signal.Signals(self.signal).name if self.signal in signal.Signals._value2member_map_ else str(self.signal)
            hint = " (out of memory?)" if self.signal in (signal.SIGKILL, signal.SIGSEGV, signal.SIGABRT) else ""
            return f"crashed with {name}{hint}"
        return f"exited with code {self.exit_code}"


def _kill_tree(root: int) -> None:
    for _ in range(5):
        pids = descendants(root)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        _reap()
        time.sleep(0.02)


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _apply_limits(limits: dict) -> None:
    """Runs in the job process just before exec (the supervisor is single-threaded, so this is safe).

    The job stays in the supervisor's process group, so the caller's group kill reaches it even if the
    supervisor itself dies; descendants that leave the group are found by `_kill_tree`."""
    resource.setrlimit(resource.RLIMIT_AS, (limits["memory_bytes"], limits["memory_bytes"]))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file_bytes"], limits["file_bytes"]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    nproc = limits["max_processes"]
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    if limits.get("cpu_s"):
        resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu_s"], limits["cpu_s"] + 5))


def become_subreaper() -> None:
    """Orphaned descendants re-parent to us (not to init), so `_kill_tree` can find them all."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def finish_job(pid: int, limits: dict, status_path: Path, start: float) -> None:
    """Supervisor side: wait for job `pid` until the deadline, kill every descendant, write the status."""
    deadline = start + limits["wall_s"]
    timed_out = False
    code: int | None = None
    while code is None:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            break
        if time.monotonic() >= deadline:
            timed_out = True
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            code = os.waitstatus_to_exitcode(status)
            break
        time.sleep(0.005)
    seconds = time.monotonic() - start
    _kill_tree(os.getpid())
    result = {"exit_code": code if code >= 0 else None, "signal": -code if code < 0 else None,
              "timed_out": timed_out, "seconds": seconds}
    tmp = status_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result))
    os.replace(tmp, status_path)


def supervise(argv: list[str], limits: dict, status_path: Path) -> int:
    """Supervisor main: start the job, enforce the deadline, kill all descendants, write the status."""
    become_subreaper()
    start = time.monotonic()
    # the supervisor is single-threaded: the job is forked here, in its group, and dies with the supervisor
    proc = lifetime.spawn(argv, own_group=False, launcher=False, preexec_fn=lambda: _apply_limits(limits),
                          pass_fds=tuple(limits.get("pass_fds", ())))
    finish_job(proc.pid, limits, status_path, start)
    proc.returncode = 0
    return 0


def run_sandboxed(
    argv: list[str],
    workdir: Path,
    limits: Limits,
    env: dict[str, str] | None = None,
    on_mark: Callable[[dict], None] | None = None,
) -> SandboxOutcome:
    """Run `argv` under a supervisor in `workdir`; `on_mark` receives the job's progress marks live.

    The job gets a pipe on EVK_PROGRESS_FD for phase marks (JSON lines); its stdout and stderr are kept
    only as a tail for error messages, never parsed as a verdict.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    status_path = workdir / "sandbox_status.json"
    with contextlib.suppress(FileNotFoundError):
        status_path.unlink()
    read_fd, write_fd = os.pipe()
    lim = {
        "wall_s": limits.wall_s, "memory_bytes": limits.memory_bytes, "file_bytes": limits.file_bytes,
        "max_processes": limits.max_processes, "cpu_s": limits.cpu_s, "pass_fds": [write_fd],
    }
    child_env = dict(os.environ if env is None else env)
    child_env["EVK_PROGRESS_FD"] = str(write_fd)
    child_env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    root = str(Path(__file__).resolve().parents[2])
    child_env["PYTHONPATH"] = root + (os.pathsep + child_env["PYTHONPATH"] if child_env.get("PYTHONPATH") else "")
    stderr_path = workdir / "stderr.txt"
    marks: list[tuple[float, dict]] = []
    start = time.monotonic()
    with open(stderr_path, "wb") as err:
        sup = lifetime.spawn(
            [sys.executable, "-m", "verifier.sandbox.supervisor", json.dumps(lim), str(status_path), "--", *argv],
            cwd=workdir, env=child_env, stdout=err, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, pass_fds=(write_fd,),
        )
        os.close(write_fd)
        reader = threading.Thread(target=_read_marks, args=(read_fd, marks, on_mark), daemon=True)
        reader.start()
        try:
            sup.wait(timeout=limits.wall_s + 30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(sup.pid, signal.SIGKILL)
            sup.wait()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(sup.pid, signal.SIGKILL)
        reader.join(timeout=2)
    return _outcome(status_path, stderr_path, limits, time.monotonic() - start, marks)


def _outcome(status_path: Path, stderr_path: Path, limits: Limits, seconds: float, marks: list) -> SandboxOutcome:
    tail = stderr_path.read_bytes()[-3000:].decode(errors="replace") if stderr_path.exists() else ""
    try:
        status = json.loads(status_path.read_text())
    except (OSError, ValueError):
        status = {"exit_code": None, "signal": signal.SIGKILL, "timed_out": seconds >= limits.wall_s, "seconds": seconds}
    return SandboxOutcome(
        exit_code=status.get("exit_code"), signal=status.get("signal"), timed_out=bool(status.get("timed_out")),
        seconds=float(status.get("seconds", seconds)), stderr_tail=tail, marks=marks,
    )


MAX_MARK_BYTES = 64 * 1024**2  # all the marks one job may send: an honest run sends well under 1 MiB
TAIL_BYTES = 64 * 1024  # what is kept of a job's stdout and stderr


def _read_marks(fd: int, marks: list, on_mark: Callable[[dict], None] | None, limit: int | None = None,
                on_overflow: Callable[[], None] | None = None) -> None:
    """JSON-line marks from `fd` into `marks` (and `on_mark`); past `limit` bytes in all, the reader
    stops and calls `on_overflow`: a flood of marks must not fill the parent's memory."""
    buf = b""
    total = 0
    with os.fdopen(fd, "rb", buffering=0) as fh:
        while True:
            chunk = fh.read(65536)
            if not chunk:
                break
            total += len(chunk)
            if limit is not None and total > limit:
                if on_overflow is not None:
                    with contextlib.suppress(Exception):
                        on_overflow()
                break
            buf += chunk
            if len(buf) > 8_000_000:
                buf = b""
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                try:
                    mark = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(mark, dict):
                    continue
                marks.append((time.monotonic(), mark))
                if on_mark is not None:
                    with contextlib.suppress(Exception):
                        on_mark(mark)


def _keep_tail(fd: int, path: Path) -> None:
    """Read `fd` to its end keeping the last TAIL_BYTES, then write them to `path`."""
    tail = bytearray()
    with os.fdopen(fd, "rb", buffering=0) as fh:
        while True:
            try:
                chunk = fh.read(65536)
            except OSError:
                break
            if not chunk:
                break
            tail += chunk
            if len(tail) > 2 * TAIL_BYTES:
                del tail[:-TAIL_BYTES]
    with contextlib.suppress(OSError):
        path.write_bytes(bytes(tail[-TAIL_BYTES:]))


def launch(argv: list[str], **popen_kwargs) -> subprocess.Popen:
    """`subprocess.Popen` from one long-lived thread, dying with this process (`lifetime.spawn`).
    bubblewrap's `--die-with-parent` and our own parent-death signal fire when the *thread* that forked the
    child exits, not the process: a sandbox started from a short-lived thread (the spare refill, a Textual
    worker, a bench thread) was killed the moment that thread ended."""
    return lifetime.spawn(argv, **popen_kwargs)


class LiveJob:
    """A sandboxed worker the parent talks to while it runs: commands in on one pipe, marks out on the
    other. Isolated by bubblewrap when `spec` is given (killing bubblewrap ends the PID namespace and
    every process in it), else under the supervisor above (unisolated: only for `--unsafe-no-isolation`
    and the trusted reference worker)."""

    def __init__(self, argv: list[str], workdir: Path, limits: Limits, env: dict[str, str],
                 spec=None, on_mark: Callable[[dict], None] | None = None, fd_socket: bool = False):
        self.workdir = workdir
        self.limits = limits
        self.on_mark = on_mark
        self.isolated = spec is not None
        self.mount: Any = None  # the job tmpfs held by descriptor (`verifier.sandbox.job_mount.JobMount`), if any
        self.exec_watch: Any = None  # what the job makes executable at run time (`verifier.sandbox.exec_watch`)
        self._marks: queue.Queue = queue.Queue()
        self.marks: list[tuple[float, dict]] = []
        self.started = time.monotonic()
        self.timed_out = False
        progress_r, progress_w = os.pipe()
        control_r, control_w = os.pipe()
        lim = {"wall_s": limits.wall_s, "memory_bytes": limits.memory_bytes, "file_bytes": limits.file_bytes,
               "max_processes": limits.max_processes, "cpu_s": limits.cpu_s, "pass_fds": [progress_w, control_r]}
        env = {**env, "EVK_PROGRESS_FD": str(progress_w), "EVK_CONTROL_FD": str(control_r)}
        # descriptors cross on a Unix socket of their own (device memory shared by descriptor:
        # verifier/correctness/shared_device_memory.py), never on the JSON pipes
        self._fd_socket: socket.socket | None = None
        child_socket: socket.socket | None = None
        if fd_socket:
            self._fd_socket, child_socket = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            lim["pass_fds"] = [progress_w, control_r, child_socket.fileno()]
            env["EVK_FD_SOCKET"] = str(child_socket.fileno())
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
        self.status_path = workdir / "sandbox_status.json" if spec is None else None
        sandbox_fds: list[int] = []  # the syscall filter and the synthetic /etc files, closed once started
        if spec is not None:
            from verifier.sandbox.isolation import sandbox_command

            full, sandbox_fds = sandbox_command(spec, argv)
            preexec = lambda: _apply_limits(lim)  # noqa: E731
        else:
            full = [sys.executable, "-m", "verifier.sandbox.supervisor", json.dumps(lim), str(workdir / "sandbox_status.json"),
                    "--", *argv]
            preexec = None
        # stdout and stderr through a pipe of which only the tail is kept (written to WORKDIR.stderr when
        # the job ends): a job printing without end must not fill the parent's disk or memory
        out_r, out_w = os.pipe()
        self.overflowed = False
        passed = ((progress_w, control_r) + tuple(sandbox_fds)
                  + ((child_socket.fileno(),) if child_socket is not None else ()))
        try:
            self.proc = launch(full, cwd=workdir, env=env, stdout=out_w, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, start_new_session=True,
                               pass_fds=passed, preexec_fn=preexec)
        finally:
            for fd in sandbox_fds:
                os.close(fd)
            os.close(progress_w)
            os.close(control_r)
            os.close(out_w)
            if child_socket is not None:
                child_socket.close()
        self._tail = threading.Thread(target=_keep_tail, args=(out_r, workdir.parent / f"{workdir.name}.stderr"),
                                      daemon=True)
        self._tail.start()
        self._control = control_w
        self._send_lock = threading.Lock()
        self._control_closed = False
        self._reader = threading.Thread(target=_read_marks, args=(progress_r, self.marks, self._marks.put, MAX_MARK_BYTES,
                                                                  self._overflow), daemon=True)
        self._reader.start()

    def _overflow(self) -> None:
        self.overflowed = True
        self.kill()

    def send(self, message: dict) -> bool:
        """One command; False once the worker is finished (the pipe is never written after closing,
        so a late sender cannot hit a reused descriptor)."""
        from verifier.sandbox.channel import send

        with self._send_lock:
            if self._control_closed:
                return False
            return send(self._control, message)

    def receive_fd(self, timeout: float) -> tuple[str, int] | None:
        """The next descriptor the worker passed on its socket, with its tag; None without one in `timeout`
        (the caller owns and closes the descriptor)."""
        from verifier.sandbox.channel import receive_fd

        if self._fd_socket is None:
            return None
        return receive_fd(self._fd_socket.fileno(), timeout)

    def send_fd(self, fd: int, tag: str) -> bool:
        """Pass descriptor `fd` to the worker (its `Channel.receive_fd`)."""
        from verifier.sandbox.channel import send_fd

        return self._fd_socket is not None and send_fd(self._fd_socket.fileno(), fd, tag)

    def expect(self, phases: set[str], timeout: float, on_other: Callable[[dict], None] | None = None,
               abort: Callable[[], bool] | None = None) -> dict | None:
        """The next mark whose phase is in `phases` (others go to `on_other` and `on_mark`); None when the
        worker ended or `timeout` passed (then it is killed and marked timed out), or when `abort()` says
        waiting is pointless (then it is killed, not marked timed out)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.timed_out = True
                self.kill()
                return None
            try:
                mark = self._marks.get(timeout=min(left, 0.25))
            except queue.Empty:
                if self.proc.poll() is not None and not self._reader.is_alive() and self._marks.empty():
                    return None
                if abort is not None and abort():
                    self.kill()
                    return None
                continue
            if self.on_mark is not None:
                with contextlib.suppress(Exception):
                    self.on_mark(mark)
            if mark.get("phase") in phases:
                return mark
            if on_other is not None:
                on_other(mark)

    def job_pid(self) -> int | None:
        """The worker's pid as seen from here (inside bubblewrap it has another one)."""
        for pid in descendants(self.proc.pid):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"verifier.workers.harness" in cmdline and b"bwrap" not in cmdline.split(b"\0")[0]:
                return pid
        return None

    def ended(self) -> bool:
        """The job's process has exited or its mark channel closed: nothing more will come from it."""
        return self.proc.poll() is not None or not self._reader.is_alive()

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            self.proc.kill()

    def finish(self, timeout: float = 10.0) -> SandboxOutcome:
        """Tell the worker to finish, wait briefly, then kill whatever is left; how it ended."""
        self.send({"cmd": "finish"})
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.timed_out = True
        self.kill()
        self.proc.wait()
        with self._send_lock:
            if not self._control_closed:
                self._control_closed = True
                with contextlib.suppress(OSError):
                    os.close(self._control)
        if self._fd_socket is not None:
            self._fd_socket.close()
        if self.exec_watch is not None:
            self.exec_watch.close()
        self._reader.join(timeout=2)
        self._tail.join(timeout=2)
        stderr_path = self.workdir.parent / f"{self.workdir.name}.stderr"
        seconds = time.monotonic() - self.started
        if self.status_path is not None:
            out = _outcome(self.status_path, stderr_path, self.limits, seconds, self.marks)
            out.timed_out = out.timed_out or self.timed_out
            return out
        code = self.proc.returncode
        if code is not None and 128 < code < 160:
            code = -(code - 128)  # bubblewrap reports a child killed by signal N as exit status 128 + N
        tail = stderr_path.read_bytes()[-3000:].decode(errors="replace") if stderr_path.exists() else ""
        return SandboxOutcome(exit_code=code if code is not None and code >= 0 else None,
                              signal=-code if code is not None and code < 0 else None,
                              timed_out=self.timed_out, seconds=seconds, stderr_tail=tail, marks=self.marks)


if __name__ == "__main__":
    _limits = json.loads(sys.argv[1])
    _status = Path(sys.argv[2])
    _argv = sys.argv[sys.argv.index("--") + 1 :]
    sys.exit(supervise(_argv, _limits, _status))
