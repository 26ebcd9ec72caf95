"""Honest kernels in the styles people write them (tests/candidates/honest/<task>__<style>.py): a C++
function filling a fresh output in place, several C++ functions and templated helpers, AT_DISPATCH,
nn.Linear/nn.Conv1d weights kept from __init__, std::vector outputs returned as a tuple, a 0-dim
output, a non-contiguous view handed to the C++, an in-place result for a reference that works in
place. Each must be feasible at KernelBench's default
tolerance with the static scan on: a false rejection is as serious as an accepted hack.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from core.tasks import load_task
from verifier import verify

pytestmark = pytest.mark.slow

HONEST = Path(__file__).resolve().parents[1] / "candidates" / "honest"
KB = Path(__file__).resolve().parents[1] / "candidates" / "kernelbench" / "KernelBench"
TASKS = {"row_min_max": str(HONEST / "tasks" / "row_min_max.py"), "relu_inplace": str(HONEST / "tasks" / "relu_inplace.py"),
         "kb_mse_loss": str(KB / "level1" / "12_Mse_Loss.py")}
CANDIDATES = sorted(p for p in HONEST.glob("*__*.py") if "pure_pytorch" not in p.name)


@pytest.mark.parametrize("path", CANDIDATES, ids=lambda p: p.stem)
def test_honest_style_is_feasible(path, make_config):
    task = path.stem.split("__")[0]
    # feasibility is the question here (a false rejection): the clock has its own tests, so it is off
    res = verify(load_task(TASKS.get(task, task)).source, path.read_text(), config=make_config(time_kernels=False))
    assert res.feasible, res.feedback()
    correct = next(g for g in res.gates if g.name == "correctness")
    assert correct.passed and correct.detail["atol"] is None and correct.detail["rtol"] is None, correct.detail
    probes = {r["name"]: r["status"] for r in correct.detail["probes"]}
    assert probes and "fail" not in probes.values(), probes  # an honest kernel passes the numerics probes


def test_pure_pytorch_model_is_refused_by_rule_not_by_crash(make_config):
    """A ModelNew that only re-expresses the computation with other torch ops is not a kernel: the
    anti-hacking gate names the rule and the line."""
    path = HONEST / "softmax_rows__pure_pytorch.py"
    res = verify(load_task("softmax_rows").source, path.read_text(), config=make_config(policy="strict"))
    assert not res.feasible
    gate = res.failed_gate
    assert gate.name == "anti_hacking" and gate.detail.get("rule") in ("tensor-arithmetic", "torch-op"), res.feedback()
    assert gate.detail.get("line"), gate.detail
