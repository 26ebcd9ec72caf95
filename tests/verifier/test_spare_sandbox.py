"""The pre-started spare sandbox must still be alive when a verification takes it.

bubblewrap's `--die-with-parent` is a parent-death signal, which Linux sends when the *thread* that
forked the sandbox exits. The spare was started from a short-lived refill thread, so it was always dead
(-9) by the time it was taken and every verdict imported torch again (1.5-2 s). These tests start
sandboxes from threads that end at once and fail if the sandbox died with its thread.
"""

from __future__ import annotations

import threading
import time

import pytest

from verifier import VerifyConfig
from verifier.backends import get_backend
from verifier.workers.pools import _SPARES, _spare_key, _start_candidate, isolation_mode

pytestmark = pytest.mark.slow  # every test here starts a sandbox


def _start_in_thread(config, be, isolated):
    box: dict = {}
    t = threading.Thread(target=lambda: box.update(job=_start_candidate(config, be, isolated, wait=True)))
    t.start()
    t.join()
    assert not t.is_alive()
    return box["job"]


def test_a_sandbox_started_from_a_thread_that_ended_stays_alive():
    config, be = VerifyConfig(), get_backend("cpu")
    job, _ = _start_in_thread(config, be, isolation_mode(config))
    try:
        time.sleep(1.0)
        assert job.proc.poll() is None, f"the sandbox died with the thread that started it ({job.proc.poll()})"
        assert job.send({"cmd": "finish"})
    finally:
        job.kill()


def test_the_spare_refilled_in_the_background_is_alive_when_taken():
    config, be = VerifyConfig(), get_backend("cpu")
    isolated = isolation_mode(config)
    key = _spare_key(config, be, isolated)
    _SPARES.close()
    _SPARES.refill(key, lambda: _start_candidate(config, be, isolated, wait=True))
    deadline = time.monotonic() + 30
    while _SPARES._spare is None and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)
    taken = _SPARES.take(key)
    try:
        assert taken is not None, "the refilled spare was dead when taken"
        assert taken[0].proc.poll() is None
    finally:
        if taken is not None:
            taken[0].kill()
