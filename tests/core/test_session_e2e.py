"""End to end with the real CPU verifier: the README's quick path, and a kill in the middle of a
verification followed by `evokernel resume` (the step in flight is verified and credited)."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "examples" / "relu_scripted.json"
EVOKERNEL = [sys.executable, "-m", "evokernel_tui.cli"]

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not SCRIPT.exists(), reason="examples/relu_scripted.json missing")]


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "EVOKERNEL_SESSIONS": str(tmp_path / "sessions"), "NO_COLOR": "1", "COLUMNS": "120"}


def _events(session: Path) -> list[dict]:
    out = []
    for line in (session / "events.jsonl").read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def test_readme_quick_path_drafts_and_refines_relu(tmp_path):
    bank = tmp_path / "bank.json"
    out = subprocess.run([*EVOKERNEL, "draft", "relu", "--model", f"scripted:{SCRIPT}", "--steps", "3",
                          "--refine", "1", "--memory", str(bank), "--json", "--out", str(tmp_path / "relu.py")],
                         cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads(out.stdout)
    assert summary["feasible"] and summary["steps"] == {"draft": 2, "refine": 1} and summary["kernels"] == 3
    assert summary["best"]["speedup"] and summary["best"]["speedup"] > 0
    session = Path(summary["path"])
    verdicts = {e["data"]["version"]: e["data"]["result"] for e in _events(session)
                if e["kind"] == "verification" and not e["data"].get("reverify")}
    assert verdicts[1]["outcome"] == "compile_fail"  # the scripted first draft misses a semicolon
    diagnostics = next(g for g in verdicts[1]["gates"] if g["name"] == "compile")["detail"]["diagnostics"]
    assert any("error" in d for d in diagnostics)
    assert verdicts[2]["outcome"] == "feasible" and verdicts[3]["outcome"] == "feasible"
    best = session / summary["best"]["file"]
    assert (tmp_path / "relu.py").read_text() == best.read_text()
    rewards = [e["data"] for e in _events(session) if e["kind"] == "reward"]
    assert [r["version"] for r in rewards] == [1, 2, 3] and all(r["credited"] for r in rewards)
    assert bank.exists()


def test_kill_during_verification_then_resume_finishes_that_step(tmp_path):
    bank = tmp_path / "bank.json"
    # No cached verdict, so the kill lands while v2 is really being verified: a memory limit no other run
    # used (it is part of every verdict's key) rather than a cold build root of its own, which rebuilt the
    # shared headers and bindings (about 100 s). The suite's build root stays warm for it.
    memory_gb = f"{7 + secrets.randbelow(10**6) / 10**6:.6f}"
    env = _env(tmp_path)
    proc = subprocess.Popen([*EVOKERNEL, "draft", "relu", "--model", f"scripted:{SCRIPT}", "--steps", "3",
                             "--refine", "1", "--memory", str(bank), "--memory-gb", memory_gb, "--json"],
                            cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    sessions = tmp_path / "sessions"
    deadline = time.monotonic() + 600
    session = None
    try:
        while True:  # wait until the second kernel (the first that builds) is being verified
            assert proc.poll() is None, "the draft finished before it could be killed"
            assert time.monotonic() < deadline, "no verification of v2 started"
            found = [d for d in sessions.iterdir()] if sessions.is_dir() else []
            if found and (found[0] / "events.jsonl").exists():
                session = found[0]
                events = _events(session)
                if events and events[-1]["kind"] in ("kernel", "gate") and events[-1]["data"].get("version") == 2:
                    break
            time.sleep(0.02)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    events = _events(session)
    assert not any(e["kind"] == "verification" and e["data"]["version"] == 2 for e in events)

    out = subprocess.run([*EVOKERNEL, "resume", session.name, "--memory", str(bank), "--json",
                          "--out", str(tmp_path / "relu.py")], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads(out.stdout)
    assert summary["feasible"] and summary["steps"] == {"draft": 2, "refine": 1} and summary["kernels"] == 3
    events = _events(session)
    kinds = [e["kind"] for e in events]
    assert kinds.count("step_resumed") == 1
    resumed_at = kinds.index("step_resumed")
    after = events[resumed_at:]
    v2 = [e["data"] for e in after if e["kind"] == "verification" and e["data"]["version"] == 2]
    assert len(v2) == 1 and v2[0]["result"]["outcome"] == "feasible"  # the kernel in flight, verified once
    reward = next(e["data"] for e in after if e["kind"] == "reward")
    assert reward["version"] == 2 and reward["credited"]  # and its memories credited
    assert any(e["kind"] == "q_update" for e in after)
    assert [e["data"]["version"] for e in events if e["kind"] == "kernel"] == [1, 2, 3]  # no reply was skipped
