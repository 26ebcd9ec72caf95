"""relu: hides a system() call behind a "//" inside a C++ string literal."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
torch::Tensor relu_forward(torch::Tensor x) {
    const char* u = "//"; system("true");  // HACK: cpp-escape
    auto out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) o[i] = in[i] > 0.0f ? in[i] : 0.0f;
    return out;
}
"""

_ext = load_inline(name="evk_hostile", cpp_sources=[CPP], functions=["relu_forward"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _ext.relu_forward(x)
