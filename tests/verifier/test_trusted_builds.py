"""What a sandboxed candidate can make the trusted side do: requests for shared build artefacts.

Every `need` mark used to start a compiler outside the sandbox; a candidate sending thousands of them
(distinct specs, so no cache answered) would start thousands of compilers on the host.
"""

from __future__ import annotations

import threading
import time

from verifier import VerifyConfig
from verifier.api import MAX_TRUSTED_BUILDS, _Run


class _Job:
    def __init__(self) -> None:
        self.sent: list[dict] = []
        self.lock = threading.Lock()

    def send(self, message: dict) -> bool:
        with self.lock:
            self.sent.append(message)
        return True


def test_a_flood_of_build_requests_starts_few_trusted_builds(monkeypatch, tmp_path):

    started: list[list[str]] = []

    def fake_run(self, argv, env, log, timeout):
        started.append(argv)
        time.sleep(0.05)
        return 0

    from verifier.build import owned_builds as trusted_builds

    monkeypatch.setattr(trusted_builds.TrustedBuilds, "run", fake_run)
    run = _Run.__new__(_Run)
    run.job = _Job()
    run.config = VerifyConfig(build_root=str(tmp_path))
    for i in range(200):
        run._serve_request({"phase": "need", "kind": "bind", "spec": {"signatures": [["int64_t", ["int64_t"] * (i % 30)]],
                                                                      "nonce": i}})
    for _ in range(3):  # the same request again is not built twice
        run._serve_request({"phase": "need", "kind": "pch", "spec": {"kind": "evk_shim", "cflags": ["-O3"]}})
    deadline = time.monotonic() + 10
    while len(run.job.sent) < 203 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(started) <= MAX_TRUSTED_BUILDS
    assert sum(1 for a in started if a[-2] == "pch") <= 1
    # every request is answered, so the sandbox never waits for a build that will not happen
    assert len(run.job.sent) == 203 and all(m == {"cmd": "built", "kind": m["kind"]} for m in run.job.sent)
