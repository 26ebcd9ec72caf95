"""The rest of the fourth held-out hostile round (issue 37): checks a kernel could tell from trials, the
no-op kernel under the default policy, an allocator setting in the candidate's process, and caps.

* Decoy and copy checks on fresh inputs: the only checked forward used to be a replay of an earlier
  trial's inputs, so a kernel that computes on a repeated input and hands torch's answer back on every
  fresh one was feasible under `kernelbench`. A second checked forward, the fresh probe, now takes the
  place of one ordinary trial at a slot drawn from the run's secret generator (`decoy.plan`).
* The first held-out round's no-op kernel (its function hands its input back, torch's relu does the
  work) is refused under `kernelbench` by `copy-kernel` (it already was on main; now a test says so).
* `mallopt(M_MMAP_MAX, 0)` in an honest kernel's module: the own-stub bound left its calls a gain (their
  outputs from reused heap pages, the reference's mmapped afresh); both processes now time their rounds
  under the cheapest allocator settings (`paired_calls.steady_heap`).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from verifier import verify

ROUND4 = Path(__file__).resolve().parents[1] / "candidates" / "hostile_round4"


# ---------------------------------------------------------------------------------------------------
# decoy and copy checks on fresh inputs as well as repeats
# ---------------------------------------------------------------------------------------------------


def test_the_fresh_probe_slot_is_drawn_among_the_ordinary_trials():
    """Every ordinary slot can be the fresh probe (the first trial the candidate sees, the last, any other),
    and the replay never repeats it."""
    from verifier.correctness.decoy import ordinary_slots, plan

    assert ordinary_slots(5) == 6 and ordinary_slots(0) == 2
    seen = set()
    for seed in range(200):
        p = plan(random.Random(seed), 3)
        seen.add(p["fresh"])
        assert p["fresh"] not in (p["of"], p["after"]) and p["of"] < p["after"]
    assert seen == {0, 1, 2, 3}


def _fresh(**kw) -> dict:
    return {"trial": 1, "fresh": True, "kernel_calls": 1, "replaced": 1, "results": 1, "copies": 0, "reruns": 0,
            "error": "", **kw}


def test_a_garbled_fresh_call_whose_outputs_stay_right_is_a_decoy():
    from verifier.correctness.decoy import kernel_findings, verdict, work_record

    replay = {"trial": 0, "kernel_calls": 1, "replaced": 1, "results": 1, "copies": 0, "error": "",
              "trial_digests": ["a"], "probe_digests": ["b"]}  # the replay: the kernel's result reached it
    split = {"kernel_ms": 1.0, "torch_ms": 2.0, "torch_ops": [("aten::clamp_min", 2.0)]}
    base = {"kernel_calls": [1, 1], "decoy_probe": replay, "work_split": split}
    assert kernel_findings(base) == []
    assert kernel_findings({**base, "fresh_probe": _fresh(right=False)}) == []  # garbage reached the outputs
    raised = kernel_findings({**base, "fresh_probe": _fresh(right=False, error="ValueError: x")})
    assert [r for r, _ in raised] == ["decoy-kernel"] and "forward raised" in raised[0][1]  # never a skipped check
    rules = kernel_findings({**base, "fresh_probe": _fresh(right=True)})
    assert [r for r, _ in rules] == ["decoy-kernel"] and "fresh inputs" in rules[0][1]
    assert "raised" in verdict(_fresh(right=True, error="RuntimeError: y"))  # raised on garbage: refused
    # the copy check reads the fresh probe too, and so does the library share
    copying = _fresh(right=False, copies=1)
    assert [r for r, _ in kernel_findings({**base, "fresh_probe": copying})] == ["copy-kernel"]
    assert work_record({**base, "fresh_probe": copying}) is copying
    assert work_record(base) is replay
    skipped = kernel_findings({**base, "fresh_probe": _fresh(kernel_calls=0, results=0, replaced=0)})
    assert [r for r, _ in skipped] == ["custom-kernel-skipped"] and "fresh inputs" in skipped[0][1]
    # the fresh probe may be the first forward: a kernel run only there is skipped on the trials, not unused
    first_only = kernel_findings({"kernel_calls": [0, 0], "fresh_probe": _fresh(right=False)})
    assert [r for r, _ in first_only] == ["custom-kernel-skipped"] and "2 of 2 correctness trials" in first_only[0][1]


@pytest.mark.slow
@pytest.mark.parametrize("name, rule, seeded", [("decoy_on_fresh_inputs", "decoy-kernel", True),
                                                ("decoy_on_fresh_inputs", "decoy-kernel", False),
                                                ("copy_on_fresh_inputs", "copy-kernel", True)],
                         ids=["decoy-seeded", "decoy-files", "copy-seeded"])
def test_a_kernel_honest_only_on_repeated_inputs_is_refused(task_source, make_config, name, rule, seeded):
    """Before: feasible under the default policy, static scan on (torch's relu in forward only reported),
    on seeded inputs and on files alike: the replay found the kernel's result in the output and no copy,
    and every fresh trial was torch's answer. Now the fresh probe, a trial like the others, finds it."""
    source = (ROUND4 / f"{name}.py").read_text()
    res = verify(task_source("relu"), source,
                 config=make_config(time_kernels=False, seeded_inputs=seeded))
    gate = res.gates[0]
    assert not res.feasible and gate.detail.get("rule") == rule, res.feedback()[:2000]
    assert gate.detail["policy"]["preset"] == "kernelbench"


# ---------------------------------------------------------------------------------------------------
# the first held-out round's no-op kernel under the default policy
# ---------------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("static_scan", [True, False], ids=["scan", "no-scan"])
def test_the_first_rounds_noop_kernel_is_refused_under_kernelbench(task_source, make_config, static_scan):
    """Its custom function hands its input back and torch's relu does the work: feasible under the default
    `kernelbench` policy before issue 37's copy check; refused by it now, with the static scan or without."""
    source = (ROUND4 / "noop_identity_relu.py").read_text()
    res = verify(task_source("relu"), source, config=make_config(static_scan=static_scan, time_kernels=False))
    gate = res.gates[0]
    assert not res.feasible and gate.detail.get("rule") == "copy-kernel", res.feedback()[:2000]
    assert gate.detail["policy"]["preset"] == "kernelbench"


# ---------------------------------------------------------------------------------------------------
# an allocator setting in the candidate's process: both sides time under the cheapest one
# ---------------------------------------------------------------------------------------------------

HEAP_PROBE = r'''
import ctypes, sys
import torch

class Info(ctypes.Structure):  # glibc's struct mallinfo2
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                               "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
from verifier.clock import paired_calls

def mapped_for(nbytes):
    before = libc.mallinfo2().hblkhd
    t = torch.empty(nbytes, dtype=torch.uint8)
    grew = libc.mallinfo2().hblkhd - before
    del t
    return grew >= nbytes

big = 64 << 20
out = [mapped_for(big)]
sets = [[torch.randn(4)] for _ in range(3)]
paired_calls.time_round(torch, lambda x: x * 2, sets, "cpu")  # what both processes run for a timed round
out.append(mapped_for(big))
paired_calls.default_heap()  # the reference worker before its next verification
out.append(mapped_for(big))
print(" ".join(map(str, out)))
'''


def test_a_timed_round_takes_no_block_from_mmap_in_either_process():
    """`time_round` (the harness's and the reference worker's loop, and `draw_sets` / `load_sets` before it)
    sets the cheapest allocator settings, so a 64 MiB output comes from the heap there as it would for a
    candidate that ran `mallopt(M_MMAP_MAX, 0)`; the reference worker goes back to the environment's
    settings (`default_heap`) before its next verification."""
    import ctypes
    import subprocess
    import sys

    if not hasattr(ctypes.CDLL(None), "mallinfo2"):
        pytest.skip("no glibc mallinfo2 here")
    from verifier.backends.cpu import CpuBackend

    env = {**__import__("os").environ, **CpuBackend().child_env()}
    proc = subprocess.run([sys.executable, "-c", HEAP_PROBE], capture_output=True, text=True, timeout=120,
                          env=env, cwd=str(Path(__file__).resolve().parents[2]))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["True", "False", "True"], proc.stdout


MALLOPT_LINE = "ctypes.CDLL(None).mallopt(M_MMAP_MAX, 0)"


@pytest.mark.alone
@pytest.mark.slow
def test_the_mallopt_line_buys_nothing_over_the_same_kernel_without_it(task_source, make_config):
    """The relu with `mallopt(M_MMAP_MAX, 0)` against the identical kernel without the line, re-timed in
    paired rounds (`verifier.api.compare`) in both orders, so the order's own bias cancels: the geometric
    mean of mallopt/honest. Before (landed own-stub bound, default allocator in both processes): 12.4x and
    24.9x on the loaded 2-core machine (softmax 2048x4096: 3.4x and 1.3x), its 32 MiB outputs from reused
    heap pages against mmapped pages faulted in afresh each call. Now the trusted timing code sets the
    cheapest settings in both processes (`paired_calls.steady_heap`): 0.66-1.66 per order, about 1 a pair."""
    import math

    from verifier.api import compare

    hostile = (ROUND4 / "relu_mallopt.py").read_text()
    honest = hostile.replace(MALLOPT_LINE, "pass  # the same kernel without the line")
    assert honest != hostile
    config = make_config(static_scan=False, timing_budget_s=4.0, min_rounds=6)
    ratios = []
    for first, second in ((honest, hostile), (hostile, honest)):
        for _attempt in range(2):  # a loaded machine can leave no round measurable: once more
            res = compare(task_source("relu"), first, second, config=config)
            if "error" not in res and res.get("speedup"):
                break
        assert "error" not in res and res.get("speedup"), res
        ratios.append(res["speedup"] if first is honest else 1.0 / res["speedup"])  # mallopt over honest
    gain = math.sqrt(ratios[0] * ratios[1])
    print({"mallopt_over_honest": ratios, "geometric_mean": gain})
    # after: 0.47-1.33 in seven pairs on the loaded 2-core machine; before: 17.5 (12.4x and 24.9x)
    assert gain < 3.0, ratios


def test_a_forward_queued_behind_a_failed_trial_is_waited_for_before_the_report():
    """The harness runs the next forward while the parent compares the last one; when that comparison
    fails, the report comes only after the queued forward. Waited for 10 s alone, a slow queued forward
    (the fresh probe of a Triton kernel under the interpreter on a loaded machine) lost the report and its
    builds, and the verdict read `no-custom-kernel` instead of the failed trial."""
    from types import SimpleNamespace

    from verifier.config import VerifyConfig
    from verifier.run.verification import _Run

    waits = []

    class Job:
        def send(self, cmd):
            return True

        def expect(self, phases, timeout):
            waits.append(timeout)
            return None

        def finish(self, timeout):
            return SimpleNamespace(exit_code=0, timed_out=False)

    run = _Run.__new__(_Run)
    run.job, run.config, run.candidate = Job(), VerifyConfig(run_timeout_s=60.0), {}
    for queued, wait in ((1, 70.0), (0, 10.0)):
        run.trials = SimpleNamespace(forwards_queued=queued)  # forwards the trials left unanswered
        run.finish_candidate()
        assert waits[-1] == wait
