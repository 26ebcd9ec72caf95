"""Suite-wide isolation: no test touches the person's real memory bank, sessions, config or build cache.

Every `EVOKERNEL_*` location is *forced* (not defaulted) into one temporary folder per pytest run, and
the XDG data and config homes with it, so a developer's own `EVOKERNEL_MEMORY` or `EVOKERNEL_SESSIONS`
can never be written by a test. Model settings from the developer's shell are removed.

All tests share one build root per pytest run, so the precompiled headers and the pybind objects are
built once and reused; each test still gets its own verdicts where it asks for `use_cache=False`. To
reuse a warm build cache across runs, point `EVOKERNEL_TEST_BUILD_DIR` at a folder kept for tests.
The suite's folder is removed when the run ends (`EVOKERNEL_TEST_KEEP=1` keeps it).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from pathlib import Path

import pytest


def _prewarmed_shared() -> Path:
    """Where `scripts/setup.sh` prewarmed the trusted side's headers and bindings: the developer's own
    build root (`verifier.config.default_build_root`), read before the isolation below replaces it."""
    if os.environ.get("EVOKERNEL_BUILD_DIR"):
        return Path(os.environ["EVOKERNEL_BUILD_DIR"]) / "shared"
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("evokernel")) / "builds" / "shared"


def _xdist_worker_of_this_run() -> str | None:
    """This process's worker id when it is a pytest-xdist worker of the run whose controller made the suite
    folder (a direct child of it), else None. A pytest a test starts in a subprocess inherits
    PYTEST_XDIST_WORKER too, but it is no worker of this run and gets a folder of its own."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    controller = os.environ.get("EVOKERNEL_TEST_CONTROLLER_PID")
    if worker and controller and controller == str(os.getppid()) and os.environ.get("EVOKERNEL_TEST_SUITE_ROOT"):
        return worker
    return None


# One folder per pytest run. Under pytest-xdist the controller makes it and its workers (started after this
# file is imported, with its environment) share it: one build root for all (the precompiled headers and pybind
# objects built once, by whichever worker needs them first: the builds are locked and content-keyed, as
# for the bench's workers), and a folder of their own for memory, sessions, config and the peaks cache.
WORKER = _xdist_worker_of_this_run()
if WORKER is None:
    SUITE_ROOT = Path(tempfile.mkdtemp(prefix="evokernel-tests-"))
    OWN_ROOT = SUITE_ROOT
    os.environ["EVOKERNEL_TEST_SUITE_ROOT"] = str(SUITE_ROOT)
    os.environ["EVOKERNEL_TEST_CONTROLLER_PID"] = str(os.getpid())
    # Only read (copied from): `pytest_collection_finish`, tests/app/test_compile_latency.py.
    os.environ["EVOKERNEL_TEST_PREWARMED"] = str(_prewarmed_shared())
else:  # the controller's folder, and the controller's EVOKERNEL_TEST_PREWARMED (its EVOKERNEL_BUILD_DIR is the suite's)
    SUITE_ROOT = Path(os.environ["EVOKERNEL_TEST_SUITE_ROOT"])
    OWN_ROOT = SUITE_ROOT / WORKER
    OWN_ROOT.mkdir(exist_ok=True)
# Tests that import litellm directly must not fetch its price map from the network (core.llm sets this too).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

def _own_scratch() -> Path:
    """This test process's scratch for the verifier: a new private folder on /dev/shm like the verifier's own
    (tmpfs: run directories hold the trials' inputs), or in the suite's folder where /dev/shm is not
    writable. Its name, `/dev/shm/evk-XXXXXXXX`, is as short as the default `/dev/shm/evokernel-UID` (one
    character longer for root, shorter than for uid 1000): paths inside a job (an AF_UNIX socket's, at most
    107 bytes) are as long as a person's, and a folder per worker nested under a suite folder was 17
    characters longer and failed a hostile test there ("AF_UNIX path too long")."""
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else OWN_ROOT
    return Path(tempfile.mkdtemp(prefix="evk-", dir=base))


ISOLATED = {
    "EVOKERNEL_BUILD_DIR": os.environ.get("EVOKERNEL_TEST_BUILD_DIR") or str(SUITE_ROOT / "builds"),
    "EVOKERNEL_MEMORY": str(OWN_ROOT / "memory" / "memory.json"),
    "EVOKERNEL_CONFIG_DIR": str(OWN_ROOT / "config"),
    "EVOKERNEL_CONFIG": str(OWN_ROOT / "config" / "config.toml"),
    "EVOKERNEL_SESSIONS": str(OWN_ROOT / "sessions"),
    "XDG_DATA_HOME": str(OWN_ROOT / "xdg-data"),
    "XDG_CONFIG_HOME": str(OWN_ROOT / "xdg-config"),
    # the machine's bandwidth peak (verifier.clock.bandwidth): measured once per suite, never the person's cache
    "EVOKERNEL_PEAKS_CACHE": str(OWN_ROOT / "peaks.json"),
    # the verifier's per-user scratch (run directories, reference workers' homes, the trash its sweeps empty):
    # one per test process, never the machine's /dev/shm/evokernel-UID, so a test that counts or sweeps runs
    # there sees only its own process's (another xdist worker's, or another checkout's suite, are elsewhere)
    "EVOKERNEL_SCRATCH": str(_own_scratch()),
}
os.environ.update(ISOLATED)
for name in ("EVOKERNEL_MODEL", "EVOKERNEL_API_BASE", "EVOKERNEL_API_KEY"):
    os.environ.pop(name, None)


def pytest_collection_finish(session):
    """A run with `slow` tests starts its fresh build root from a copy of the shared headers and bindings
    that `scripts/setup.sh` prewarmed (CI runs it just before the tests): the same content-keyed
    artefacts the suite would otherwise compile again, about two minutes on 2 cores. A copy, never a
    link, so nothing a test does reaches the person's cache; artefacts of another compiler or torch have
    other keys and are simply not used. Tests about cold builds make roots of their own, as before.
    `EVOKERNEL_TEST_SEED_BUILDS=0` starts the suite's root empty."""
    if os.environ.get("EVOKERNEL_TEST_SEED_BUILDS") == "0" or os.environ.get("EVOKERNEL_TEST_BUILD_DIR"):
        return
    if not any(item.get_closest_marker("slow") is not None for item in session.items):
        return
    # Under pytest-xdist every worker collects and gets here: the first seeds the shared root while the others
    # wait on the lock, then find it seeded.
    with open(SUITE_ROOT / ".seed.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _seed_build_root(Path(os.environ["EVOKERNEL_TEST_PREWARMED"]), Path(os.environ["EVOKERNEL_BUILD_DIR"]))


def _seed_build_root(source: Path, root: Path) -> None:
    dest = root / "shared"
    if not source.is_dir() or dest.exists():
        return
    ignore = shutil.ignore_patterns("*.lock", "*.tmp*", ".*")
    try:
        shutil.copytree(source, dest, symlinks=True, ignore=ignore)
    except (OSError, shutil.Error):
        shutil.rmtree(dest, ignore_errors=True)  # half a copy is no help: build as before
        return
    # Tests that build with `InlineBuilder(<suite root>)` directly (tests/core/test_tasks_candidates.py,
    # tests/verifier/test_build_bindings.py, test_tiny_cpu_build.py) look for precompiled headers in the root
    # itself: they get a copy of the prewarmed ones too. A new signature's bindings then compile behind the
    # bindings' header (`split_build._bind_pch`: about 9 s instead of 24 s each on 2 cores), and kernels with
    # the common flags find their tiny and shim headers. Headers of other flags and every bindings object
    # such a test needs it still builds itself.
    # The prewarmed bindings too (`bind/`, a few MB: the commonest signatures, Tensor(Tensor) and
    # Tensor(Tensor, Tensor)), which such a test otherwise compiles again, about 9 s each (session 15).
    for part in ("pch", "bind"):
        if (dest / part).is_dir() and not (root / part).exists():
            try:
                shutil.copytree(dest / part, root / part, symlinks=True, ignore=ignore)
            except (OSError, shutil.Error):
                shutil.rmtree(root / part, ignore_errors=True)


def pytest_sessionfinish(session, exitstatus):
    """The suite's folder (builds, memory, sessions: about 2 GB, and about 5 GB with the seeded headers) goes when the run ends. Runs that left it
    filled the disk a later CI run built on, and two of its tests failed at "the precompiled header failed
    to build". Keep it with EVOKERNEL_TEST_KEEP=1 to look inside after a run. An xdist worker removes only its
    own part; the controller, which finishes after every worker, the rest."""
    if os.environ.get("EVOKERNEL_TEST_KEEP") != "1":
        shutil.rmtree(OWN_ROOT, ignore_errors=True)
        shutil.rmtree(ISOLATED["EVOKERNEL_SCRATCH"], ignore_errors=True)


@pytest.fixture(scope="session")
def shared_build_root() -> Path:
    """The one build root of this pytest run (precompiled headers built once)."""
    return Path(os.environ["EVOKERNEL_BUILD_DIR"])


@pytest.fixture(autouse=True)
def _isolation_stays_on():
    """`--unsafe-no-isolation` run in-process (a CliRunner test) sets EVOKERNEL_UNSAFE_NO_ISOLATION for the
    whole process: every later verification of the run then went unisolated, and the hostile tests wrote
    the person's files and poisoned the shared headers. Each test gets the variable as it found it."""
    before = os.environ.get("EVOKERNEL_UNSAFE_NO_ISOLATION")
    yield
    if before is None:
        os.environ.pop("EVOKERNEL_UNSAFE_NO_ISOLATION", None)
    else:
        os.environ["EVOKERNEL_UNSAFE_NO_ISOLATION"] = before


@pytest.fixture(autouse=True)
def _no_timed_exit_in_the_test_process(monkeypatch):
    """`cli.stopped` (a command's ctrl+c path) arms `lifetime.exit_within`: a timer that ends the process 10 s
    later. Reached in-process (a CliRunner test whose fake raised KeyboardInterrupt), it ended the pytest
    worker itself during a later test, with no message (CI, session 25). Cancelled commands are tested in
    subprocesses; here arming the timer fails the test that did it."""
    from core import lifetime as core_lifetime
    from verifier.sandbox import lifetime

    def refused(seconds, code):
        pytest.fail(f"lifetime.exit_within({seconds}, {code}) in the test process: it would end this pytest "
                    "worker; run a cancelled command in a subprocess")

    monkeypatch.setattr(lifetime, "exit_within", refused)
    monkeypatch.setattr(core_lifetime, "exit_within", refused)
    yield


# What the `slow` marker means: the test starts a compiler or a sandbox. In the fast tier (a run whose
# `-m` says "not slow") a test without the marker that starts either fails at once, naming what it
# started, instead of slowing that tier; the whole suite (no `-m`) runs every test as before. Only this
# process's starts are seen (`verifier.sandbox.lifetime.spawn`, which every compiler, build helper and
# sandbox of the verifier goes through), not those of a command line a test runs in a subprocess.
_COMPILERS = {"c++", "g++", "gcc", "cc", "clang", "clang++", "nvcc", "ninja", "bwrap"}
_SANDBOX_MODULES = {"verifier.sandbox.supervisor", "verifier.build.shared_artefacts"}


def _slow_work(argv) -> str | None:
    """The compiler or sandbox `argv` would start, or None."""
    args = [str(a) for a in (argv if isinstance(argv, (list, tuple)) else [argv])]
    if args and Path(args[0]).name in _COMPILERS:
        return Path(args[0]).name
    return next((a for a in args[1:3] if a in _SANDBOX_MODULES), None)


@pytest.fixture(autouse=True)
def _fast_tier_starts_no_compiler_or_sandbox(request, monkeypatch):
    fast_tier = "not slow" in (request.config.getoption("markexpr") or "")
    if not fast_tier or request.node.get_closest_marker("slow") is not None:
        yield
        return
    from verifier.sandbox import lifetime

    started: list[str] = []
    spawn = lifetime.spawn

    def guarded(argv, *args, **kwargs):
        what = _slow_work(argv)
        if what is not None:
            started.append(what)
            raise RuntimeError(f"a test not marked `slow` started {what}: mark it @pytest.mark.slow")
        return spawn(argv, *args, **kwargs)

    monkeypatch.setattr(lifetime, "spawn", guarded)
    yield
    if started:
        pytest.fail(f"not marked `slow` but started {sorted(set(started))}: mark it @pytest.mark.slow")


# ---------------------------------------------------------------------------------------------------
# pytest-xdist, on by default (`-n auto` in pyproject's addopts; `-n 0` for one process); a test marked
# `alone` (it times things, or reads state the whole machine shares) runs while no other test does.
# Workers share the build root (content-keyed, locked builds) and nothing else: memory, sessions, config,
# peaks cache and the verifier's scratch are per worker (above); a local Ray instance is always a new one
# (core.executors.RayExecutor), never another worker's.
# ---------------------------------------------------------------------------------------------------

# Each worker's verifications hold a sandbox, a reference worker and a GB of inputs or more; on 2 cores two
# workers keep both busy while one waits on a sandbox or a subprocess (issue 32's target machine).
MAX_WORKERS = 2


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config) -> int:
    """Workers for `-n auto`: one per core the run may use, at most MAX_WORKERS; none (the run stays
    in this process, as before xdist) when the command names single tests (`file.py::test`), where
    starting workers costs more than it saves, or under --pdb. PYTEST_XDIST_AUTO_NUM_WORKERS overrides."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return int(os.environ["PYTEST_XDIST_AUTO_NUM_WORKERS"])
    args = [a for a in config.args if not a.startswith("-")]
    if args and all("::" in a for a in args):
        return 0
    return max(1, min(len(os.sched_getaffinity(0)), MAX_WORKERS))


# The run's lock as this worker holds it: {"file": open lock file, "mode": LOCK_EX or LOCK_SH}, empty when not held.
_HELD: dict = {}


def _take(mode: int) -> None:
    """Hold the run's lock in `mode`, after a turnstile, so a timed test waiting for it exclusively is not
    starved by a stream of shared holders: it holds the turnstile while it waits, and no new shared holder
    gets past it meanwhile."""
    with open(SUITE_ROOT / ".alone.turnstile", "w") as turnstile:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        lock = open(SUITE_ROOT / ".alone.lock", "w")  # noqa: SIM115 - held across tests, closed by _let_go
        if mode == fcntl.LOCK_EX:
            fcntl.flock(lock, fcntl.LOCK_EX)
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        else:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
            fcntl.flock(lock, fcntl.LOCK_SH)
    _HELD.update(file=lock, mode=mode)


def _let_go() -> None:
    if _HELD:
        _HELD.pop("file").close()  # closing the file releases its lock
        _HELD.clear()


@pytest.fixture(autouse=True)
def _alone_tests_run_alone(request):
    """Under xdist, a test marked `alone` (it asserts on the clock: speedups compared, rounds counted, an
    elapsed bound; or on what the whole machine holds: no sandbox process left) holds the run's lock
    exclusively and every other test holds it shared, so it never has another worker's test beside it:
    it runs as in a run without workers. Outside xdist there is one test at a time anyway.

    An exclusive hold is kept into the worker's next test when that one is `alone` too (released in
    `pytest_runtest_teardown` otherwise), so a file of timed tests waits for the other worker's test to end
    once, not before each of its tests (each wait leaves a worker idle for the rest of that test)."""
    if WORKER is None:
        yield
        return
    mode = fcntl.LOCK_EX if request.node.get_closest_marker("alone") is not None else fcntl.LOCK_SH
    if _HELD.get("mode") != mode:
        _let_go()
        _take(mode)
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """After the test's own teardown: a shared hold always ends here (an `alone` test of the other worker
    may be waiting); an exclusive one only when the next test of this worker is not `alone` (xdist knows
    the next test: a worker runs one only once the one after it has arrived, or the run is ending)."""
    yield
    if WORKER is None or not _HELD:
        return
    keep = (_HELD["mode"] == fcntl.LOCK_EX and nextitem is not None
            and nextitem.get_closest_marker("alone") is not None)
    if not keep:
        _let_go()
