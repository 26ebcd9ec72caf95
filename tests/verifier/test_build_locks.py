"""A killed build never holds a later one (issue 37): the verifier's own build locks (`flock`) and the
trusted side's torch builds (`KernelBaton` in place of torch's `FileBaton`).

Found in session hostile6: a verification killed while its trusted reference worker was in torch's
`load_inline` left `~/.cache/torch_extensions/py311_cpu/evk_candidate_relu/lock` behind; torch's
`FileBaton` waits for that file to vanish, so every later verification whose reference built the same
extension stalled until the reference timeout."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from verifier.build.locks import KernelBaton, locked

ROOT = Path(__file__).resolve().parents[2]


def _holder(code: str, ready: Path) -> subprocess.Popen:
    """A process that takes a lock (`code`), touches `ready` and sleeps until killed."""
    script = f"{code}\nopen({str(ready)!r}, 'w').close()\nimport time\ntime.sleep(600)\n"
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the holder never took its lock"
        time.sleep(0.05)
    return proc


def _acquired_within(take, seconds: float) -> bool:
    """Whether `take` (which takes a lock and lets it go) got through within `seconds`."""
    done = threading.Event()
    threading.Thread(target=lambda: (take(), done.set()), daemon=True).start()
    return done.wait(seconds)


def _take_locked(lock: Path) -> None:
    with locked(lock):
        pass


def _take_baton(path: Path) -> None:
    baton = KernelBaton(str(path))
    baton.try_acquire()
    baton.release()


def test_a_killed_holder_of_a_verifier_build_lock_lets_the_next_build_in(tmp_path):
    lock = tmp_path / "ext" / "k.lock"
    proc = _holder(f"from verifier.build.locks import locked\nheld = locked({str(lock)!r})\nheld.__enter__()",
                   tmp_path / "r")
    try:
        assert not _acquired_within(lambda: _take_locked(lock), 0.5)  # held while it lives
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    t0 = time.monotonic()
    with locked(lock):
        assert time.monotonic() - t0 < 5


def test_a_baton_file_left_by_a_killed_builder_holds_nothing(tmp_path):
    """Torch's baton leaves its file when the builder dies; torch's own baton then never gets it."""
    from torch.utils.file_baton import FileBaton

    path = tmp_path / "lock"
    path.write_text("")  # what a killed `FileBaton` holder leaves
    assert FileBaton(str(path)).try_acquire() is False  # the hazard: torch would wait for it forever
    baton = KernelBaton(str(path))
    t0 = time.monotonic()
    assert baton.try_acquire() is True and time.monotonic() - t0 < 1
    baton.release()
    assert not path.exists()  # released: gone, so an unpatched torch builder is not held either


def test_a_kernel_baton_excludes_while_its_holder_lives_and_not_after(tmp_path):
    path = tmp_path / "lock"
    proc = _holder(f"from verifier.build.locks import KernelBaton\nheld = KernelBaton({str(path)!r})\nheld.try_acquire()",
                   tmp_path / "r")
    try:
        from torch.utils.file_baton import FileBaton

        assert FileBaton(str(path)).try_acquire() is False  # an unpatched torch builder waits for it too
        assert not _acquired_within(lambda: _take_baton(path), 0.5)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert _acquired_within(lambda: _take_baton(path), 5)  # the dead holder's file holds nothing


def test_many_kernel_batons_take_turns(tmp_path):
    """Release removes the file while held: a caller that waited on the removed file must not hold it
    beside the one that took the new file."""
    path, inside, most = tmp_path / "lock", [0], [0]
    guard = threading.Lock()

    def builder():
        for _ in range(30):
            baton = KernelBaton(str(path))
            baton.try_acquire()
            with guard:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            time.sleep(0.001)
            with guard:
                inside[0] -= 1
            baton.release()

    threads = [threading.Thread(target=builder) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert most[0] == 1


# a reference that builds a (plain C++) library with torch's own `cpp_extension.load`, as the trusted
# reference worker loads it; the compiler is whatever CXX names
TASK = '''
import os
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load

SRC = os.path.join(os.environ["EVK_TEST_SRC_DIR"], "tiny.cpp")
LIB = load(name="evk_lock_probe", sources=[SRC], is_python_module=False, verbose=False)


class Model(nn.Module):
    def forward(self, x):
        return x


def get_inputs():
    return [torch.randn(4)]


def get_init_inputs():
    return []
'''


def _load(tmp_path: Path, cxx: str, patched: bool, timeout: float | None) -> subprocess.Popen:
    task = tmp_path / "task.py"
    task.write_text(TASK)
    if patched:  # as the trusted reference worker loads a task
        code = f"from verifier.workers.reference_worker import _load_task\n_load_task({str(task)!r})\n"
    else:  # torch's own baton: what the worker did before
        code = f"exec(compile(open({str(task)!r}).read(), 'task', 'exec'))\n"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CXX": cxx, "EVK_TEST_SRC_DIR": str(tmp_path),
           "TORCH_EXTENSIONS_DIR": str(tmp_path / "ext")}
    return subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.mark.slow
def test_a_build_killed_mid_way_does_not_hold_the_next_build_of_the_same_source(tmp_path):
    (tmp_path / "tiny.cpp").write_text("extern \"C\" int evk_lock_probe_answer() { return 42; }\n")
    started = tmp_path / "compiler-started"
    slow = tmp_path / "slow-cxx"
    slow.write_text(f"#!/bin/sh\ntouch {started}\nsleep 600\nexec c++ \"$@\"\n")
    slow.chmod(0o755)
    lock = tmp_path / "ext" / "evk_lock_probe" / "lock"

    def kill_mid_build(patched: bool) -> None:
        started.unlink(missing_ok=True)
        proc = _load(tmp_path, str(slow), patched, None)
        deadline = time.monotonic() + 120
        while not started.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0][-2000:]
            time.sleep(0.05)
        assert lock.exists()  # killed while holding the baton
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        assert lock.exists(), "the killed build left no lock file: nothing tested"

    # before: a build killed mid-way under torch's own baton holds the next one (here for 8 s, not forever)
    kill_mid_build(patched=False)
    stuck = _load(tmp_path, "c++", patched=False, timeout=None)
    with pytest.raises(subprocess.TimeoutExpired):
        stuck.communicate(timeout=8)
    os.killpg(stuck.pid, signal.SIGKILL)
    stuck.communicate()

    # now: the torch baton's leftover and a killed KernelBaton build's leftover hold nothing
    for leftover in ("torch", "kernel"):
        if leftover == "kernel":
            kill_mid_build(patched=True)
        t0 = time.monotonic()
        proc = _load(tmp_path, "c++", patched=True, timeout=None)
        out = proc.communicate(timeout=180)[0]
        took = time.monotonic() - t0
        assert proc.returncode == 0, out[-3000:]
        assert took < 120, took
        assert list((tmp_path / "ext" / "evk_lock_probe").glob("*.so")), out[-2000:]
        assert not lock.exists()  # released
