"""Every process we start dies with us: one place for how a child is tied to its parent's life.

Three layers, none of which needs the child's cooperation:

* **Parent-death signal.** `spawn` sets `PR_SET_PDEATHSIG(SIGKILL)` in the child before it execs, and
  checks that the parent did not die before that (then the child exits at once). Linux sends the signal
  when the *thread* that forked the child ends, not the process, so every child is forked from one
  long-lived launcher thread (`_LAUNCHER`): a child started for a short-lived thread (a Textual worker, a
  build thread, the spare refill) no longer dies when that thread ends, and still dies with the process.
  This covers SIGKILL of the parent, where nothing of ours runs.
* **Process groups we own.** `spawn` starts each child in its own session (unless told otherwise) and
  remembers it; `kill_all` (at exit, and first thing on SIGTERM/SIGINT) kills each remembered child's
  whole group, so grandchildren that have no death signal of their own (compilers under a build, the job
  under a supervisor) go too.
* **Orderly shutdown.** `install_handlers` turns SIGTERM and SIGINT into `Cancelled` (a KeyboardInterrupt)
  raised in the main thread after every child is killed, so `finally` blocks remove temporary
  directories; `exit_code()` is then 128 + the signal (130, 143). A second signal exits at once.

Standard library only: the supervisor (`python -m verifier.sandbox.supervisor`) imports this too.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import ctypes
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable

PR_SET_PDEATHSIG = 1

_LIBC: ctypes.CDLL | None
try:
    _LIBC = ctypes.CDLL(None, use_errno=True)  # loaded before any fork: the child only calls it
except OSError:  # pragma: no cover - not Linux
    _LIBC = None


def die_with_parent(parent: int | None = None, sig: int = signal.SIGKILL) -> None:
    """In a child (a preexec function, or first thing in a worker): be sent `sig` when the thread that
    forked us ends; if `parent` (its pid) is already gone, exit now rather than outlive it."""
    if _LIBC is not None:
        with contextlib.suppress(Exception):
            _LIBC.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    if parent is not None and os.getppid() != parent:
        os._exit(1)


def preexec(extra: Callable[[], None] | None = None) -> Callable[[], None]:
    """A preexec function: the parent-death signal, then `extra` (resource limits, ...)."""
    parent = os.getpid()

    def run() -> None:
        die_with_parent(parent)
        if extra is not None:
            extra()

    return run


_LAUNCHER = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="evokernel-launcher")
_LOCK = threading.RLock()  # the signal handler may run while the main thread holds it
_CHILDREN: dict[int, tuple[subprocess.Popen, bool]] = {}  # pid -> (process, leads its own group)
_STATE = {"signal": 0, "closing": False}


class Cancelled(KeyboardInterrupt):
    """SIGTERM or SIGINT arrived: every child is already killed; unwind and exit with `exit_code()`."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _on_launcher() -> bool:
    return threading.current_thread().name.startswith("evokernel-launcher")


def spawn(argv: list[str], *, own_group: bool = True, launcher: bool = True, **popen_kwargs) -> subprocess.Popen:
    """`subprocess.Popen` that dies with this process: parent-death signal set in the child, forked from
    the launcher thread (`launcher=False` forks from the calling thread: only for a single-threaded
    process such as the supervisor), in its own session when `own_group`, and remembered for `kill_all`."""
    if _STATE["closing"]:
        raise OSError("shutting down: no new processes")
    if own_group:
        popen_kwargs["start_new_session"] = True
    popen_kwargs["preexec_fn"] = preexec(popen_kwargs.get("preexec_fn"))
    if launcher and not _on_launcher():
        proc = _LAUNCHER.submit(subprocess.Popen, argv, **popen_kwargs).result()  # type: ignore[arg-type]  # Popen is generic
    else:
        proc = subprocess.Popen(argv, **popen_kwargs)
    with _LOCK:
        for pid, (old, _group) in list(_CHILDREN.items()):
            if old.returncode is not None:
                del _CHILDREN[pid]
        _CHILDREN[proc.pid] = (proc, bool(popen_kwargs.get("start_new_session")))
    if _STATE["closing"]:  # a shutdown began while it started
        kill(proc)
    return proc


def run(argv: list[str], *, input: str | bytes | None = None, timeout: float | None = None,  # noqa: A002
        **popen_kwargs) -> subprocess.CompletedProcess:
    """`subprocess.run(..., capture_output=True)` through `spawn`; the child's group is killed on a timeout
    or any exception (KeyboardInterrupt included)."""
    popen_kwargs.setdefault("stdout", subprocess.PIPE)
    popen_kwargs.setdefault("stderr", subprocess.PIPE)
    if input is not None:
        popen_kwargs["stdin"] = subprocess.PIPE
    else:
        popen_kwargs.setdefault("stdin", subprocess.DEVNULL)
    proc = spawn(argv, **popen_kwargs)
    try:
        out, err = proc.communicate(input=input, timeout=timeout)
    except subprocess.TimeoutExpired:
        kill(proc)
        proc.communicate()
        raise
    except BaseException:
        kill(proc)
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def kill(proc: subprocess.Popen) -> None:
    """SIGKILL `proc` and, when it leads one, its process group."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(proc.pid) == proc.pid:
            os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        proc.kill()


def kill_all() -> int:
    """Kill every child `spawn` started that is still running, with its group; how many."""
    with _LOCK:
        held = list(_CHILDREN.values())
    killed = 0
    for proc, group in held:
        if group:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # the group can outlive its leader
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
                proc.kill()
            killed += 1
    return killed


atexit.register(kill_all)


def shutting_down() -> bool:
    return bool(_STATE["closing"])


def exit_code(default: int = 130) -> int:
    """128 + the signal that asked us to stop (130 SIGINT, 143 SIGTERM), else `default`."""
    return 128 + _STATE["signal"] if _STATE["signal"] else default


def signal_name() -> str:
    return signal.Signals(_STATE["signal"]).name if _STATE["signal"] else "SIGINT"


def _stop(signum: int) -> None:
    first = not _STATE["signal"]
    _STATE["signal"] = _STATE["signal"] or signum
    _STATE["closing"] = True
    kill_all()
    if not first:
        os._exit(128 + signum)


def install_handlers(on_signal: Callable[[int], None] | None = None) -> bool:
    """SIGTERM and SIGINT: kill every child, then raise `Cancelled` in the main thread (or, with
    `on_signal`, call it instead: an event loop that must close itself). False off the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return False

    def handler(signum: int, _frame) -> None:
        _stop(signum)
        if on_signal is not None:
            on_signal(signum)
            return
        raise Cancelled(signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, handler)
    return True


def exit_within(seconds: float, code: int) -> threading.Timer:
    """After a cancelled command has unwound (its children killed, its temporary directories removed, its
    log flushed event by event), bound what is left of the exit: the interpreter joins every non-daemon
    thread (a thread pool's worker still waiting on something) before its exit handlers run, and one that
    does not return kept a SIGINT'd `resume` alive past a minute under CI's load. A daemon timer ends the
    process with `code` if it is still here after `seconds` (the child processes were killed already)."""
    def end() -> None:
        kill_all()
        os._exit(code)

    timer = threading.Timer(seconds, end)
    timer.daemon = True
    timer.start()
    return timer


def wait_gone(pids: list[int], timeout: float = 5.0) -> list[int]:
    """Those of `pids` still alive after `timeout` seconds (tests and the GPU check)."""
    from verifier.sandbox.procs import pid_alive

    deadline = time.monotonic() + timeout
    left = [p for p in pids if pid_alive(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [p for p in left if pid_alive(p)]
    return left
