"""Progress inside a running gate (issue 34): `verify(on_gate=...)` with a three-argument callback hears
`(gate, "running", Progress)` as the work moves on (bindings for a new signature, trial k/N, timing rounds);
a two-argument callback hears the gate states only, as before. Real builds and runs on the CPU backend."""

from __future__ import annotations

import random
import uuid

import pytest

from verifier import verify
from verifier.cache.verdict_key import Notify
from verifier.result import PROGRESS_STEPS, Progress

from .conftest import RELU_BODY, shared_kernel

pytestmark = pytest.mark.slow


def _watch(seen: list):
    def on_gate(name, state, progress=None):
        seen.append((name, state, progress))
    return on_gate


def test_trials_and_timing_rounds_are_told_as_they_happen(task_source, make_config, kernel_source):
    seen: list = []
    res = verify(task_source("relu"), kernel_source(RELU_BODY), config=make_config(trials=3),
                 on_gate=_watch(seen))
    assert res.feasible, res.feedback()
    told = [p for _, _, p in seen if p is not None]
    assert all(isinstance(p, Progress) and p.step in PROGRESS_STEPS for p in told)
    trials = [p for p in told if p.step == "trial"]
    total = trials[0].total
    # three ordinary trials, then the numerics probes: every one announced once, in order, out of the same total
    assert total is not None and total >= 3
    assert [p.done for p in trials] == list(range(1, total + 1))
    assert [p.text for p in trials[:3]] == [f"trial {k}/{total}" for k in (1, 2, 3)]
    assert all(p.gate == "correctness" for p in trials)
    rounds = [p for p in told if p.step == "round"]
    assert rounds and [p.done for p in rounds] == list(range(1, len(rounds) + 1))
    assert rounds[-1].kept is not None and rounds[-1].kept <= rounds[-1].done
    assert rounds[0].text.startswith("timing round 1 (")
    assert any(p.step == "calibrate" for p in told) and all(p.gate == "latency" for p in told if p.step == "round")
    # the estimate so far rides on the rounds once there is one, in the text as in the fields
    with_figure = [p for p in rounds if p.speedup is not None]
    assert with_figure and with_figure[-1].lo <= with_figure[-1].speedup <= with_figure[-1].hi
    assert "so far" in with_figure[-1].text
    # progress comes while its gate runs: trials after correctness started, before its verdict
    order = [(n, s) if p is None else ("progress", p.step) for n, s, p in seen]
    assert order.index(("correctness", "running")) < order.index(("progress", "trial"))
    assert order.index(("progress", "trial")) < order.index(("latency", "running")) < order.index(("progress", "round"))


def test_a_two_argument_callback_hears_only_gate_states(task_source, make_config, kernel_source):
    seen: list = []
    verify(task_source("relu"), kernel_source(RELU_BODY + "\n    // two-argument watcher"), config=make_config(),
           on_gate=lambda name, state: seen.append((name, state)))
    assert seen and all(state in ("running", "pass", "fail", "skip") for _, state in seen)
    assert seen.count(("correctness", "running")) == 1


def test_a_new_signature_says_its_bindings_are_being_built(task_source, make_config):
    """Argument types never built before need new bindings (keyed by the functions' types) from the trusted
    side: the slow part of a first build (~20 s), so it is said while the compile gate runs."""
    rng = random.Random(uuid.uuid4().int)
    extra = [rng.choice(("int64_t", "double", "bool")) for _ in range(rng.randint(6, 12))]
    params = "".join(f", {t} a{i}" for i, t in enumerate(extra))
    args = "".join(", 1" for _ in extra)
    source = shared_kernel(RELU_BODY, forward=f"return _ext.kernel_forward(x{args})").replace(
        "kernel_forward(torch::Tensor x)", f"kernel_forward(torch::Tensor x{params})")
    seen: list = []
    res = verify(task_source("relu"), source, config=make_config(), on_gate=_watch(seen))
    assert res.gate("compile").passed, res.feedback()
    told = [(n, p) for n, _, p in seen if p is not None and p.step == "bindings"]
    assert told == [("compile", Progress("compile", "bindings", "building the bindings for a new signature (once, ~20 s)"))]


def test_a_failing_watcher_never_fails_the_verification():
    def broken(name, state, progress=None):
        raise RuntimeError("watcher bug")

    notify = Notify(broken)
    notify("compile", "running")
    notify("compile", "running", Progress("compile", "bindings", "x"))
    assert notify.takes_progress and not Notify(lambda n, s: None).takes_progress


def test_progress_round_trips_through_its_dict():
    p = Progress("latency", "round", "timing round 4 (3 kept)", done=4, total=30, kept=3, speedup=1.2, lo=1.1, hi=1.3)
    assert Progress.from_dict(p.to_dict()) == p
    assert "speedup" not in Progress("correctness", "trial", "trial 1/2", done=1, total=2).to_dict()


def test_verify_in_a_pipe_prints_plain_phase_lines_from_the_task_checks_to_the_rounds(tmp_path, build_root):
    """Not a terminal: one plain line per phase (task checks, gates, trials, rounds), no spinner glyphs;
    stderr stays empty for a verdict (it carries only a problem's one line)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from core.tasks import load_task

    task = tmp_path / "my_relu.py"  # a task file, not the built-in: its checks run
    task.write_text(load_task("relu").source)
    cand = Path(__file__).resolve().parents[1] / "candidates" / "cpu" / "relu.py"
    env = {**os.environ, "EVOKERNEL_BUILD_DIR": str(build_root), "NO_COLOR": "1", "COLUMNS": "120"}
    proc = subprocess.run([sys.executable, "-m", "evokernel_tui.cli", "verify", str(task), str(cand), "--trials", "2",
                           "--no-cache"], capture_output=True, text=True, timeout=600, env=env,
                          cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()

    def first(prefix: str) -> int:
        return next(i for i, line in enumerate(lines) if line.startswith(prefix))

    order = [first("checking the task: memory estimate ["), first("checking the task: degeneracy probe on the device"),
             first("compile: building the kernel"), first("correctness: trial 1/"), first("correctness: trial 2/"),
             first("profile: one profiled call"), first("latency: timing round 1 (")]
    assert order == sorted(order), lines
    assert not any(ch in proc.stdout for ch in "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"), proc.stdout
    assert proc.stderr.strip() == ""
    assert any("relu" in line and "feasible" in line.lower() or "pass" in line for line in lines[order[-1]:])
