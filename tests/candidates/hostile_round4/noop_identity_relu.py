"""relu: the custom C++ function hands its input back (the same tensor); torch's relu does the work.

The first held-out round's no-op kernel. Under the default `kernelbench` policy torch ops beside a
custom kernel are only reported, so this read as a feasible kernel with a library share of a few percent
although torch did all of the compute (issue 37)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
torch::Tensor relu_forward(torch::Tensor x) {
    return x;
}
"""

_ext = load_inline(name="evk_round4_noop_identity", cpp_sources=[CPP], functions=["relu_forward"])


class ModelNew(nn.Module):
    def forward(self, x):
        y = _ext.relu_forward(x)
        return torch.nn.functional.relu(y)
