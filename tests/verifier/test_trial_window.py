"""Big outputs: the reference writes at most a window of trials ahead, and the parent removes a compared
trial's outputs (the candidate's through its held descriptor, never following a link)."""

from __future__ import annotations

import os
import threading
import time

import pytest

from verifier.run.trials import drop_outputs
from verifier.sandbox.job_dir import HeldDir
from verifier.workers.reference_worker import WINDOW_MIN_BYTES, wait_for_room

pytestmark = pytest.mark.alone  # its waits are timed (tests/conftest.py)


def _trial(root, name):
    d = root / name
    d.mkdir()
    (d / "out0.npy").write_bytes(b"x")
    (d / "in0.npy").write_bytes(b"x")
    return d


def test_small_outputs_never_wait(tmp_path):
    written = [_trial(tmp_path, f"t{i}") for i in range(5)]
    t0 = time.monotonic()
    wait_for_room(written, WINDOW_MIN_BYTES - 1, wait_s=5)
    assert time.monotonic() - t0 < 0.5


def test_big_outputs_wait_until_a_compared_trial_is_dropped(tmp_path):
    written = [_trial(tmp_path, f"t{i}") for i in range(3)]
    threading.Timer(0.3, lambda: (written[0] / "out0.npy").unlink()).start()
    t0 = time.monotonic()
    wait_for_room(written, WINDOW_MIN_BYTES, wait_s=5)
    assert 0.25 < time.monotonic() - t0 < 3


def test_the_wait_is_bounded(tmp_path):
    written = [_trial(tmp_path, f"t{i}") for i in range(3)]
    t0 = time.monotonic()
    wait_for_room(written, WINDOW_MIN_BYTES, wait_s=0.3)
    assert time.monotonic() - t0 < 2


def test_drop_outputs_removes_outputs_only_and_never_follows_a_link(tmp_path):
    job, trusted, victim = tmp_path / "job", tmp_path / "trusted", tmp_path / "victim.npy"
    job.mkdir()
    trusted.mkdir()
    victim.write_bytes(b"keep me")
    (job / "out0.npy").write_bytes(b"o")
    (job / "in0.npy").write_bytes(b"i")
    (job / "after0.npy").write_bytes(b"a")
    os.symlink(victim, job / "out1.npy")  # a candidate's link in place of an output
    (trusted / "out0.npy").write_bytes(b"r")
    fd = os.open(job, os.O_RDONLY | os.O_DIRECTORY)
    held = HeldDir(job, fd)
    try:
        drop_outputs(held, trusted)
    finally:
        held.close()
    assert sorted(os.listdir(job)) == ["in0.npy"]
    assert victim.read_bytes() == b"keep me"
    assert os.listdir(trusted) == []
