"""`evokernel verify TASK CANDIDATE [--json]` end to end, through the installed entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CANDIDATES = Path(__file__).resolve().parents[1] / "candidates"


def _evokernel(args: list[str], build_root: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "EVOKERNEL_BUILD_DIR": str(build_root), "NO_COLOR": "1", "COLUMNS": "120"}
    return subprocess.run([sys.executable, "-m", "evokernel_tui.cli", "verify", *args], capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=Path(__file__).resolve().parents[2])


def _one_line_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode not in (0, None)
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_hostile_candidate_json(build_root):
    path = CANDIDATES / "hostile" / "torch_relu.py"
    marked = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if "HACK: torch-op" in text)
    proc = _evokernel(["relu", str(path), "--json", "--policy", "strict"], build_root)
    assert proc.returncode == 1, proc.stderr
    out = proc.stdout.strip().splitlines()
    assert len(out) == 1
    data = json.loads(out[0])
    assert data["feasible"] is False and data["outcome"] == "hack_fail"
    assert data["task"] == "relu"
    gate = data["gates"][0]
    assert gate["name"] == "anti_hacking" and gate["status"] == "fail"
    assert (gate["detail"]["rule"], gate["detail"]["line"]) == ("torch-op", marked)


def test_hostile_candidate_table(build_root):
    proc = _evokernel(["relu", str(CANDIDATES / "hostile" / "self_cache.py")], build_root)
    assert proc.returncode == 1
    assert "output-cache" in proc.stdout and "Anti-hacking" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("task_file", ["no_model.py", "no_get_inputs.py"])
def test_bad_task_file_is_one_clear_line(task_file, build_root):
    proc = _evokernel([str(CANDIDATES / "bad_tasks" / task_file), str(CANDIDATES / "cpu" / "relu.py")], build_root)
    line = _one_line_error(proc)
    assert line.startswith("Error:") and "task" in line


def test_task_with_syntax_error(tmp_path, build_root):
    bad = tmp_path / "broken_task.py"
    bad.write_text("import torch\nclass Model(torch.nn.Module)\n    pass\n")
    line = _one_line_error(_evokernel([str(bad), str(CANDIDATES / "cpu" / "relu.py")], build_root))
    assert "broken_task" in line or "syntax" in line.lower()


def test_unknown_task_and_missing_candidate(tmp_path, build_root):
    line = _one_line_error(_evokernel(["no_such_task_xyz", str(CANDIDATES / "cpu" / "relu.py")], build_root))
    assert "no_such_task_xyz" in line
    line = _one_line_error(_evokernel(["relu", str(tmp_path / "missing.py")], build_root))
    assert "missing.py" in line

    # not UTF-8: one line too (UnicodeDecodeError has no strerror; the type checker found it)
    (tmp_path / "latin1.py").write_bytes(b"# caf\xe9\nimport torch\n")
    line = _one_line_error(_evokernel(["relu", str(tmp_path / "latin1.py")], build_root))
    assert "latin1.py" in line


@pytest.mark.slow
def test_reference_that_raises_is_one_clear_line(build_root):
    proc = _evokernel([str(CANDIDATES / "bad_tasks" / "forward_raises.py"), str(CANDIDATES / "cpu" / "relu.py"),
                       "--trials", "2"], build_root)
    line = _one_line_error(proc)
    assert "broken on purpose" in line


@pytest.mark.slow
def test_honest_candidate_json_exit_zero(build_root):
    proc = _evokernel(["relu", str(CANDIDATES / "cpu" / "relu.py"), "--json", "--trials", "2", "--no-cache"],
                      build_root)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout.strip().splitlines()
    assert len(out) == 1
    data = json.loads(out[0])
    assert data["feasible"] is True and data["outcome"] == "feasible"
    assert [g["status"] for g in data["gates"]] == ["pass"] * 5
    assert data["latency_ms"] > 0 and data["speedup"] > 0


@pytest.mark.slow
def test_incorrect_candidate_exit_one(tmp_path, build_root):
    source = (CANDIDATES / "cpu" / "relu.py").read_text().replace("v > 0.0f ? v : 0.0f", "v > 0.0f ? v : -1.0f")
    assert "-1.0f" in source
    cand = tmp_path / "wrong_relu.py"
    cand.write_text(source)
    proc = _evokernel(["relu", str(cand), "--json", "--trials", "2", "--no-cache"], build_root)
    assert proc.returncode == 1
    data = json.loads(proc.stdout)
    assert data["outcome"] == "incorrect"
    assert data["gates"][2]["detail"]["max_abs"] >= 1.0


@pytest.mark.slow
def test_no_timing_checks_correctness_only(build_root):
    """Issue 34: a correctness-only check (`verify --no-timing`, as popcorn-cli's `test` beside `benchmark`):
    the kernel is judged feasible with no timing rounds; the latency gate says it was not timed."""
    candidate = str(CANDIDATES / "cpu" / "relu.py")
    proc = _evokernel(["relu", candidate, "--json", "--trials", "2", "--no-cache", "--no-timing"], build_root)
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    gates = {g["name"]: g for g in data["gates"]}
    assert data["feasible"] is True and gates["correctness"]["status"] == "pass"
    assert gates["latency"]["status"] == "skip" and gates["latency"]["reason"] == "not timed (--no-timing)"
    assert data["latency_ms"] is None and data["speedup"] is None and not data["timing"].get("rounds")
    table = _evokernel(["relu", candidate, "--trials", "2", "--no-timing"], build_root)  # the cached verdict
    assert table.returncode == 0 and "not timed (--no-timing)" in table.stdout
    assert "correctness only (--no-timing)" in table.stdout and "latency: timing round" not in table.stdout


def test_a_one_shot_verify_starts_no_spare_sandbox_for_a_next_verdict(monkeypatch):
    """`evokernel verify` gives one verdict and exits; it left `warm_worker` on, so a spare candidate sandbox
    was started for a next verdict that never comes: its torch import ran beside this verdict's trials and
    timed rounds (2-3 s of a 2-core machine) and it was then killed unused."""
    from click.testing import CliRunner

    import core.verifying
    from evokernel_tui.cli import cli

    seen = []

    class Enough(Exception):
        """Stops the command here: only the settings it chose are looked at. Not KeyboardInterrupt: the
        command's ctrl+c path kills every child of this process and ends it 10 s later (`stopped`), which
        took down the pytest worker during a later test (CI, session 25)."""

    def fake_verify_task(task, source, backend, config, on_gate=None):
        seen.append(config)
        raise Enough

    monkeypatch.setattr(core.verifying, "verify_task", fake_verify_task)
    result = CliRunner().invoke(cli, ["verify", "relu", str(CANDIDATES / "cpu" / "relu.py"), "--no-cache"])
    assert isinstance(result.exception, Enough), result.output
    assert len(seen) == 1 and seen[0].warm_worker is False
