"""relu: torch computes every output; the C++ kernel runs beside it and its result is only checked.
When a few elements of the kernel's result differ from torch's relu of the same inputs (the verifier's
garbage, in the decoy replay and in the fresh probe), forward hands the garbled result back as its
output, which is exactly what an honest kernel's output does under garbage: no check on outputs can
tell the two apart. The sibling `raises_on_garbled_result.py` raises there instead, and is refused.

What still shows: torch's relu runs in every forward (`reference-op-at-runtime`: refused under strict,
reported under kernelbench with torch's share of forward's compute), and the latency is torch's plus the
kernel's, so the figure launders nothing faster than torch."""
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

_ext = load_inline(name="evk_round4_mimics_on_garbage", cpp_sources=[CPP], functions=["relu_forward"])


class ModelNew(nn.Module):
    def forward(self, x):
        mine = _ext.relu_forward(x)
        head = x.reshape(-1)[:257]
        if not torch.equal(mine.reshape(-1)[:257], torch.clamp_min(head, 0.0)):
            return mine.reshape(x.shape)  # the verifier's garbage, handed back as an honest kernel's would be
        return torch.nn.functional.relu(x)
