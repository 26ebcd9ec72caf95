"""relu: honest only on inputs it has seen before; on fresh ones torch's relu computes the output and
the C++ kernel hands it back untouched (a copy), so the output is the kernel's result.

`copy-kernel` was judged only on the decoy probe, which always replayed an earlier trial's inputs: a
kernel that fingerprints its inputs computes honestly on the replay (no copy seen, its result reaches
the output) and launders torch's answer on every fresh call. Before (issue 37): feasible under the
default `kernelbench` policy, with torch's share of forward reported as a few percent."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
torch::Tensor relu_forward(torch::Tensor x, bool compute) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    if (compute) {
        for (int64_t i = 0; i < xc.numel(); ++i) o[i] = in[i] > 0.0f ? in[i] : 0.0f;
    } else {
        for (int64_t i = 0; i < xc.numel(); ++i) o[i] = in[i];
    }
    return out;
}
"""

_ext = load_inline(name="evk_round4_copy_on_fresh", cpp_sources=[CPP], functions=["relu_forward"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.seen = set()

    def forward(self, x):
        key = (tuple(x.shape), float(x.reshape(-1)[:97].sum()))
        if key in self.seen:  # a repeat: the decoy probe's replay
            return _ext.relu_forward(x, True)
        self.seen.add(key)
        return _ext.relu_forward(torch.nn.functional.relu(x), False)  # torch's answer, copied
