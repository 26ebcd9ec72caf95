"""relu: torch computes every output; the C++ kernel runs beside it and its result is only checked,
never used. Forward compares a few elements of the kernel's result with torch's relu of the same input
elements and raises when they differ, which happens only when the verifier replaced the result with
garbage: in the decoy probe's replay and in the fresh probe.

Before (issue 37, fifth hostile session): a checked forward that raised read as "the result reached the
control flow", so both checked forwards were skipped, no decoy finding was raised and the candidate was
feasible under the default `kernelbench` policy with torch doing all of the work."""
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

_ext = load_inline(name="evk_round4_raises_on_garbage", cpp_sources=[CPP], functions=["relu_forward"])


class ModelNew(nn.Module):
    def forward(self, x):
        mine = _ext.relu_forward(x)
        head = x.reshape(-1)[:257]
        if not torch.equal(mine.reshape(-1)[:257], torch.clamp_min(head, 0.0)):
            raise RuntimeError("kernel result changed under me")  # only ever the verifier's garbage
        return torch.nn.functional.relu(x)
