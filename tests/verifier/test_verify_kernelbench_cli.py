"""`evokernel verify --kernelbench DIR --level L --problem N CANDIDATE` end to end on KernelBench-style files we
wrote (tests/candidates/kernelbench): the one-positional form, the tolerance presets, scalar outputs,
parameters made with torch.randn in __init__, and the up-front refusal of a problem too big for memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CANDIDATES = Path(__file__).resolve().parents[1] / "candidates"
KB = CANDIDATES / "kernelbench"
KB_CAND = KB / "candidates"


def _verify(args: list[str], build_root: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "EVOKERNEL_BUILD_DIR": str(build_root), "NO_COLOR": "1", "COLUMNS": "120"}
    return subprocess.run([sys.executable, "-m", "evokernel_tui.cli", "verify", *args], capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=Path(__file__).resolve().parents[2])


def _kb(level: int, problem: int) -> list[str]:
    return ["--kernelbench", str(KB), "--level", str(level), "--problem", str(problem)]


def _error_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode not in (0, None)
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip().startswith("Error:")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_argument_forms_are_checked(build_root):
    relu = str(CANDIDATES / "cpu" / "relu.py")
    assert "(1 arguments given)" in _error_line(_verify([relu], build_root))
    assert "with --kernelbench give only the CANDIDATE" in _error_line(_verify([*_kb(1, 19), "relu", relu], build_root))
    assert "--level and --problem go with --kernelbench" in _error_line(_verify(["--level", "1", "relu", relu],
                                                                                 build_root))
    assert "no problem 99" in _error_line(_verify([*_kb(1, 99), relu], build_root))
    assert "does not exist" in _error_line(_verify([*_kb(1, 19), "missing.py"], build_root))


def test_too_big_problem_is_refused_before_anything_runs(build_root, monkeypatch):
    monkeypatch.setenv("EVOKERNEL_AVAILABLE_GB", "64")  # a machine with room for the advice
    from verifier.sandbox.isolation import private_scratch

    runs = private_scratch() / "runs"
    before = set(runs.glob("run-*")) if runs.exists() else set()
    proc = _verify([*_kb(1, 100), str(CANDIDATES / "cpu" / "relu.py")], build_root, timeout=120)
    line = _error_line(proc)
    assert "about 12.0 GiB" in line and "8 GiB memory limit" in line and "--memory-gb 15" in line
    after = set(runs.glob("run-*")) if runs.exists() else set()
    assert not (after - before), "a verification started for a problem that was refused"


@pytest.mark.slow
def test_randn_parameters_in_init_are_feasible(build_root):
    proc = _verify([*_kb(2, 12), str(KB_CAND / "level2_12_gemm_multiply_bias.py"), "--json", "--trials", "2"],
                   build_root)
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    assert proc.returncode == 0, (data["gates"], proc.stderr)
    assert data["task"] == "12_Gemm_Multiply_Bias" and data["outcome"] == "feasible"
    assert data["tolerance"].startswith("kernelbench") and data["degenerate"] == []


@pytest.mark.slow
def test_scalar_output_and_the_tolerance_presets(build_root):
    honest = _verify([*_kb(1, 12), str(KB_CAND / "level1_12_mse_loss.py"), "--trials", "2"], build_root)
    assert honest.returncode == 0, honest.stdout + honest.stderr
    assert "feasible" in honest.stdout and "tolerance: kernelbench: fp32 atol=rtol=1e-4" in honest.stdout
    wrong = str(KB_CAND / "level1_12_mse_loss_wrong.py")
    strict = _verify([*_kb(1, 12), wrong, "--json", "--trials", "2"], build_root)
    data = json.loads(strict.stdout.strip().splitlines()[-1])
    assert strict.returncode == 1 and data["outcome"] == "incorrect"
    assert "atol=0.0001" in data["gates"][2]["detail"]["mismatch"]
    loose = _verify([*_kb(1, 12), wrong, "--tolerance", "v0", "--trials", "2"], build_root)
    assert "tolerance: v0: atol=rtol=0.01" in loose.stdout
    # at 1e-2 the loss of any two random inputs is close enough to any other: the task is flagged
    assert "degenerate: outputs that ignore the inputs pass" in loose.stdout


@pytest.mark.slow
def test_a_copy_of_the_input_fails_where_relu_is_the_identity(build_root):
    """KernelBench head's ReLU draws torch.rand (ReLU is the identity there): the probe finds that a copy of the
    input passes, the trials add normal and uniform inputs, and the copy kernel fails on them (issue 22)."""
    task = CANDIDATES / "kernelbench_head" / "19_ReLU_rand01.py"
    proc = _verify([str(task), str(CANDIDATES / "hostile_dynamic" / "cpp_copy_input.py"), "--json", "--no-cache",
                    "--trials", "3"], build_root)
    assert proc.returncode == 1, proc.stderr
    verdict = json.loads(proc.stdout)
    failed = next(g for g in verdict["gates"] if g["status"] == "fail")
    assert failed["name"] == "correctness" and "normal inputs" in failed["reason"], failed
    assert "input 0 passed through" in verdict["degenerate"]
