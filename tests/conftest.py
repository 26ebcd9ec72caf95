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

import os
import shutil
import tempfile
from pathlib import Path

import pytest

SUITE_ROOT = Path(tempfile.mkdtemp(prefix="evokernel-tests-"))


def _prewarmed_shared() -> Path:
    """Where `scripts/setup.sh` prewarmed the trusted side's headers and bindings: the developer's own
    build root (`verifier.config.default_build_root`), read before the isolation below replaces it."""
    if os.environ.get("EVOKERNEL_BUILD_DIR"):
        return Path(os.environ["EVOKERNEL_BUILD_DIR"]) / "shared"
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("evokernel")) / "builds" / "shared"


# Only read (copied from): `pytest_collection_finish`, tests/app/test_compile_latency.py.
os.environ["EVOKERNEL_TEST_PREWARMED"] = str(_prewarmed_shared())
# Tests that import litellm directly must not fetch its price map from the network (core.llm sets this too).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

ISOLATED = {
    "EVOKERNEL_BUILD_DIR": os.environ.get("EVOKERNEL_TEST_BUILD_DIR") or str(SUITE_ROOT / "builds"),
    "EVOKERNEL_MEMORY": str(SUITE_ROOT / "memory" / "memory.json"),
    "EVOKERNEL_CONFIG_DIR": str(SUITE_ROOT / "config"),
    "EVOKERNEL_CONFIG": str(SUITE_ROOT / "config" / "config.toml"),
    "EVOKERNEL_SESSIONS": str(SUITE_ROOT / "sessions"),
    "XDG_DATA_HOME": str(SUITE_ROOT / "xdg-data"),
    "XDG_CONFIG_HOME": str(SUITE_ROOT / "xdg-config"),
    # the machine's bandwidth peak (verifier.clock.bandwidth): measured once per suite, never the person's cache
    "EVOKERNEL_PEAKS_CACHE": str(SUITE_ROOT / "peaks.json"),
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
    source = Path(os.environ["EVOKERNEL_TEST_PREWARMED"])
    root = Path(os.environ["EVOKERNEL_BUILD_DIR"])
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
    if (dest / "pch").is_dir() and not (root / "pch").exists():
        try:
            shutil.copytree(dest / "pch", root / "pch", symlinks=True, ignore=ignore)
        except (OSError, shutil.Error):
            shutil.rmtree(root / "pch", ignore_errors=True)


def pytest_sessionfinish(session, exitstatus):
    """The suite's folder (builds, memory, sessions: about 2 GB, and about 5 GB with the seeded headers) goes when the run ends. Runs that left it
    filled the disk a later CI run built on, and two of its tests failed at "the precompiled header failed
    to build". Keep it with EVOKERNEL_TEST_KEEP=1 to look inside after a run."""
    if os.environ.get("EVOKERNEL_TEST_KEEP") != "1":
        shutil.rmtree(SUITE_ROOT, ignore_errors=True)


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
