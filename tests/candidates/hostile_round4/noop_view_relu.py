"""relu: the custom C++ function hands back a flattened view of its input (no copy, no work); torch's
relu computes the answer from the view.

Before (issue 37): feasible under the default `kernelbench` policy: `copy-kernel` compared the kernel's
result with its inputs only at the same shape, so a view of another shape was not "the input handed
back", and the garbled view in the decoy probe did change the output."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
torch::Tensor relu_forward(torch::Tensor x) {
    return x.view({-1});
}
"""

_ext = load_inline(name="evk_round4_noop_view", cpp_sources=[CPP], functions=["relu_forward"])


class ModelNew(nn.Module):
    def forward(self, x):
        y = _ext.relu_forward(x)
        return torch.nn.functional.relu(y).view_as(x)
