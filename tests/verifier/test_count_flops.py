"""The task's FLOPs per call, counted for the speed-of-light line: at KernelBench's head sizes the call is
counted on fake tensors (shapes only), since a second full-size call does not fit beside the first."""

import resource

import torch

from verifier.workers.reference_worker import count_flops


class _LinearRelu(torch.nn.Module):
    def __init__(self, k: int, n: int):
        super().__init__()
        self.lin = torch.nn.Linear(k, n, bias=False)

    def forward(self, x):
        return torch.relu(self.lin(x))


def test_shapes_only_counts_what_the_real_call_counts():
    model = _LinearRelu(64, 32)
    x = torch.randn(16, 64)
    real = count_flops(torch, model, [x])
    assert real == 2 * 16 * 64 * 32
    assert count_flops(torch, model, [x], shapes_only=True) == real


def test_a_head_size_call_is_counted_without_its_memory():
    """A 64 GiB input (2**21 x 8192 float32): counted, and the process's peak grew by far less than it."""
    model = _LinearRelu(8192, 1024)
    with torch._subclasses.fake_tensor.FakeTensorMode():
        shape_source = torch.empty(2**21, 8192)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    flops = count_flops(torch, model, [shape_source], shapes_only=True)
    grew_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert flops == 2 * 2**21 * 8192 * 1024
    assert grew_mb < 512, grew_mb


def test_elementwise_work_counts_no_flops():
    """The counter knows matmuls and convolutions; a relu is 0, which the verdict reads as memory-bound."""
    class Relu(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x)

    assert count_flops(torch, Relu(), [torch.randn(8, 8)], shapes_only=True) == 0
