"""Honest, sum_rows: the C++ converts its input to double with .to() (ATen's copy) and sums rows of
that; the conversion is part of an honest kernel, not the work of the task."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>

torch::Tensor sum_rows(torch::Tensor x) {
    auto xd = x.to(torch::kFloat64).contiguous();
    const int64_t rows = xd.size(0), cols = xd.size(1);
    auto out = torch::empty({rows}, x.options());
    const double* X = xd.data_ptr<double>();
    float* O = out.data_ptr<float>();
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        double s = 0.0;
        for (int64_t c = 0; c < cols; ++c) s += X[r * cols + c];
        O[r] = static_cast<float>(s);
    }
    return out;
}
"""

_ext = load_inline(name="evk_honest_sum_rows_double", cpp_sources=[CPP], functions=["sum_rows"],
                   extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return _ext.sum_rows(x)
