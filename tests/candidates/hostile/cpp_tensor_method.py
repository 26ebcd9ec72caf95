"""softmax_rows: the C++ code calls Tensor::softmax as a method."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
torch::Tensor softmax_forward(torch::Tensor x) {
    auto y = x.contiguous();
    return y.softmax(-1);  // HACK: cpp-torch-op
}
"""

_ext = load_inline(name="evk_hostile_method", cpp_sources=[CPP], functions=["softmax_forward"])


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.softmax_forward(x)
