"""gemm_bias_relu: the C++ 'kernel' calls at::matmul."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
torch::Tensor gemm_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    auto y = at::matmul(x, w.t());  // HACK: cpp-torch-op
    float* p = y.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    for (int64_t i = 0; i < y.numel(); ++i) { float v = p[i] + bp[i % b.numel()]; p[i] = v > 0 ? v : 0; }
    return y;
}
"""

_ext = load_inline(name="evk_hostile_gemm", cpp_sources=[CPP], functions=["gemm_forward"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features))
        self.bias = nn.Parameter(torch.randn(out_features))

    def forward(self, x):
        return _ext.gemm_forward(x, self.weight, self.bias)
