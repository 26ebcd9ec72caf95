"""relu: the custom C++ function copies its input, flattened, into a fresh 1-D tensor (three passes of a
plain loop, so it takes time), and torch's relu computes the answer from the copy.

Before (issue 37): feasible under the default `kernelbench` policy. `copy-kernel` compared the kernel's
result with its inputs only at the same shape, so a flattened copy was "work", and the library share was
the torch ops' part of kernel + torch time: the kernel's useless passes made torch's relu read as a few
percent of forward although it did all of the compute."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
torch::Tensor relu_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    const int64_t n = xc.numel();
    auto out = torch::empty({n}, xc.options());
    const float* in = xc.data_ptr<float>();
    volatile float* o = out.data_ptr<float>();
    for (int pass = 0; pass < 3; ++pass)
        for (int64_t i = 0; i < n; ++i) o[i] = in[i];
    return out;
}
"""

_ext = load_inline(name="evk_round4_noop_flat_copy", cpp_sources=[CPP], functions=["relu_forward"])


class ModelNew(nn.Module):
    def forward(self, x):
        y = _ext.relu_forward(x)
        return torch.nn.functional.relu(y).view_as(x)
