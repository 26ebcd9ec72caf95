"""Where verification jobs (build + run) execute: in-process, a local process pool, or Ray.

Every executor has the same small surface, `submit(fn, *args, **kwargs) -> Future` and `map`, so the
bench and the loop do not care where a candidate is built and timed. `fn` must be a module-level
function (it is pickled by reference for the pool and Ray). `executor_verify` turns an executor into
the `verify_fn` a `Session` calls: submit the job and wait, then replay the gates to the session.

Ray is imported only when a Ray executor is made; it is an optional extra (`pip install
evokernel-tui[ray]`).
"""

from __future__ import annotations

import contextlib
import inspect
import multiprocessing
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from concurrent.futures import ProcessPoolExecutor as _StdPool
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar

from core.fsutil import first_line

if TYPE_CHECKING:
    from verifier import VerifyConfig
    from verifier.result import VerificationResult

P = ParamSpec("P")
T = TypeVar("T")

EXECUTORS = ("inprocess", "pool", "ray")
GPU_BACKENDS = ("cuda", "triton")
_PROJECT_ROOT = Path(__file__).resolve().parent.parent


class ExecutorError(Exception):
    """An executor that cannot start; the message says what to install or change."""


class Executor(Protocol):
    name: str
    workers: int

    def submit(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> Future[T]: ...

    def map(self, fn: Callable[..., T], *iterables: Iterable[object]) -> list[T]: ...

    def shutdown(self) -> None: ...

    def describe(self) -> str: ...  # a line for the bench's progress: workers, devices, the cluster

    def __enter__(self) -> Any: ...

    def __exit__(self, *exc: Any) -> None: ...


class _Base:
    name = "base"
    workers = 1

    def submit(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        raise NotImplementedError

    def map(self, fn: Callable[..., T], *iterables: Iterable[object]) -> list[T]:
        """Submit every job first, then collect in order (so jobs overlap)."""
        futures = [self.submit(fn, *args) for args in zip(*iterables, strict=True)]
        return [f.result() for f in futures]

    def shutdown(self) -> None:
        return None

    def describe(self) -> str:
        return f"{self.name} ({self.workers} worker{'s' if self.workers != 1 else ''})"

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()


class InProcessExecutor(_Base):
    """Runs each job at once in the calling thread: tests, and fakes that cannot be pickled."""

    name = "inprocess"

    def submit(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        fut: Future[T] = Future()
        try:
            fut.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # the caller sees it from fut.result(), as with the other executors
            fut.set_exception(exc)
        return fut


def _pin_gpu(slots: Any) -> None:
    """Pool initializer: take one GPU id for the life of this worker (before torch is imported)."""
    os.environ["CUDA_VISIBLE_DEVICES"] = slots.get()


def _watch_parent(parent: int) -> None:
    """Pool worker: end (with every sandbox and worker this one started) as soon as the process that
    made the pool is gone. A thread polling the parent, not a parent-death signal: the pool forks its
    workers from whichever thread submits first, and that signal fires when that *thread* ends."""
    import threading
    import time

    from core import lifetime

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.2)
        lifetime.kill_all()
        os._exit(1)

    threading.Thread(target=watch, name="evokernel-parent-watch", daemon=True).start()


_PROGRESS: Any = None  # in a pool worker: the queue its jobs' gate progress goes back to the parent on
_STARTED: Any = None  # in a pool worker: where each job says it has started, before it runs


def _worker_init(parent: int, slots: Any = None, progress: Any = None, started: Any = None) -> None:
    global _PROGRESS, _STARTED
    _watch_parent(parent)
    if slots is not None:
        _pin_gpu(slots)
    _PROGRESS, _STARTED = progress, started


def started_job(token: int, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Pool worker: say "`token` has started" (a synchronous pipe write, in the parent's pipe before `fn`
    can kill this process), then run `fn`. When a worker dies, the parent tells the jobs that were running
    in it (suspects) from those that only waited in the broken pool's queue (not at fault)."""
    if _STARTED is not None:
        _STARTED.put(token)
    return fn(*args, **kwargs)


def streamed_job(token: int, job: Callable[..., T], *args: Any) -> T:
    """Pool worker: `job(*args, on_gate=...)` with each gate state and progress line (trial k/N, timing
    round r) put on the pool's progress queue under `token`, so the parent shows them as they happen."""
    queue = _PROGRESS

    def on_gate(*event: Any) -> None:
        if queue is not None:
            with contextlib.suppress(Exception):  # progress is best effort; the verdict is the result
                queue.put((token, event))

    try:
        return job(*args, on_gate=on_gate)
    finally:
        if queue is not None:  # the end of this job's reports: the caller waits for it before returning
            with contextlib.suppress(Exception):
                queue.put((token, None))


@dataclass
class _Attempt:
    """One submitted job as the pool carries it across broken pools: its caller's future, what to run,
    and how many more times it may run after a break (as a suspect, and as a bystander)."""

    outer: Future[Any]
    fn: Callable[..., Any]
    args: tuple
    kwargs: dict
    retries: int
    requeues: int
    suspect: bool = False


class ProcessPoolExecutor(_Base):
    """A local pool of `workers` spawned processes (spawn: no forked torch or thread state).

    With `gpus` (device ids), each worker is pinned to one of them through CUDA_VISIBLE_DEVICES,
    so jobs never share a GPU; there are then at most as many workers as GPUs.

    A worker that dies (killed for memory, a crash in a native library) breaks a standard pool for good:
    every job in it fails and nothing more can be submitted. Here the pool is built again (every GPU back
    in its slots) and its jobs run again, so one bad verification costs its own task, not the run:
    - a job that had only waited in the broken pool's queue runs again at no cost to it;
    - a job that was running when its worker died is a suspect: suspects run again one at a time (never
      two side by side), each up to `JOB_RETRIES` times. The killer breaks the pool again while it is the
      only suspect running, so it alone spends its retries and fails; the jobs that ran beside it the first
      time succeed on their next turn. (Charging every job in a broken pool made a killer that was tried
      three times take the jobs beside it down with it: CI, session 24.)
    """

    name = "pool"
    #: how many times a job that was running when the pool broke runs again (one at a time with the other
    #: suspects, so the killer fails once it has and the jobs beside it are only repeated)
    JOB_RETRIES = 2
    #: how many times a job that only waited in a broken pool's queue is queued again (a bound, not a charge)
    REQUEUES = 16

    def __init__(self, workers: int = 2, gpus: list[str] | None = None):
        if workers < 1:
            raise ExecutorError("--workers must be 1 or more")
        ctx = multiprocessing.get_context("spawn")
        self.gpus = pool_plan(workers, list(gpus)) if gpus else []
        slots = None
        if self.gpus:
            workers = len(self.gpus)
            slots = ctx.Queue()
            for gpu in self.gpus:
                slots.put(gpu)
        self.workers = workers
        # gate progress from the workers' verifications, routed to whoever waits on each (`stream`)
        self._progress = ctx.Queue()
        self._listeners: dict[int, tuple[Callable[..., None], Any]] = {}
        self._tokens = iter(range(1, 1 << 62))
        # which job attempts have started in a worker (`started_job`); read when an attempt ends
        self._started_marks = ctx.SimpleQueue()
        self._started: set[int] = set()
        self._marks_lock = threading.Lock()
        # suspects waiting for their turn, and whether one is running now (`_next_suspect`)
        self._suspects: list[_Attempt] = []
        self._suspect_running = False
        self._ctx, self._slots = ctx, slots
        self._lock = threading.Lock()
        self._closed = False
        self.rebuilt = 0  # how many times a broken pool was built again
        self._pool = self._new_pool()
        threading.Thread(target=self._route_progress, name="evokernel-pool-progress", daemon=True).start()

    def _new_pool(self) -> _StdPool:
        pool = _StdPool(max_workers=self.workers, mp_context=self._ctx, initializer=_worker_init,
                        initargs=(os.getpid(), self._slots, self._progress, self._started_marks))
        if self.gpus:
            # start every worker now, side by side (the pool starts one per job that finds none idle), so
            # every GPU's worker is ready when the first jobs come, not only the first one's
            for _ in range(self.workers):
                pool.submit(os.getpid)
        return pool

    def _rebuild(self, broken: _StdPool) -> bool:
        """A new pool in place of `broken` (once, however many of its jobs report it); False once shut down."""
        import queue

        with self._lock:
            if self._closed:
                return False
            if self._pool is not broken:
                return True
            with contextlib.suppress(Exception):
                broken.shutdown(wait=False, cancel_futures=True)
            if self._slots is not None:  # every worker of a broken pool is gone: every GPU is free again
                with contextlib.suppress(queue.Empty, OSError, ValueError):
                    while True:
                        self._slots.get_nowait()
                for gpu in self.gpus:
                    self._slots.put(gpu)
            self._pool = self._new_pool()
            self.rebuilt += 1
            return True

    def _had_started(self, token: int) -> bool:
        """Whether the attempt `token` started in a worker (and forget it: each attempt ends once). Every
        ending attempt reads the marks so far, so the pipe never fills however many jobs run."""
        with self._marks_lock:
            with contextlib.suppress(OSError, EOFError, ValueError):
                while not self._started_marks.empty():
                    self._started.add(self._started_marks.get())
            started = token in self._started
            self._started.discard(token)
            return started

    def _next_suspect(self, finished: bool = False) -> None:
        """Launch the next suspect once none runs (`finished`: the running one has just ended)."""
        with self._lock:
            if finished:
                self._suspect_running = False
            if self._suspect_running or not self._suspects:
                return
            attempt = self._suspects.pop(0)
            self._suspect_running = True
        self._launch(attempt)

    def _launch(self, attempt: _Attempt) -> None:
        pool, token = self._pool, next(self._tokens)
        try:
            inner = pool.submit(started_job, token, attempt.fn, *attempt.args, **attempt.kwargs)
        except BrokenProcessPool as exc:  # broken before this attempt got in: it never ran
            self._ended(attempt, pool, exc, started=False)
            return
        except RuntimeError as exc:  # shut down
            attempt.outer.set_exception(exc)
            if attempt.suspect:
                self._next_suspect(finished=True)
            return

        def done(f: Future) -> None:
            if f.cancelled():
                attempt.outer.cancel()
                if attempt.suspect:
                    self._next_suspect(finished=True)
                return
            self._ended(attempt, pool, f.exception(), started=self._had_started(token),
                        result=None if f.exception() else f.result())

        inner.add_done_callback(done)

    def _ended(self, attempt: _Attempt, pool: _StdPool, exc: BaseException | None, started: bool,
               result: Any = None) -> None:
        """One attempt is over: its result, its error, or (its pool broke) its next attempt."""
        was_suspect = attempt.suspect
        if isinstance(exc, BrokenProcessPool) and self._rebuild(pool):
            if not started and attempt.requeues > 0:
                attempt.requeues -= 1
                if was_suspect:  # its turn as a suspect is not over: first in line again
                    with self._lock:
                        self._suspects.insert(0, attempt)
                        self._suspect_running = False
                    self._next_suspect()
                else:
                    self._launch(attempt)
                return
            if started and attempt.retries > 0:
                attempt.retries -= 1
                attempt.suspect = True
                with self._lock:
                    self._suspects.append(attempt)
                self._next_suspect(finished=was_suspect)
                return
        if exc is not None:
            attempt.outer.set_exception(exc)
        else:
            attempt.outer.set_result(result)
        if was_suspect:
            self._next_suspect(finished=True)

    def _route_progress(self) -> None:
        while True:
            try:
                item = self._progress.get()
            except (EOFError, OSError, ValueError):
                return
            if item is None:
                return
            token, event = item
            listener = self._listeners.get(token)
            if listener is None:
                continue
            if event is None:
                listener[1].set()
                continue
            with contextlib.suppress(Exception):
                listener[0](*event)

    def stream(self, job: Callable[..., T], args: tuple, on_gate: Callable[..., None]) -> T:
        """Run `job(*args, on_gate=...)` on a worker and wait, `on_gate` called here as the worker reports,
        every report delivered before this returns (the queue may lag the result by a moment)."""
        import threading

        token, finished = next(self._tokens), threading.Event()
        self._listeners[token] = (on_gate, finished)
        try:
            result = self.submit(streamed_job, token, job, *args).result()
            finished.wait(10.0)
            return result
        finally:
            self._listeners.pop(token, None)

    def describe(self) -> str:
        gpus = f", GPUs {','.join(self.gpus)}" if self.gpus else ""
        return f"pool ({self.workers} worker{'s' if self.workers != 1 else ''}{gpus})"

    def submit(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        outer: Future[T] = Future()
        outer.set_running_or_notify_cancel()
        self._launch(_Attempt(outer, fn, args, kwargs, self.JOB_RETRIES, self.REQUEUES))
        return outer

    def shutdown(self) -> None:
        with self._lock:
            self._closed = True
        self._pool.shutdown(wait=True, cancel_futures=True)
        with contextlib.suppress(Exception):
            self._progress.put(None)

    def kill(self) -> None:
        """Stop at once: SIGKILL every worker (each one's sandboxes die with it), then shut the pool down."""
        import signal

        with self._lock:
            self._closed = True
        for proc in list((getattr(self._pool, "_processes", None) or {}).values()):
            with contextlib.suppress(OSError):
                os.kill(proc.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            self._pool.shutdown(wait=False, cancel_futures=True)

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
            self.kill()  # cancelled: never wait for running verifications to finish
            return
        self.shutdown()


class _VerifierSlot:
    """A Ray actor holding one GPU for the whole run: every job for that GPU runs in this one process, so
    the verifier's warm state (its pooled reference worker, CUDA context, built bindings) carries from one
    verification to the next. As Ray tasks, GPU jobs each got a fresh worker process and a cold start."""

    def run(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        return fn(*args, **kwargs)


class RayExecutor(_Base):
    """Jobs as Ray tasks: a local instance (`address=None`) or a cluster (`address="ray://..."` or "auto").

    `gpus_per_job=1` makes Ray place each job on its own GPU (cuda and triton backends): one actor per GPU of
    the cluster (`_VerifierSlot`, Ray sets its CUDA_VISIBLE_DEVICES), each job sent to the slot with the
    fewest jobs in flight, so a GPU's verifications share one warm process and never two at once; a slot
    whose node died is restarted elsewhere and its jobs run again. `workers` caps the CPUs of a
    local instance; `gpus` (ids, as `choose_gpus` gives them) the GPUs it may use, by default all it
    finds. A local instance started here is shut down by `shutdown`.
    """

    name = "ray"
    JOB_RETRIES = ProcessPoolExecutor.JOB_RETRIES

    def __init__(self, workers: int = 2, address: str | None = None, gpus_per_job: float = 0.0,
                 python_path: list[str] | None = None, gpus: list[str] | None = None):
        try:
            import ray
        except ImportError:
            raise ExecutorError("Ray is not installed; `pip install 'evokernel-tui[ray]'` or use --executor pool") from None
        if gpus is not None and address:
            raise ExecutorError("--gpus is for a local Ray instance; a cluster's GPUs are its nodes' "
                                "(`ray start --num-gpus N`, with CUDA_VISIBLE_DEVICES)")
        self._ray = ray
        self.workers = workers
        self.address = address
        self.gpus_per_job = gpus_per_job
        self.gpus = list(gpus) if gpus is not None else None
        self._owns = False
        self._remotes: dict[Any, Any] = {}
        self._slots: list[Any] = []
        self._inflight: list[int] = []
        self._slot_lock = threading.Lock()
        if not ray.is_initialized():
            paths = [str(_PROJECT_ROOT), *(python_path or [])]
            env = {"PYTHONPATH": os.pathsep.join([*paths, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                      "runtime_env": {"env_vars": env}}
            if address:
                kwargs["address"] = address
            else:
                # "local", not None: None joins whatever cluster this machine last started (Ray's
                # ray_current_cluster file: another bench's, another pytest worker's), and then fails at
                # "num_cpus and num_gpus must not be provided"; a local instance is always our own
                kwargs["address"] = "local"
                kwargs["num_cpus"] = workers
                if self.gpus is not None:
                    kwargs["num_gpus"] = len(self.gpus)
            try:
                with _visible_devices(self.gpus if not address else None):
                    ray.init(**kwargs)
            except Exception as exc:
                where = address or "a local instance"
                raise ExecutorError(f"cannot start Ray on {where}: {first_line(exc, 200)}") from None
            self._owns = True

    def _gpu_slots(self) -> list[Any]:
        """One `_VerifierSlot` actor per GPU the cluster has (made at the first GPU job)."""
        with self._slot_lock:
            if not self._slots:
                gpus = float(self._ray.cluster_resources().get("GPU", 0.0))
                count = max(1, int(gpus // self.gpus_per_job)) if self.gpus_per_job > 0 else 1
                actor = self._ray.remote(num_cpus=1, num_gpus=self.gpus_per_job, max_restarts=self.JOB_RETRIES,
                                         max_task_retries=self.JOB_RETRIES)(_VerifierSlot)
                self._slots = [actor.remote() for _ in range(count)]
                self._inflight = [0] * count
            return self._slots

    def _on_slot(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Future:
        slots = self._gpu_slots()
        with self._slot_lock:
            k = min(range(len(slots)), key=lambda i: self._inflight[i])
            self._inflight[k] += 1
        future = slots[k].run.remote(fn, args, kwargs).future()

        def done(_: Future) -> None:
            with self._slot_lock:
                self._inflight[k] -= 1

        future.add_done_callback(done)
        return future

    def submit(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        if self.gpus_per_job:
            return self._on_slot(fn, args, kwargs)
        remote = self._remotes.get(fn)
        if remote is None:
            # a job whose worker or node died (killed for memory, a node lost) runs again elsewhere, as a
            # pool's jobs do when its pool breaks; one that raised is not repeated (retry_exceptions off)
            remote = self._ray.remote(num_cpus=1, num_gpus=self.gpus_per_job, max_retries=self.JOB_RETRIES,
                                      retry_exceptions=False)(fn)
            self._remotes[fn] = remote
        return remote.remote(*args, **kwargs).future()

    def describe(self) -> str:
        where = self.address or "local"
        gpu = f", {self.gpus_per_job:g} GPU per job" if self.gpus_per_job else ""
        if self.gpus_per_job and self.gpus is not None:
            gpu += f", GPUs {','.join(self.gpus)}"
        return f"ray ({where}, {self.workers} CPUs{gpu})"

    def shutdown(self) -> None:
        for slot in self._slots:  # a cluster outlives this driver: its GPU slots go now
            with contextlib.suppress(Exception):
                self._ray.kill(slot)
        self._slots = []
        if self._owns and self._ray.is_initialized():
            self._ray.shutdown()
        self._owns = False


@contextlib.contextmanager
def _visible_devices(gpus: list[str] | None) -> Any:
    """CUDA_VISIBLE_DEVICES set to `gpus` while a local Ray instance starts (its raylet and workers see only
    those), then as it was; nothing changes for None."""
    if gpus is None:
        yield
        return
    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = before


def make_executor(kind: str = "pool", workers: int = 1, address: str | None = None, backend: str = "cpu",
                  gpus: list[str] | None = None) -> Executor:
    """The executor a command asked for. On GPU backends the pool pins one worker to each of `gpus` (default:
    every GPU this process may use, `detect_gpus`) and Ray gives every job a GPU of its own."""
    if kind == "inprocess":
        return InProcessExecutor()
    on_gpu = backend in GPU_BACKENDS
    if gpus is not None and not on_gpu:
        raise ExecutorError(f"--gpus is for the GPU backends ({', '.join(GPU_BACKENDS)}), not --backend {backend}")
    if kind == "pool":
        if not on_gpu:
            return ProcessPoolExecutor(workers)
        chosen = gpus if gpus is not None else detect_gpus()
        if not chosen:
            raise ExecutorError(f"no GPU visible for --backend {backend} (CUDA_VISIBLE_DEVICES, nvidia-smi and "
                                "torch see none)")
        return ProcessPoolExecutor(workers, gpus=chosen)
    if kind == "ray":
        return RayExecutor(workers, address=address, gpus_per_job=1.0 if on_gpu else 0.0, gpus=gpus)
    raise ExecutorError(f"unknown executor {kind!r}; choose one of {', '.join(EXECUTORS)}")


def visible_gpus() -> list[str]:
    """GPU ids this process may use: CUDA_VISIBLE_DEVICES, else every GPU `nvidia-smi` lists (no torch)."""
    return detect_gpus(torch_count=lambda: 0)


def detect_gpus(env: Mapping[str, str] | None = None, smi: Callable[[], list[str] | None] | None = None,
                torch_count: Callable[[], int] | None = None) -> list[str]:
    """The GPU ids this process may use, as CUDA_VISIBLE_DEVICES entries a worker can be pinned to.

    CUDA_VISIBLE_DEVICES when it is set (its entries as written: indices, UUIDs or MIG ids; empty means
    none), else the GPUs `nvidia-smi -L` lists, else `torch.cuda.device_count()` (indices 0..N-1). `smi`
    and `torch_count` stand in for the machine's (tests).
    """
    env = os.environ if env is None else env
    listed = env.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [g.strip() for g in listed.split(",") if g.strip()]
    ids = (smi or _smi_gpus)()
    if ids is not None:
        return ids
    return [str(i) for i in range((torch_count or _torch_gpu_count)())]


def _smi_gpus() -> list[str] | None:
    """Indices of the GPUs `nvidia-smi -L` lists; None when nvidia-smi is missing or fails."""
    import shutil
    import subprocess

    if shutil.which("nvidia-smi") is None:
        return None
    try:
        done = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return [str(i) for i, line in enumerate(done.stdout.splitlines()) if line.startswith("GPU ")]


def _torch_gpu_count() -> int:
    try:
        import torch

        return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
    except Exception:  # no torch, or a broken CUDA install: no GPU
        return 0


def choose_gpus(spec: str | None, visible: list[str]) -> list[str]:
    """The GPUs `--gpus SPEC` asks for, out of `visible` (`detect_gpus`).

    `all` or None: every visible GPU; a number N: the first N; ids separated by commas (`0,1`, a UUID, or
    one id with a trailing comma, `1,`): exactly those, each visible and named once. Raises ExecutorError
    with one line saying what is visible.
    """
    shown = ",".join(visible) or "none"
    text = (spec or "all").strip()
    if text.lower() == "all":
        return list(visible)
    if text.isdigit():
        count = int(text)
        if count < 1:
            raise ExecutorError("--gpus takes a count of 1 or more, `all`, or GPU ids such as 0,1")
        if count > len(visible):
            raise ExecutorError(f"--gpus {count}: only {len(visible)} GPU{'s' if len(visible) != 1 else ''} "
                                f"visible ({shown})")
        return list(visible[:count])
    ids = [g.strip() for g in text.split(",") if g.strip()]
    if not ids:
        raise ExecutorError("--gpus takes a count, `all`, or GPU ids separated by commas (e.g. 0,1)")
    twice = sorted({g for g in ids if ids.count(g) > 1})
    if twice:
        raise ExecutorError(f"--gpus names GPU {', '.join(twice)} more than once: one worker per GPU")
    missing = [g for g in ids if g not in visible]
    if missing:
        raise ExecutorError(f"--gpus {text}: GPU {', '.join(missing)} not visible here (visible: {shown})")
    return ids


def plan_gpus(kind: str, backend: str, spec: str | None = None, address: str | None = None,
              visible: list[str] | None = None) -> list[str] | None:
    """The GPUs a command's executor gets (`--gpus SPEC`), or None where it picks none: a CPU backend, the
    in-process executor (the command's own device), a Ray cluster (its nodes' GPUs). A SPEC where it means
    nothing, or a GPU backend with no GPU visible, is an ExecutorError. `visible` stands in for
    `detect_gpus()` (tests)."""
    if backend not in GPU_BACKENDS:
        if spec is not None:
            raise ExecutorError(f"--gpus is for the GPU backends ({', '.join(GPU_BACKENDS)}), not --backend {backend}")
        return None
    if kind == "inprocess" or (kind == "ray" and address):
        if spec is not None:
            where = "--executor inprocess (it verifies on this process's device)" if kind == "inprocess" else \
                "a Ray cluster (its nodes' GPUs: `ray start --num-gpus N`)"
            raise ExecutorError(f"--gpus does not apply to {where}")
        return None
    chosen = choose_gpus(spec, detect_gpus() if visible is None else visible)
    if not chosen:
        raise ExecutorError(f"no GPU visible for --backend {backend} (CUDA_VISIBLE_DEVICES, nvidia-smi and torch "
                            "see none)")
    return chosen


def pool_plan(workers: int, gpus: list[str]) -> list[str]:
    """The GPU of each pool worker: one worker per GPU, never more workers than GPUs (so no two jobs
    ever share one), and no more than `workers` of them."""
    if workers < 1:
        raise ExecutorError("--workers must be 1 or more")
    if len(set(gpus)) != len(gpus):
        raise ExecutorError(f"GPU ids repeat in {','.join(gpus)}: one worker per GPU")
    return list(gpus[:workers])


def verify_job(reference_source: str, candidate_source: str, backend: str = "cpu",
               config: VerifyConfig | None = None,
               on_gate: Callable[..., None] | None = None) -> VerificationResult:
    """One verification, as a picklable job: the real verifier, imported in the worker. `on_gate` only
    where the job runs in the caller's process (`InProcessExecutor`: a callback cannot be pickled). Through
    core's one door into the verifier (`core.verifying.verify_sources`)."""
    from core.verifying import verify_sources

    result = verify_sources(reference_source, candidate_source, backend=backend, config=config, on_gate=on_gate)
    return with_worker_card(result)


def with_worker_card(result: VerificationResult) -> VerificationResult:
    """A GPU verdict whose reference never reported its card (the kernel failed before the reference ran)
    gets the card this worker was pinned to (its CUDA_VISIBLE_DEVICES entry, else GPU 0), so every verdict
    says where it ran."""
    if result.backend in GPU_BACKENDS and not result.device_id:
        from verifier.result import device_label_id

        result.device_id = device_label_id(os.environ.get("CUDA_VISIBLE_DEVICES"), 0)
    return result


def _takes_on_gate(job: Callable[..., Any]) -> bool:
    try:
        return "on_gate" in inspect.signature(job).parameters
    except (TypeError, ValueError):
        return False


def executor_verify(executor: Executor,
                    job: Callable[..., VerificationResult] = verify_job) -> Callable[..., VerificationResult]:
    """A Session `verify_fn` that runs `job` on `executor` and waits for it.

    In the caller's own process (`InProcessExecutor`), with a job that takes it, `on_gate` goes to the
    verifier itself; on the local pool it comes back over the pool's progress queue (`streamed_job`); so
    states and progress (trial k/N, timing rounds) arrive as they happen. From Ray they cannot stream
    back: the gates are reported to `on_gate` once the result arrives, in order (the session's event log
    gets the same shape either way).
    """
    streams = isinstance(executor, InProcessExecutor) and _takes_on_gate(job)
    pooled = isinstance(executor, ProcessPoolExecutor) and _takes_on_gate(job)

    def verify_fn(reference_source: str, candidate_source: str, backend: str = "cpu",
                  config: VerifyConfig | None = None,
                  on_gate: Callable[..., None] | None = None) -> VerificationResult:
        if streams:
            return executor.submit(job, reference_source, candidate_source, backend, config, on_gate).result()
        if pooled and on_gate is not None:
            assert isinstance(executor, ProcessPoolExecutor)
            return executor.stream(job, (reference_source, candidate_source, backend, config), on_gate)
        result = executor.submit(job, reference_source, candidate_source, backend, config).result()
        if on_gate is not None:
            for gate in result.gates:
                on_gate(gate.name, gate.status)
        return result

    return verify_fn
