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


def test_a_stopped_resume_says_how_to_continue(tmp_path):
    """`resume` runs the session's remaining steps headless: stopped mid-verification it says, as `draft`
    does, how to go on (every step so far is in the session's log), exit 130, no traceback."""
    import json

    good = (REPO / "tests" / "candidates" / "cpu" / "relu.py").read_text()
    first = tmp_path / "first.json"
    first.write_text(json.dumps(["no code in this reply"]))
    env = {**os.environ, "EVOKERNEL_CONFIG": str(tmp_path / "none.toml")}
    base = [sys.executable, "-m", "evokernel_tui.cli"]
    made = subprocess.run([*base, "draft", "relu", "--model", f"scripted:{first}", "--no-memory", "--steps", "1", "--json",
                           "--sessions-dir", str(tmp_path / "s"), "--out", str(tmp_path / "k.py")],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    sid = json.loads(made.stdout)["id"]
    more = tmp_path / "more.json"
    more.write_text(json.dumps([f"```python\n{good}```"]))
    proc = subprocess.Popen([*base, "resume", sid, "--sessions-dir", str(tmp_path / "s"), "--model", f"scripted:{more}",
                             "--no-memory", "--add-draft", "1", "--out", str(tmp_path / "k2.py")],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "resuming" in line, line
        # inside the step: the model's reply is taken and the kernel's verification has begun (the session's
        # own log says so), not a fixed sleep that a loaded machine outruns or falls short of
        events = tmp_path / "s" / sid / "events.jsonl"
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            lines = events.read_text().splitlines()
            if any('"kind": "gate", "step": 2' in ln and '"status": "running"' in ln for ln in lines):
                break
            assert proc.poll() is None, "resume ended before its verification started"
            time.sleep(0.05)
        else:
            raise AssertionError("the resumed step's verification did not start in 90 s")
        os.kill(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, (proc.returncode, err[-2000:])
    assert "Traceback" not in err, err[-2000:]
    last = err.strip().splitlines()[-1]
    assert "interrupted" in last and "continue with `" in last and f"evokernel resume {sid}`" in last, last


def test_a_finished_degeneracy_pass_prints_its_table_and_json(tmp_path):
    """Run to its end, `tasks --kernelbench --degenerate` printed a traceback (it joined the `Degeneracy`
    record as a list, and could not write it as JSON)."""
    import json

    env = {**os.environ, "EVOKERNEL_CONFIG": str(tmp_path / "none.toml"), "HOME": str(tmp_path)}
    base = [sys.executable, "-m", "evokernel_tui.cli", "tasks", "--kernelbench", str(KB), "--degenerate", "kernelbench"]
    table = subprocess.run(base, cwd=REPO, capture_output=True, text=True, env=env, timeout=600)
    assert table.returncode == 0 and "Traceback" not in table.stderr, table.stderr[-2000:]
    assert "KernelBench problems in" in table.stdout and "none" in table.stdout
    listed = subprocess.run([*base, "--json"], cwd=REPO, capture_output=True, text=True, env=env, timeout=600)
    assert listed.returncode == 0, listed.stderr[-2000:]
    rows = json.loads(listed.stdout)
    assert rows and all(r["degenerate"] is None or isinstance(r["degenerate"], list) for r in rows)
