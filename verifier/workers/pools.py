"""The processes a verification runs in, and their pools: the environment and limits a sandboxed or
trusted worker gets, the private scratch where run directories live, the warm trusted reference
workers (`_REFERENCE`), the one pre-started spare candidate sandbox (`_SPARES`), how a candidate
sandbox is started, and `prewarm` (a spare sandbox and the common shared builds at app start).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

from verifier.backends import Backend, get_backend
from verifier.build.locks import keep_locks_outside
from verifier.config import VerifyConfig
from verifier.errors import VerifierError
from verifier.keys import content_key
from verifier.sandbox import lifetime
from verifier.sandbox.job_dir import discard
from verifier.sandbox.supervisor import Limits, LiveJob


def _threads(config: VerifyConfig) -> int:
    """One thread count for both sides of every paired measurement, recorded in the verdict: by default
    the cores both sides are pinned to (every core but the parent's when there are two or more)."""
    from verifier.clock.cpu_accounting import worker_cpus

    return max(1, int(config.threads or len(worker_cpus() or ()) or os.cpu_count() or 1))


def _limits(config: VerifyConfig, wall_s: float, backend: Backend | None = None) -> Limits:
    """CUDA reserves far more address space than it uses, so GPU runs get no RLIMIT_AS (-1: unlimited)."""
    memory = -1 if backend is not None and backend.device == "cuda" else int(config.memory_gb * 1024**3)
    file_bytes = int(max(2.0, config.memory_gb) * 1024**3)
    return Limits(wall_s=wall_s, memory_bytes=memory, file_bytes=file_bytes, max_processes=config.max_processes)


def _clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """What a sandboxed worker gets: no credentials, no paths to the person's state."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "TMPDIR": "/tmp", "HOME": "/tmp",
           "PYTHONDONTWRITEBYTECODE": "1", "OPENBLAS_NUM_THREADS": "1"}
    for key in ("CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "NVIDIA_VISIBLE_DEVICES"):
        if os.environ.get(key):
            env[key] = os.environ[key]
    env.update(extra or {})
    return env


def _trusted_env() -> dict[str, str]:
    env = dict(os.environ)
    for key in ("EVK_PROGRESS_FD", "EVK_CONTROL_FD"):
        env.pop(key, None)
    env["OPENBLAS_NUM_THREADS"] = "1"
    return env


def isolation_mode(config: VerifyConfig) -> bool:
    """True when candidates will run isolated; raises VerifierError when isolation is wanted but
    unavailable (never a silent downgrade)."""
    if not config.isolate:
        return False
    from verifier.sandbox.isolation import unavailable_reason

    reason = unavailable_reason()
    if reason:
        raise VerifierError(reason)
    return True


# ---------------------------------------------------------------------------------------------------
# scratch and workers


@functools.cache
def _scratch() -> Path:
    from verifier.sandbox.isolation import clean_stale_runs, private_scratch

    scratch = private_scratch()
    (scratch / "runs").mkdir(exist_ok=True)
    clean_stale_runs(scratch)
    return scratch


#: held while a run directory is made and while the exit sweep runs, so none is made behind the sweep
_RUNS_LOCK = threading.Lock()
_CLOSING = threading.Event()


def _new_run_dir() -> Path:
    with _RUNS_LOCK:
        if _CLOSING.is_set():
            raise VerifierError("the verifier is shutting down: no new sandbox is started")
        run = _scratch() / "runs" / f"run-{uuid.uuid4().hex}"
        run.mkdir(mode=0o700)
        (run / ".owner").write_text(str(os.getpid()))
    return run


def _sweep_own_runs() -> None:
    """At exit, after the pools have stopped their jobs: remove every run directory this process made.
    A spare sandbox being started on its daemon thread when the process was told to stop (SIGTERM while
    the workers start) made its directory after the pools' own `close`; without this sweep it stayed
    until the next verification's `clean_stale_runs`. No run directory is made after it (`_CLOSING`)."""
    with _RUNS_LOCK:
        _CLOSING.set()
        if not _scratch.cache_info().currsize:  # this process never made one
            return
        scratch = _scratch()
    from verifier.sandbox.isolation import run_owner

    for run in (scratch / "runs").glob("run-*"):
        if run_owner(run) == os.getpid():
            # a few seconds each at exit: what is left is moved to trash/ for the next `clean_stale_runs`
            discard(run, scratch / "trash", budget_s=5.0)


# registered before the pools below: atexit runs last-registered first, so this runs after their `close`
atexit.register(_sweep_own_runs)


class _ReferenceWorkers:
    """Warm trusted reference workers, one per task source and settings; restarted when one dies."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._workers: dict[str, tuple[LiveJob, Path]] = {}
        atexit.register(self.close)

    def get(self, reference_source: str, be: Backend, config: VerifyConfig) -> tuple[LiveJob, Path]:
        key = content_key("refworker-v1", reference_source, be.name, be.device, _threads(config), config.memory_gb)
        with self._lock:
            held = self._workers.pop(key, None)
            if held is not None and held[0].proc.poll() is None:
                return held
            if held is not None:
                held[0].kill()
            while len(self._workers) >= 2:
                _, (job, _path) = self._workers.popitem()
                job.finish(timeout=2)
        home = _scratch() / "reference" / key
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        task = home / "task.py"
        task.write_text(reference_source)
        # a reference that builds a torch extension builds it in the verifier's own folder (hidden from every
        # sandbox), where every builder locks with `KernelBaton`: no stale or foreign baton file can hold it
        env = {**_trusted_env(), **be.child_env(), "TORCH_EXTENSIONS_DIR": str(config.root() / "torch_extensions")}
        job = LiveJob([sys.executable, "-m", "verifier.workers.reference_worker"], home,
                      _limits(config, 24 * 3600, be), env,
                      fd_socket=be.device == "cuda")  # receives the candidate's shared buffers (GPU data path)
        return job, task

    def give_back(self, reference_source: str, be: Backend, config: VerifyConfig, held: tuple[LiveJob, Path]) -> None:
        key = content_key("refworker-v1", reference_source, be.name, be.device, _threads(config), config.memory_gb)
        with self._lock:
            if held[0].proc.poll() is None and config.warm_worker:
                self._workers[key] = held
                return
        held[0].finish(timeout=2)

    def close(self) -> None:
        with self._lock:
            workers, self._workers = list(self._workers.values()), {}
        for job, _ in workers:
            job.finish(timeout=2)


_REFERENCE = _ReferenceWorkers()


class _Spares:
    """One pre-started candidate sandbox that has imported torch and waits for a job: each is used
    once, so every candidate still runs in a fresh process and a fresh set of namespaces."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spare: tuple[str, LiveJob, Path] | None = None
        atexit.register(self.close)

    def take(self, key: str) -> tuple[LiveJob, Path] | None:
        with self._lock:
            spare, self._spare = self._spare, None
        if spare is None:
            return None
        if spare[0] == key and spare[1].proc.poll() is None:
            return spare[1], spare[2]
        release(spare[1], spare[2])
        return None

    def refill(self, key: str, start: Callable[[], tuple[LiveJob, Path]]) -> None:
        def run() -> None:
            with contextlib.suppress(Exception):
                job, job_dir = start()
                with self._lock:
                    old, self._spare = self._spare, (key, job, job_dir)
                if old is not None:
                    release(old[1], old[2])

        threading.Thread(target=run, name="evokernel-spare-sandbox", daemon=True).start()

    def close(self) -> None:
        with self._lock:
            spare, self._spare = self._spare, None
        if spare is not None:
            release(spare[1], spare[2])


_SPARES = _Spares()


def _sandbox_spec(job_dir: Path, config: VerifyConfig, be: Backend):
    from verifier.sandbox.isolation import SandboxSpec, default_hidden, gpu_device_nodes

    root = config.root()
    hidden = [*default_hidden(), root, _scratch(), *map(Path, config.hidden_paths)]
    from verifier.sandbox.job_mount import job_bytes

    return SandboxSpec(writable=[job_dir], readonly=[root / "shared"], hidden=hidden,
                       devices=gpu_device_nodes() if be.device == "cuda" else [],
                       tmp_bytes=int(config.sandbox_tmp_mb * 1024**2),
                       job_bytes=job_bytes(config.memory_gb, config.job_dir_mb),
                       no_anonymous_exec=no_anonymous_exec(config))


def no_anonymous_exec(config: VerifyConfig) -> bool:
    """The strict policy's sandboxes make no anonymous executable memory (`anon-exec` refused by the syscall
    filter as well as by the audit); `--allow anon-exec` lifts it."""
    return config.policy == "strict" and "anon-exec" not in (config.allow or [])


def _start_candidate(config: VerifyConfig, be: Backend, isolated: bool, wait: bool) -> tuple[LiveJob, Path]:
    run = _new_run_dir()
    job_dir = run / "job"
    job_dir.mkdir(mode=0o700)
    (config.root() / "shared").mkdir(parents=True, exist_ok=True)
    keep_locks_outside(config.root() / "shared")  # the trusted builders' locks, out of the sandbox's sight
    spec = _sandbox_spec(job_dir, config, be) if isolated else None
    argv = [sys.executable, "-m", "verifier.workers.harness", str(job_dir), *(["--wait"] if wait else []),
            *(["--warm-cuda"] if wait and be.device == "cuda" else [])]
    env = _clean_env(be.child_env()) if isolated else {**_trusted_env(), **be.child_env()}
    wall = config.build_timeout_s + config.run_timeout_s + (3600 if wait else 0)
    # a GPU job gets a socket for descriptors: its results go to the trusted side as shared device memory;
    # every job's first descriptor on it is the exec watch's listener (`verifier.sandbox.exec_watch`)
    watch = exec_watch_on()
    if watch:
        env = {**env, "EVK_EXEC_WATCH": "1"}
    job = LiveJob(argv, job_dir, _limits(config, wall, be), env, spec=spec, fd_socket=watch or be.device == "cuda")
    if watch:
        try:
            job.exec_watch = _take_exec_watch(job, _followed_files(config, job_dir))
        except VerifierError:
            job.kill()
            discard(run, run.parent.parent / "trash")
            raise
    if spec is not None and spec.job_bytes > 0:
        # the job's own tmpfs, held by descriptor before the harness runs any candidate code (it waits)
        from verifier.sandbox.job_mount import attach

        try:
            job.mount = attach(job.proc.pid, job_dir.resolve(), os.stat(job_dir).st_dev)
        except OSError as exc:
            job.kill()
            discard(run, run.parent.parent / "trash")
            raise VerifierError(f"the sandbox could not start: {exc}") from None
    return job, job_dir


def exec_watch_on() -> bool:
    """Whether candidate jobs run under the exec watch: wherever its filter exists (x86-64), unless
    `EVOKERNEL_EXEC_WATCH=0` (a kernel without seccomp user notification, Linux < 5.5)."""
    from verifier.sandbox.exec_watch import watch_program

    return os.environ.get("EVOKERNEL_EXEC_WATCH") != "0" and watch_program() is not None


def _followed_files(config: VerifyConfig, job_dir: Path) -> Callable[[str], bool]:
    """Which files mapped executable the exec watch follows: those the audit reads as the candidate's
    (`mapped_audit.is_candidate_writable`: the job directory, the private tmpfs mounts, anything outside
    the read-only trees), and every deleted file or memfd."""
    from verifier.policy.mapped_audit import is_candidate_writable
    from verifier.sandbox.isolation import visible_trees

    trusted = [*visible_trees(), config.root() / "shared", Path("/dev")]
    inner = job_dir.resolve()

    def follows(path: str) -> bool:
        return (path.endswith(" (deleted)") or not path.startswith("/")
                or is_candidate_writable(path, inner, trusted))
    return follows


def _take_exec_watch(job: LiveJob, follows: Callable[[str], bool] | None = None, timeout: float = 60.0):
    """The listener the harness sends before it runs any candidate code, watched from here on. A job that
    sends none (or something else) does not run: code it made at run time would go unseen."""
    from verifier.sandbox.exec_watch import TAG, ExecWatch, is_listener

    got = job.receive_fd(timeout)
    if got is None or got[0] != TAG or not is_listener(got[1]):
        if got is not None:
            os.close(got[1])
        raise VerifierError("the sandbox could not start its exec watch (seccomp user notification, Linux >= 5.5): "
                            "set EVOKERNEL_EXEC_WATCH=0 to run without it, and code made within a forward goes unseen")
    return ExecWatch(got[1], tracks=follows)


def job_paths(job: LiveJob, job_dir: Path) -> tuple[Path, Path]:
    """(how the trusted side reaches the job directory, where the sandbox sees it): the held tmpfs's
    descriptor path for an isolated job (`job_mount`), else the directory itself for both."""
    mount = getattr(job, "mount", None)
    return (mount.path, mount.inner) if mount is not None else (job_dir, job_dir)


def release(job: LiveJob, job_dir: Path) -> None:
    """Kill a job that was never used (a spare) and free what it held: its tmpfs, its run directory."""
    job.kill()
    if getattr(job, "exec_watch", None) is not None:
        job.exec_watch.close()
    if getattr(job, "mount", None) is not None:
        job.mount.close()
    discard(job_dir.parent, job_dir.parent.parent.parent / "trash")


def _spare_key(config: VerifyConfig, be: Backend, isolated: bool) -> str:
    return content_key("spare-v1", be.name, be.device, isolated, str(config.root()), config.memory_gb,
                   config.max_processes, config.hidden_paths, config.build_timeout_s, config.run_timeout_s,
                   config.sandbox_tmp_mb, config.job_dir_mb, no_anonymous_exec(config))


def prewarm(backend: str = "cpu", config: VerifyConfig | None = None) -> None:
    """Start a spare sandbox and build (trusted) the common precompiled headers and bindings (blocking)."""
    config = config or VerifyConfig()
    be = get_backend(backend)
    if be.availability():
        return
    try:
        isolated = isolation_mode(config)
    except VerifierError:
        return
    if config.warm_worker and os.environ.get("EVOKERNEL_WARM_WORKER") != "0":
        key = _spare_key(config, be, isolated)
        _SPARES.refill(key, lambda: _start_candidate(config, be, isolated, wait=True))
    if be.name in ("cpu", "cuda"):
        proc = lifetime.spawn([sys.executable, "-m", "verifier.build.shared_artefacts", str(config.root() / "shared")],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env={**_trusted_env(), "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
        atexit.register(_stop, proc)
        try:
            proc.wait(timeout=900)
        except subprocess.TimeoutExpired:
            _stop(proc)


def _stop(proc) -> None:
    """Leave nothing running when the app exits mid-prewarm (a half-built header is never renamed in)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        proc.wait()
