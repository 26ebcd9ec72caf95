"""relu: honest only on inputs it has seen before; on fresh ones the C++ kernel runs and its result is
thrown away while torch's relu computes the output.

The decoy probe always replayed an earlier trial's inputs, so a kernel that fingerprints its inputs
(shape and the sum of a few elements) can be honest exactly where the probe looks: the replay finds the
kernel's result in the output, every fresh trial is torch's answer. Before (issue 37): feasible under
the default `kernelbench` policy with torch doing all of the work of every fresh call."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
torch::Tensor relu_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) o[i] = in[i] > 0.0f ? in[i] : 0.0f;
    return out;
}
"""

_ext = load_inline(name="evk_round4_decoy_on_fresh", cpp_sources=[CPP], functions=["relu_forward"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.seen = set()

    def forward(self, x):
        key = (tuple(x.shape), float(x.reshape(-1)[:97].sum()))
        if key in self.seen:  # a repeat: the decoy probe's replay
            return _ext.relu_forward(x)
        self.seen.add(key)
        _ext.relu_forward(x)  # called (so forward "runs the kernel"), result dropped
        return torch.nn.functional.relu(x)
