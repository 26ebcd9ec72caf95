"""Honest, tasks/relu_inplace.py: like the reference, the C++ writes the result into its input and
returns that same tensor (an output aliasing its input is right here, since the reference's does)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>

torch::Tensor relu_in_place(torch::Tensor x) {
    TORCH_CHECK(x.is_contiguous(), "contiguous input expected");
    float* p = x.data_ptr<float>();
    const int64_t n = x.numel();
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) p[i] = p[i] > 0.0f ? p[i] : 0.0f;
    return x;
}
"""

_ext = load_inline(name="evk_honest_relu_inplace", cpp_sources=[CPP], functions=["relu_in_place"],
                   extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _ext.relu_in_place(x)
