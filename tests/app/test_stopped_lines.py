"""Ctrl-C (SIGINT) or SIGTERM in a long command says what was stopped and where, in one line, exit 130/143
(issue 34): `verify`, `compare`, `bench` and `draft` did; `tasks --degenerate` (a reference run per problem,
minutes on a checkout) printed nothing while it ran and only the generic line when stopped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
KB = REPO / "tests" / "candidates" / "kernelbench" / "KernelBench"

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_a_stopped_degeneracy_pass_says_how_far_it_got(tmp_path, sig):
    proc = subprocess.Popen(
        [sys.executable, "-m", "evokernel_tui.cli", "tasks", "--kernelbench", str(KB), "--degenerate", "kernelbench"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "EVOKERNEL_CONFIG": str(tmp_path / "none.toml"), "HOME": str(tmp_path)})
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()  # each problem says so as its check starts: the pass is not silent
        assert first.startswith("trivial answers: 1/"), first
        time.sleep(0.5)
        os.kill(proc.pid, sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + sig, (proc.returncode, err[-2000:])
    assert "Traceback" not in err, err[-2000:]
    line = err.strip().splitlines()[-1]
    assert "interrupted" in line and f"stopped checking the problems of {KB}" in line, line
    assert " of " in line and "(at " in line and line.endswith("nothing printed"), line
    assert "KernelBench problems" not in out  # no half table
