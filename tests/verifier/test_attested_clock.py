"""The attested clock (issue 21): the speed figure rests on what the trusted side measures.

Hostile candidates with the static scan off (as in test_isolation.py): one forges its reported
per-call times (wrapping the harness's channel so `timing_end` carries times divided by 40), one starts
a burner process that spins only while the harness waits for a command (the reference's turn). Each
is run beside the same kernel without the trick, in the same test; the comparison is a ratio with room
for this machine's noise, far from the 40x (or several-x) the tricks used to buy.
"""

from __future__ import annotations

import pytest

from tests.verifier.test_isolation import PREAMBLE, RELU_EXT
from verifier import verify

pytestmark = [pytest.mark.slow, pytest.mark.alone]  # alone: it times things (tests/conftest.py)

KERNEL = PREAMBLE + RELU_EXT  # the shared-extension relu of the isolation tests

MODEL = '''
class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.kernel_forward(x)
'''

FORGE = '''
from verifier.sandbox.channel import Channel

_mark = Channel.mark


def _forged(self, phase, **extra):
    if phase == "timing_end" and isinstance(extra.get("times_ms"), list):
        extra["times_ms"] = [t / 40.0 for t in extra["times_ms"]]
        extra["stamps"] = ["forged"]  # the window's diagnostics too: they decide nothing
    return _mark(self, phase, **extra)


Channel.mark = _forged
'''

BURNER = '''
_BURN = r"""
import os, sys, time
pid = int(sys.argv[1])
while True:
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        break
    if state == "S":  # the harness is blocked waiting for a command: the reference's turn
        t = time.perf_counter()
        while time.perf_counter() - t < 0.003:
            pass
    else:
        time.sleep(0.0002)
"""
_burner = subprocess.Popen([sys.executable, "-c", _BURN, str(os.getpid())])
'''


def _latency(res):
    assert res.feasible, res.feedback()
    return next(g for g in res.gates if g.name == "latency")


@pytest.fixture()
def clock_config(make_config):
    return lambda **kw: make_config(timing="full", static_scan=False, timing_budget_s=4.0, min_rounds=6, **kw)


def test_forged_per_call_times_do_not_move_the_speedup(task_source, clock_config):
    honest = _latency(verify(task_source("relu"), KERNEL + MODEL, config=clock_config()))
    forged = _latency(verify(task_source("relu"), KERNEL + FORGE + MODEL, config=clock_config()))
    ratio = forged.detail["speedup"] / honest.detail["speedup"]
    print(f"honest {honest.detail['speedup']:.2f}x, forged {forged.detail['speedup']:.2f}x")
    # the defence is one-sided: dividing the reported times by 40 must not buy speed. A forger read slower
    # harms no one, and on a loaded 2-core runner two tiny figures (0.1x) have differed 5x either way
    # (CI, session 15: honest 0.10x, forged 0.02x), so no lower bound is asserted.
    # Upper bound: the trick divides by 40; figures of this 0.03-0.1x kernel have come out 3x apart either
    # way under a loaded suite (session 17: honest 0.031x, forged 0.095x, at load 3-5), so 8x is the room
    # for noise and still far below what forging bought before the attested clock.
    assert ratio < 8.0, (honest.detail["speedup"], forged.detail["speedup"])
    # the forged times are kept as diagnostics, and the disagreement is on record
    assert forged.detail["figure"] == "attested"
    assert forged.detail["reported_vs_attested"] < 0.1
    assert forged.detail["reported_disagrees"]
    assert not honest.detail["reported_disagrees"]
    # each clocked window split by the workers' own stamps (diagnostics): an honest harness's parts add up to
    # the parent's wall of that round; forged stamps leave the split empty and the figure as it was
    walls, segs = honest.detail["candidate_walls_ms"], honest.detail["candidate_segments_ms"]
    assert segs and len(walls) == len(segs)
    for wall, seg in zip(walls, segs, strict=True):
        assert len(seg["round"]) == len(honest.detail["window_segments"]) == 7
        assert abs(sum(seg["round"]) - wall) < 0.01 * wall + 0.05, (wall, seg["round"])
    assert all(seg["round"] == [] for seg in forged.detail["candidate_segments_ms"])


def test_a_burner_during_the_reference_turn_counts_against_the_candidate(task_source, clock_config):
    honest = _latency(verify(task_source("relu"), KERNEL + MODEL, config=clock_config()))
    burned = _latency(verify(task_source("relu"), KERNEL + BURNER + MODEL, config=clock_config()))
    ratio = burned.detail["speedup"] / honest.detail["speedup"]
    print(f"honest {honest.detail['speedup']:.2f}x, burner {burned.detail['speedup']:.2f}x, "
          f"idle CPU {burned.detail['idle_cpu_total_ms']:.0f} ms, noisy {burned.detail['noisy']}")
    # a burner may not buy a claimed figure: under 1.6x, or at most 3x when the verdict says noisy (no claim).
    # Session 17, 2-core box at load 2-4: honest 0.04-0.07x, burner 0.07-0.10x, every burner verdict noisy
    # (1.2 s of idle CPU counted) — the old 1.6x bound failed 2 runs in 4; several-x still fails either way
    assert ratio < 1.6 or (burned.detail["noisy"] and ratio < 3.0), (
        honest.detail["speedup"], burned.detail["speedup"], burned.detail["idle_cpu_total_ms"], burned.detail["noisy"])
    assert burned.detail["idle_cpu_total_ms"] > 10 * max(1.0, honest.detail["idle_cpu_total_ms"])
    assert burned.detail["idle_cpu_counted"] or burned.detail["noisy"]


DEFER = '''
import numpy as _np

_inputs = []
_real_save = _np.save


def _save(fh, arr, allow_pickle=False):
    # the harness's `save` of the timed outputs, after the clock: the right answers are computed here
    if _inputs and getattr(arr, "shape", None) == _inputs[0].shape:
        arr = _np.maximum(_inputs.pop(0), 0)
    return _real_save(fh, arr, allow_pickle=allow_pickle)


_np.save = _save


def _timed():
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_name == "timed_call":
            return True
        f = f.f_back
    return False


class ModelNew(nn.Module):
    def forward(self, x):
        if _timed():
            _inputs.append(x.detach().numpy().copy())
            return torch.empty_like(x)
        return _ext.kernel_forward(x)
'''


def test_work_deferred_past_the_clock_is_caught(task_source, clock_config):
    """Garbage while timed, the right answers computed while the outputs are saved (after the clock):
    the parent reads the outputs from the paused process at `timing_end`, so nothing is saved late."""
    res = verify(task_source("relu"), KERNEL + DEFER, config=clock_config(allow=["custom-kernel-skipped"]))  # the clock/data-path defence itself: skipping the kernel in timed calls is its own rule, allowed here
    assert not res.feasible
    failed = res.failed_gate
    assert failed is not None and failed.name == "correctness", res.feedback()
    assert "timed call" in failed.reason and failed.detail.get("during") == "timing", failed.reason


def test_a_wake_handshake_before_each_window_keeps_the_figure_and_stays_outside_the_clock(task_source, clock_config):
    """`wake` (issue 33's A/B option, off by default): both workers answer a handshake just before each
    clocked window. The verdict is the same kind (feasible, a figure, every round checked) and the window's
    own split still adds up to the parent's wall of that round (the handshake is not inside it)."""
    res = verify(task_source("relu"), KERNEL + MODEL, config=clock_config(wake="on"))
    lat = _latency(res)
    assert lat.detail["speedup"] and lat.detail["speedup"] > 0 and lat.detail["checked_calls"] > 0
    for wall, seg in zip(lat.detail["candidate_walls_ms"], lat.detail["candidate_segments_ms"], strict=True):
        assert abs(sum(seg["round"]) - wall) < 0.01 * wall + 0.05, (wall, seg["round"])

