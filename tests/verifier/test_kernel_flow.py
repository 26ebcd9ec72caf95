"""Where the custom kernel's result goes in an ordinary forward (`decoy.Flow`, issue 37): followed through
torch's operators by a dispatch mode, with no name read and nothing garbled."""

from __future__ import annotations

import pytest
import torch

from verifier.correctness.decoy import PROBE_KEY, flow_forward, flow_verdict, through


def _kernel(counter: dict, fn):
    """A custom-kernel function as the harness wraps it (counted, through the active probe)."""

    def call(*args):
        counter["calls"] += 1
        return through(counter, fn, args, {})

    return call


def _relu_kernel(x):
    out = torch.empty_like(x)
    out.copy_(x.clamp_min(0))  # stands for a C++ loop: a fresh tensor holding the kernel's values
    return out


def _run(forward, *inputs):
    counter = {"calls": 0, PROBE_KEY: None}
    with torch.no_grad():
        out, record = flow_forward(torch, forward(counter), list(inputs), counter)
    assert counter[PROBE_KEY] is None
    return out, record


x = torch.randn(64, 33)
w = torch.randn(33, 16)
b = torch.randn(16)


def mimic(counter):  # tests/candidates/hostile_round4/mimics_on_garbled_result.py, in miniature
    k = _kernel(counter, _relu_kernel)

    def forward(x):
        mine = k(x)
        if not torch.equal(mine.reshape(-1)[:257], torch.clamp_min(x.reshape(-1)[:257], 0.0)):
            return mine
        return torch.nn.functional.relu(x)

    return forward


def sum_as_scalar(counter):  # the kernel's result only as a Python number, torch's answer returned
    k = _kernel(counter, _relu_kernel)
    return lambda x: torch.relu(x) + 0.0 * float(k(x).sum() * 0)


def honest(counter):
    k = _kernel(counter, _relu_kernel)
    return lambda x: k(x)


def torch_gemm_custom_epilogue(counter):  # KernelBench level 2's commonest shape
    k = _kernel(counter, lambda y: _relu_kernel(y + b))
    return lambda x: k(x @ w)


def custom_gemm_torch_epilogue(counter):
    k = _kernel(counter, lambda a: (a @ w).clone())
    return lambda x: torch.relu(k(x) + b).reshape(-1, 4, 4)[:, 1:].transpose(1, 2)


def in_place_kernel(counter):  # writes its result into a buffer torch made, returns nothing
    def fill(out, a):
        out.copy_(a.clamp_min(0))

    k = _kernel(counter, fill)

    def forward(x):
        out = torch.empty_like(x)
        k(out, x)
        return out * 2

    return forward


def noop(counter):  # the first round's no-op: copy-kernel's case, not this one's
    k = _kernel(counter, lambda a: a)
    return lambda x: torch.relu(k(x))


@pytest.mark.parametrize("forward, reached", [(mimic, False), (sum_as_scalar, False), (honest, True),
                                              (torch_gemm_custom_epilogue, True), (custom_gemm_torch_epilogue, True),
                                              (in_place_kernel, True)])
def test_the_kernels_result_is_followed_to_the_output(forward, reached):
    out, record = _run(forward, x)
    assert record["kernel_calls"] == 1 and record["results"] == 1 and record["reached"] is reached, record
    assert (flow_verdict(record) is None) is reached
    ref = forward({"calls": 0, PROBE_KEY: None})(x)
    assert torch.equal(out, ref)  # followed, not changed


def test_a_kernel_handing_its_input_back_is_left_to_the_copy_check():
    _out, record = _run(noop, x)
    assert record["results"] == 0 and record["copies"] == 1 and flow_verdict(record) is None


def test_a_freed_result_cannot_lend_its_address_to_torchs_answer():
    """The kernel's result is dropped before torch computes the answer: the held result keeps its block."""
    def forward(counter):
        k = _kernel(counter, _relu_kernel)

        def f(x):
            mine = k(x)
            del mine
            return torch.relu(x)

        return f

    for _ in range(5):
        _out, record = _run(forward, x)
        assert record["reached"] is False
