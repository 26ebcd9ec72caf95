"""Cancelling on a GPU leaves no device memory: `evokernel verify --backend cuda` ended by SIGTERM (what
`timeout` sends) or SIGKILL during its trials leaves no process of ours in `nvidia-smi --query-compute-apps`
within a few seconds (a `timeout`-ended verify once left a process holding 47 GB on an H100)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time

import pytest

from tests.verifier.test_cancel import CANDIDATES, Tree, _wait_for

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


def _gpu_pids() -> set[int]:
    out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, timeout=30).stdout
    return {int(line.split(",")[0]) for line in out.splitlines() if line.strip() and line.split(",")[0].strip().isdigit()}


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_cancelled_verify_frees_the_gpu(tmp_path, sig):
    if shutil.which("nvidia-smi") is None:
        pytest.skip("no nvidia-smi")
    import os
    import sys

    from tests.verifier.test_cancel import ROOT

    env = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    proc = subprocess.Popen([sys.executable, "-m", "evokernel_tui.cli", "verify", "--backend", "cuda", "relu",
                             str(CANDIDATES / "cuda" / "relu.py"), "--no-cache", "--trials", "100"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env, cwd=ROOT,
                            start_new_session=True, text=True)
    tree = Tree(proc.pid)
    try:
        _wait_for(tree, proc, "trials")
        tree.poll()
        ours = set(tree.seen) | {proc.pid}
        os.kill(proc.pid, sig)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 10
        held = _gpu_pids() & ours
        while held and time.monotonic() < deadline:
            time.sleep(0.25)
            held = _gpu_pids() & ours
        assert not held, f"{sig.name}: pids {sorted(held)} still hold GPU memory"
        assert not tree.left()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        tree.kill_left()
