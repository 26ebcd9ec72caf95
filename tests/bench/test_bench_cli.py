"""`evokernel bench` and `bench compare` end to end, with the fake verifier in place of the real one."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))

from bench_fakes import fake_verify, improving, reply, write_script  # noqa: E402

from evokernel_tui.cli import cli  # noqa: E402

SCRIPTS = {"relu": improving(2.0, 0.5), "gelu": [reply("feasible", 4.0), reply("feasible", 4.0)],
           "sigmoid": [reply("compile_fail"), reply("incorrect")]}


@pytest.fixture
def fake(monkeypatch):
    import evokernel_tui.commands.bench as bench_cmd

    monkeypatch.setattr(bench_cmd, "JOB", fake_verify)
    monkeypatch.setattr(bench_cmd, "task_shapes", lambda task: "")


def bench(*args):
    return CliRunner().invoke(cli, ["bench", *args], catch_exceptions=False)


def run_args(tmp_path, out, retrieval="value"):
    script = write_script(tmp_path / "script.json", SCRIPTS)
    return ["--tasks", "relu,gelu,sigmoid", "--model", f"scripted:{script}", "--draft-steps", "2", "--refine-steps", "2",
            "--executor", "inprocess", "--fresh-memory", "--retrieval", retrieval, "--out", str(out)]


def test_no_model_says_how_to_configure_in_one_line(tmp_path):
    result = bench("--tasks", "relu", "--out", str(tmp_path / "o"))
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "bench needs a model" in lines[0] and "--model" in lines[0] and "--replay" in lines[0]


def test_bad_input_is_one_line(tmp_path, fake):
    script = write_script(tmp_path / "s.json", SCRIPTS)
    for args, message in [
        (["--tasks", "nosuch"], "unknown task(s) in --tasks: nosuch"),
        (["--levels", "x"], "--levels takes numbers"),
        (["--memory", "m.json", "--fresh-memory"], "not both"),
        (["--address", "ray://x:1"], "--address is for --executor ray"),
    ]:
        result = bench(*args, "--model", f"scripted:{script}", "--out", str(tmp_path / "o"))
        assert result.exit_code == 1, result.output
        assert message in result.output and "Traceback" not in result.output


def test_run_writes_json_report_and_table_then_resumes(tmp_path, fake):
    out = tmp_path / "run"
    result = bench(*run_args(tmp_path, out))
    assert result.exit_code == 0, result.output
    assert "[1/3] relu: correct 2.00x vs eager, refine 4.00x" in result.output
    assert "sigmoid: incorrect" in result.output
    data = json.loads((out / "bench.json").read_text())
    assert data["complete"] and [o["task"] for o in data["outcomes"]] == ["relu", "gelu", "sigmoid"]
    assert data["settings"]["memory"] == str(out / "memory.json")
    assert (out / "report.md").exists() and (out / "speedup.png").exists()
    assert "all" in result.output and "67%" in result.output   # two of three correct
    again = bench(*run_args(tmp_path, out))
    assert again.exit_code == 0 and again.output.count("recorded earlier, skipped") == 3


def test_compare_two_runs(tmp_path, fake):
    a, b = tmp_path / "a", tmp_path / "b"
    assert bench(*run_args(tmp_path, a)).exit_code == 0
    assert bench(*run_args(tmp_path, b, retrieval="similarity")).exit_code == 0
    data = json.loads((b / "bench.json").read_text())
    data["outcomes"][1]["speedup"] = 0.5                 # gelu twice as fast in B
    (b / "bench.json").write_text(json.dumps(data))
    result = CliRunner().invoke(cli, ["bench", "compare", str(a), str(b / "bench.json")])
    assert result.exit_code == 0, result.output
    assert "retrieval value" in result.output and "retrieval similarity" in result.output
    gelu = next(line for line in result.output.splitlines() if "gelu" in line)
    assert "0.25x" in gelu and "0.50x" in gelu and "2.00x" in gelu
    js = json.loads(CliRunner().invoke(cli, ["bench", "compare", str(a), str(b), "--json"]).output)
    assert [t["ratio"] for t in js["tasks"]] == [1.0, 2.0, None]
    bad = CliRunner().invoke(cli, ["bench", "compare", str(a), str(tmp_path / "script.json")])
    assert bad.exit_code == 1 and "not an evokernel bench file" in bad.output


def test_compare_marks_a_noisy_ratio_and_does_not_count_it_in_fast_1(tmp_path, fake):
    """Issue 34: one noisy ratio moved fast_1 by 33 points in `bench compare`, printed as a plain 1.07x."""
    a, b = tmp_path / "a", tmp_path / "b"
    assert bench(*run_args(tmp_path, a)).exit_code == 0
    assert bench(*run_args(tmp_path, b)).exit_code == 0
    data = json.loads((b / "bench.json").read_text())
    data["outcomes"][0]["noisy"] = True                  # relu's 2.00x in B could not be resolved
    (b / "bench.json").write_text(json.dumps(data))
    result = CliRunner().invoke(cli, ["bench", "compare", str(a), str(b)], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    relu = next(line for line in result.output.splitlines() if line.strip("│ ").startswith("relu"))
    assert "2.00x noisy" in relu and "within noise" in relu, relu
    fast_1 = next(line for line in result.output.splitlines() if "fast_1 " in line)
    assert "-33 pt" in fast_1, fast_1                   # relu no longer counts as faster in B
    noisy_row = next(line for line in result.output.splitlines() if "noisy speedups" in line)
    assert [c.strip() for c in noisy_row.split("│")][3:5] == ["0", "1"], noisy_row
    assert "no measured difference" in result.output


def test_the_interval_travels_with_the_speedup_and_compare_says_when_a_difference_is_within_noise(tmp_path, fake):
    """Issue 34: the interval travels with every figure (bench.json, the per-task lines, report.md), and
    `bench compare` says a ratio is within noise when A's and B's 95% intervals overlap, though neither
    was marked noisy; a ratio whose intervals are apart is a measured difference."""
    a, b = tmp_path / "a", tmp_path / "b"
    assert bench(*run_args(tmp_path, a)).exit_code == 0
    assert bench(*run_args(tmp_path, b)).exit_code == 0
    for folder, relu, gelu in ((a, (1.8, 2.2), (0.2, 0.3)), (b, (2.1, 2.6), (0.45, 0.55))):
        data = json.loads((folder / "bench.json").read_text())
        assert "speedup_lo" in data["outcomes"][0] and "speedup_hi" in data["outcomes"][0]
        data["outcomes"][0]["speedup_lo"], data["outcomes"][0]["speedup_hi"] = relu
        data["outcomes"][1]["speedup_lo"], data["outcomes"][1]["speedup_hi"] = gelu
        (folder / "bench.json").write_text(json.dumps(data))
    data["outcomes"][0]["speedup"] = 2.3                # relu 1.15x in B, inside both intervals
    data["outcomes"][1]["speedup"] = 0.5                # gelu 2x in B, intervals apart
    (b / "bench.json").write_text(json.dumps(data))
    result = CliRunner().invoke(cli, ["bench", "compare", str(a), str(b)], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    rows = {line.strip("│ ").split()[0]: line for line in result.output.splitlines() if line.startswith("│")}
    assert "1.15x within noise" in rows["relu"] and "within noise" not in rows["gelu"], result.output
    assert "intervals overlap" in result.output
    js = json.loads(CliRunner().invoke(cli, ["bench", "compare", str(a), str(b), "--json"]).output)
    assert [t["within_noise"] for t in js["tasks"]] == [True, False, False]


def test_the_per_task_line_and_report_show_the_interval():
    from core.bench import fmt_speed
    from core.bench.report import render_markdown
    from tests.bench.test_metrics import rec

    assert fmt_speed(1.07, True, (0.69, 1.52)) == "1.07x [0.69-1.52] noisy"
    assert fmt_speed(2.0, False, (1.9, 2.1)) == "2.00x [1.90-2.10]" and fmt_speed(None, True, (1, 2)) == "-"
    o = rec("relu", 1, speedup=2.0)
    o.speedup_lo, o.speedup_hi = 1.9, 2.1
    text = render_markdown({"settings": {}, "outcomes": [o.to_dict()]})
    assert "2.00x [1.90-2.10]" in next(line for line in text.splitlines() if line.startswith("| relu"))


def test_replay_needs_no_model(tmp_path, fake, monkeypatch):
    import evokernel_tui.commands.bench as bench_cmd

    src = tmp_path / "run"
    assert bench(*run_args(tmp_path, src)).exit_code == 0
    cached = []

    def job(ref, cand, backend="cpu", config=None):
        cached.append(config.use_cache)
        return fake_verify(ref, cand, backend, config)

    monkeypatch.setattr(bench_cmd, "JOB", job)
    result = bench("--replay", str(src), "--executor", "inprocess", "--out", str(tmp_path / "replay"))
    assert result.exit_code == 0, result.output
    assert "[3/3] sigmoid" in result.output
    assert cached and not any(cached)                      # a replay never reuses a cached verdict
    data = json.loads((tmp_path / "replay" / "bench.json").read_text())
    assert data["settings"]["mode"] == "replay" and data["complete"]
    assert [o["feasible"] for o in data["outcomes"]] == [True, True, False]
    assert "Recorded vs here" in (tmp_path / "replay" / "report.md").read_text()


def test_compare_compile_reaches_the_verifier_and_the_report(tmp_path, monkeypatch):
    import evokernel_tui.commands.bench as bench_cmd

    seen = []

    def job(ref, cand, backend="cpu", config=None):
        seen.append(config.compare_compile)
        res = fake_verify(ref, cand, backend, config)
        if res.feasible and config.compare_compile:
            res.compiled_ms = 0.6
        return res

    monkeypatch.setattr(bench_cmd, "JOB", job)
    monkeypatch.setattr(bench_cmd, "task_shapes", lambda task: "")
    out = tmp_path / "run"
    result = bench(*run_args(tmp_path, out), "--compare-compile")
    assert result.exit_code == 0, result.output
    assert seen and all(seen)
    report = (out / "report.md").read_text()
    assert "Against torch.compile:" in report
    data = json.loads((out / "bench.json").read_text())
    assert data["settings"]["compare_compile"] is True
    relu = data["outcomes"][0]
    assert relu["speedup_vs_compile"] == pytest.approx(1.2)      # 0.6 ms compiled vs 0.5 ms best


def test_a_bench_in_a_pipe_says_which_task_is_in_which_phase(tmp_path, fake):
    """Issue 34: not a terminal, each phase change of each task is one plain line (no spinners), between the
    task's start and its result line."""
    result = bench(*run_args(tmp_path, tmp_path / "run"))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    relu = [line for line in lines if line.startswith("  relu: ")]
    assert relu[0].startswith("  relu: asking the model for a draft [")
    assert any(line.startswith("  relu: verifying v1: compile: building the kernel [") for line in relu)
    assert any(line.startswith("  relu: asking the model for a refinement [") for line in relu)
    assert lines.index(relu[-1]) < next(i for i, line in enumerate(lines) if line.startswith("[1/3] relu:"))
    assert not any(ch in result.output for ch in "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")
