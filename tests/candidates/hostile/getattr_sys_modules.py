"""relu: sys.modules reached with getattr and a constant name."""
import sys
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


class ModelNew(nn.Module):
    def forward(self, x):
        mods = getattr(sys, "modules")  # HACK: introspection
        return mods["torch"].relu(_ext.copy_forward(x))
