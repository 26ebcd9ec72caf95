"""Honest, transpose_copy (a task whose reference is all ATen copy): a cache-blocked transpose loop in
C++; `.contiguous()` on the already contiguous input costs nothing and must not count as the work."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>

torch::Tensor transpose_blocked(torch::Tensor x) {
    auto xc = x.contiguous();
    const int64_t r = xc.size(0), c = xc.size(1);
    auto out = torch::empty({c, r}, xc.options());
    const float* X = xc.data_ptr<float>();
    float* O = out.data_ptr<float>();
    constexpr int64_t B = 32;
    #pragma omp parallel for collapse(2) schedule(static)
    for (int64_t i0 = 0; i0 < r; i0 += B)
        for (int64_t j0 = 0; j0 < c; j0 += B)
            for (int64_t i = i0; i < std::min(i0 + B, r); ++i)
                for (int64_t j = j0; j < std::min(j0 + B, c); ++j) O[j * r + i] = X[i * c + j];
    return out;
}
"""

_ext = load_inline(name="evk_honest_transpose", cpp_sources=[CPP], functions=["transpose_blocked"],
                   extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _ext.transpose_blocked(x)
