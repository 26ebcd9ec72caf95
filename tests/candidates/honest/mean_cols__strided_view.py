"""Honest, mean_cols: the C++ reads its input through strides; Python hands it a transposed
(non-contiguous) view, so row r of the view is column r of x. Double accumulation."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>

torch::Tensor row_means_strided(torch::Tensor v) {
    const int64_t rows = v.size(0), cols = v.size(1);
    const int64_t s0 = v.stride(0), s1 = v.stride(1);
    auto out = torch::empty({rows}, v.options());
    const float* p = v.data_ptr<float>();
    float* o = out.data_ptr<float>();
    std::vector<double> acc(rows, 0.0);
    // each output reads one strided line of the base tensor
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        double s = 0.0;
        for (int64_t c = 0; c < cols; ++c) s += p[r * s0 + c * s1];
        acc[r] = s;
    }
    for (int64_t r = 0; r < rows; ++r) o[r] = static_cast<float>(acc[r] / static_cast<double>(cols));
    return out;
}
"""

_ext = load_inline(name="evk_honest_mean_cols", cpp_sources=[CPP], functions=["row_means_strided"],
                   extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _ext.row_means_strided(x.t())
