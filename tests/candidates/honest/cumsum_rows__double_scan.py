"""Honest, cumsum_rows: a serial scan per row (rows in parallel), the running sum in double as
torch's CPU cumsum accumulates."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>

torch::Tensor cumsum_rows(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const int64_t rows = xc.size(0), cols = xc.size(1);
    const float* X = xc.data_ptr<float>();
    float* O = out.data_ptr<float>();
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        double run = 0.0;
        for (int64_t c = 0; c < cols; ++c) {
            run += X[r * cols + c];
            O[r * cols + c] = static_cast<float>(run);
        }
    }
    return out;
}
"""

_ext = load_inline(name="evk_honest_cumsum", cpp_sources=[CPP], functions=["cumsum_rows"],
                   extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _ext.cumsum_rows(x)
