"""One task through `evokernel bench` with the real CPU verifier in a process pool, then replayed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from evokernel_tui.cli import cli

CANDIDATE = Path(__file__).resolve().parent.parent / "candidates" / "cpu" / "relu.py"


@pytest.mark.slow
def test_real_bench_and_replay_of_one_task(tmp_path):
    reply = f"An OpenMP loop.\n\n```python\n{CANDIDATE.read_text()}```\n"
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"tasks": {"relu": [reply]}}))
    out = tmp_path / "run"
    result = CliRunner().invoke(cli, [
        "bench", "--tasks", "relu", "--model", f"scripted:{script}", "--draft-steps", "1", "--refine-steps", "0",
        "--executor", "pool", "--workers", "1", "--fresh-memory", "--no-verdict-cache", "--out", str(out)])
    assert result.exit_code == 0, result.output
    (outcome,) = json.loads((out / "bench.json").read_text())["outcomes"]
    assert outcome["compiled"] and outcome["feasible"] and outcome["kernels"] == 1
    assert outcome["speedup"] > 0 and outcome["best_ms"] == outcome["first_feasible_ms"]
    assert outcome["device"] and outcome["devices"] == ["cpu"] and outcome["best_device"] == "cpu"
    replay = CliRunner().invoke(cli, ["bench", "--replay", str(out), "--executor", "pool", "--no-verdict-cache",
                                      "--out", str(tmp_path / "replay")])
    assert replay.exit_code == 0, replay.output
    (again,) = json.loads((tmp_path / "replay" / "bench.json").read_text())["outcomes"]
    assert again["feasible"] and again["best_ms"] > 0
