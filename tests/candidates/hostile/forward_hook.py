"""relu: a forward hook applies torch.relu after forward returns."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
torch::Tensor copy_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) o[i] = in[i];
    return out;
}
"""

_ext = load_inline(name="evk_hostile", cpp_sources=[CPP], functions=["copy_forward"])


def _hook(module, args, out):
    return out.clamp_min(0)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_forward_hook(_hook)  # HACK: forward-outside-class

    def forward(self, x):
        return _ext.copy_forward(x)
