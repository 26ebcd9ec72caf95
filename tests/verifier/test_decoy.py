"""Decoy kernels (verifier/correctness/decoy.py): the custom kernel must run on every forward (`custom-kernel-skipped`)
and its result must reach the output (`decoy-kernel`, found by one checked forward with every kernel
result garbled). Unit tests of the probe first, then end-to-end candidates (slow: each builds a kernel)."""

from __future__ import annotations

import random
import types
from pathlib import Path

import pytest
import torch

from verifier import verify
from verifier.correctness.bit_digest import equal_bits
from verifier.correctness.decoy import Probe, counted_model, kernel_findings, plan, probe_forward
from verifier.policy.static_scan import RULES
from verifier.workers.harness import CountingModule

HONEST = Path(__file__).resolve().parents[1] / "candidates" / "cpu"
RELU = """    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) o[i] = in[i] > 0.0f ? in[i] : 0.0f;
    return out;"""
RELU_COPY = RELU.replace("in[i] > 0.0f ? in[i] : 0.0f", "in[i]")


def _ext(counter: dict) -> CountingModule:
    def relu(x):
        return torch.relu(x)

    def relu_into(x, out):
        out.copy_(torch.relu(x))

    return CountingModule(types.SimpleNamespace(relu=relu, relu_into=relu_into), counter)


def test_rules_are_named():
    assert RULES["custom-kernel-skipped"] and RULES["decoy-kernel"]


def test_garbage_differs_and_keeps_the_values():
    probe = Probe(torch)
    x = torch.relu(torch.randn(16, 9))
    g = probe.garbage_like(x)
    assert g.shape == x.shape and g.dtype == x.dtype and not equal_bits(torch, g, x)
    assert sorted(g.flatten().tolist()) == sorted(x.flatten().tolist())  # a roll: plausible values
    for t in (torch.zeros(5), torch.tensor(3.0), torch.ones(1, dtype=torch.int64), torch.tensor([True]),
              torch.zeros(4, dtype=torch.float16), torch.full((3,), float("nan"))):
        assert not equal_bits(torch, probe.garbage_like(t), t), t


def test_probe_garbles_returned_and_written_tensors_only_inside_the_probe():
    counter = {"calls": 0}
    ext = _ext(counter)
    assert not any(isinstance(v, dict) for v in vars(ext).values())  # no counter (or probe flag) to read
    x = torch.randn(32, 32)

    def decoy(x):
        ext.relu(x)  # thrown away
        return torch.relu(x)

    def returned(x):
        return ext.relu(x)

    def in_place(x):
        out = torch.empty_like(x)
        ext.relu_into(x, out)
        return out

    for model, is_decoy in ((decoy, True), (returned, False), (in_place, False)):
        normal = model(x)
        model(torch.randn(32, 32))  # another trial in between, as the plan makes it (a reused buffer differs)
        out, found = probe_forward(torch, model, [x], counter)
        assert found["kernel_calls"] == 1 and found["replaced"] == 1, found
        assert equal_bits(torch, out, normal) is is_decoy, model.__name__
        assert equal_bits(torch, model(x), normal)  # the probe is over
    assert equal_bits(torch, x, x.clone())
    _, found = probe_forward(torch, lambda x: (_ for _ in ()).throw(ValueError("bad")), [x], counter)
    assert found["error"].startswith("ValueError")


def test_counted_model_counts_each_call():
    counter, per_call = {"calls": 0}, []
    ext = _ext(counter)
    n = iter(range(4))
    model = counted_model(lambda x: ext.relu(x) if next(n) % 2 == 0 else torch.relu(x), counter, per_call)
    for _ in range(4):
        model(torch.ones(2))
    assert per_call == [1, 0, 1, 0]


def test_plan_never_replays_the_trial_just_before():
    """Five clean trials and the fresh probe in six ordinary slots: the replay goes after a clean trial and
    repeats an earlier clean one, never the fresh probe's slot."""
    for seed in range(50):
        p = plan(random.Random(seed), 5)
        assert 0 <= p["of"] < p["after"] <= 5 and p["fresh"] not in (p["of"], p["after"]) and 0 <= p["fresh"] <= 5
    for seed in range(10):
        p = plan(random.Random(seed), 1)  # one clean trial: the replay repeats it, right after it
        assert p["after"] == p["of"] == 1 - p["fresh"]


def test_findings():
    probe = {"kernel_calls": 1, "replaced": 1, "error": "", "trial_digests": ["a"], "probe_digests": ["a"]}
    rules = [r for r, _ in kernel_findings({"kernel_calls": [1, 1], "decoy_probe": probe})]
    assert rules == ["decoy-kernel"]
    changed = {**probe, "probe_digests": ["b"]}
    assert kernel_findings({"kernel_calls": [1, 1], "decoy_probe": changed, "timed_forwards": [8, 0],
                            "profile_kernel_calls": 1}) == []
    # a checked forward that raised is refused, not skipped (issue 37: raising on garbage escaped the check)
    raised = kernel_findings({"kernel_calls": [1, 1], "decoy_probe": {**probe, "error": "ValueError: x"}})
    assert [r for r, _ in raised] == ["decoy-kernel"] and "replaying a trial" in raised[0][1]
    for cand in ({"kernel_calls": [1, 0]}, {"kernel_calls": [2, 2], "timed_forwards": [10, 1]},
                 {"kernel_calls": [1, 1], "profile_kernel_calls": 0},
                 {"kernel_calls": [1, 1], "decoy_probe": {**changed, "kernel_calls": 0}}):
        assert [r for r, _ in kernel_findings(cand)] == ["custom-kernel-skipped"], cand
    assert kernel_findings({"kernel_calls": [0, 0]}) == []  # custom-kernel-unused, the gate's own rule


def _rules(res) -> list[str]:
    gate = res.gates[0]
    assert gate.name == "anti_hacking"
    return [v["rule"] for v in gate.detail.get("violations", [])]


@pytest.mark.slow
@pytest.mark.parametrize("seeded", [True, False], ids=["seeded", "files"])
def test_decoy_kernel_is_refused(task_source, make_config, kernel_source, seeded):
    """The kernel computes relu into a tensor forward throws away; torch computes the output (inputs
    drawn from seeds, or handed over as files: the probe's copy of a trial's inputs)."""
    source = kernel_source(RELU, forward="_ext.kernel_forward(x)\n        return torch.relu(x)")
    res = verify(task_source("relu"), source,
                 config=make_config(static_scan=False, seeded_inputs=seeded, trials=3))
    assert res.outcome == "hack_fail"
    assert "decoy-kernel" in _rules(res), res.gates[0].reason
    assert "custom-kernel-skipped" not in _rules(res)


@pytest.mark.slow
@pytest.mark.parametrize("honest_calls, where", [(1, "correctness trials"), (4, "timed calls")])
def test_kernel_skipped_after_some_forwards_is_refused(task_source, make_config, kernel_source, honest_calls, where):
    """The kernel only on the first forward(s), torch afterwards: with 2 trials, the probe and the profiled
    call, 4 forwards come before the timed ones."""
    forward = (f"self.n = getattr(self, 'n', 0) + 1\n        if self.n <= {honest_calls}:\n"
               "            return _ext.kernel_forward(x)\n        return torch.relu(x)")
    res = verify(task_source("relu"), kernel_source(RELU, forward=forward), config=make_config(static_scan=False))
    assert res.outcome == "hack_fail"
    assert "custom-kernel-skipped" in _rules(res), res.gates[0].reason
    skipped = next(v for v in res.gates[0].detail["violations"] if v["rule"] == "custom-kernel-skipped")
    assert where in skipped["message"], skipped


IN_PLACE = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>

void relu_into(torch::Tensor x, torch::Tensor out) {
    TORCH_CHECK(x.is_contiguous() && out.is_contiguous(), "contiguous tensors");
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) o[i] = in[i] > 0.0f ? in[i] : 0.0f;
}
"""

_ext = load_inline(name="evk_test_relu_into", cpp_sources=[CPP], functions=["relu_into"],
                   extra_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        _ext.relu_into(x, out)
        return out
'''


@pytest.mark.slow
def test_void_kernel_writing_its_output_in_place_is_not_a_decoy(task_source, make_config):
    res = verify(task_source("relu"), IN_PLACE, config=make_config())
    assert res.feasible, res.feedback()


@pytest.mark.slow
def test_honest_relu_is_still_feasible(task_source, make_config):
    res = verify(task_source("relu"), (HONEST / "relu.py").read_text(), config=make_config())
    assert res.feasible, res.feedback()
    assert res.gates[0].detail["checks"] == "static+dynamic"


def test_copy_only_needs_every_result_a_copy_and_torch_work_beside_it():
    from verifier.correctness.decoy import copy_only

    split = {"kernel_ms": 0.01, "torch_ms": 2.0, "torch_ops": [("aten::maximum", 2.0)]}
    assert "aten::maximum" in copy_only({"results": 1, "copies": 1}, split)
    assert copy_only({"results": 2, "copies": 1}, split) is None, "one real result is work"
    assert copy_only({"results": 1, "copies": 1}, {"kernel_ms": 1.0, "torch_ms": 0.0}) is None, \
        "a copy with no torch work beside it is the correctness gate's to judge"
    assert copy_only({"results": 0, "copies": 0}, split) is None
    assert copy_only({"results": "1", "copies": "1"}, split) is None, "counts are plain integers or nothing"


def test_the_probe_counts_returned_and_written_copies():
    import torch

    from verifier.correctness.decoy import Probe

    x = torch.randn(64)
    probe = Probe(torch)
    probe.call(lambda a: a, (x,), {})  # returns its input
    probe.call(lambda a: a.clone(), (x,), {})  # a copy of it
    assert (probe.results, probe.copies) == (2, 2)
    out = torch.empty(64)

    def relu_into(a, o):  # writes a real result in place, returns nothing
        o.copy_(torch.relu(a))

    probe.call(relu_into, (x, out), {})
    assert (probe.results, probe.copies) == (3, 2)


@pytest.mark.slow
def test_a_copy_kernel_beside_getattr_arithmetic_is_refused_under_kernelbench(task_source, make_config, kernel_source):
    """The kernelbench preset lets torch do part of the work; a kernel that only copies while torch's
    operators (reached through getattr, past the static scan) compute everything is refused."""
    source = kernel_source(RELU_COPY, forward='y = _ext.kernel_forward(x)\n        return getattr(y, "__mul__")(getattr(y, "__gt__")(0))')
    res = verify(task_source("relu"), source, config=make_config())
    gate = res.gates[0]
    assert gate.status == "fail" and gate.detail["rule"] == "copy-kernel", (gate.reason, res.feedback())
    assert res.policy["preset"] == "kernelbench"


def test_an_honest_write_of_the_values_its_buffer_already_held_is_still_garbled():
    """An honest Triton softmax was refused as a decoy on an H200: its output came back in a block an
    earlier forward on the same inputs had freed, so writing its result changed no bit. The probe runs
    such a call again on noise to find what it writes."""
    from verifier.correctness.decoy import verdict

    counter = {"calls": 0}
    ext = _ext(counter)
    x = torch.randn(32, 32)
    stale = torch.relu(x)  # the freed block, holding this forward's own result already

    def in_place(x):
        ext.relu_into(x, stale)
        return stale * 2

    normal = in_place(x).clone()
    out, found = probe_forward(torch, in_place, [x], counter)
    assert found["reruns"] == 1 and found["replaced"] == 1 and found["results"] == 1, found
    assert not equal_bits(torch, out, normal), "the garbled write reached the output"
    assert found["copies"] == 0, "its result is not a copy of an input"
    assert equal_bits(torch, x, x.clone()) and torch.equal(x, x)
    assert verdict({**found, "trial_digests": ["a"], "probe_digests": ["b"]}) is None


def test_a_kernel_that_writes_nothing_is_a_decoy_even_if_the_rerun_changes_the_output():
    """The rerun is a second call in one forward, on noise: a decoy could notice it and change its output
    (or raise) so the probe's outputs differ. A kernel that wrote no tensor even then is refused anyway."""
    from verifier.correctness.decoy import verdict

    counter = {"calls": 0}
    seen = []

    def nothing(x):
        seen.append(x.clone())  # returns and writes nothing; remembers what it was given

    ext = CountingModule(types.SimpleNamespace(nothing=nothing), counter)

    def cheat(x):
        seen.clear()
        ext.nothing(x)
        noticed = len(seen) > 1  # called twice in one forward: the probe
        if noticed:
            raise RuntimeError("probe noticed")
        return torch.relu(x)

    x = torch.randn(8, 8)
    out, found = probe_forward(torch, cheat, [x], counter)
    assert out is None and found["error"].startswith("RuntimeError") and found["reruns"] == 1, found
    reason = verdict({**found, "trial_digests": ["a"], "probe_digests": ["b"]})
    assert reason and "even when run again on noise" in reason
