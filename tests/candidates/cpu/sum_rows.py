"""Honest CPU candidate for `sum_rows`: per-row sum with eight partial accumulators (last dim only)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>

torch::Tensor sum_rows_forward(torch::Tensor x) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && x.dim() == 2, "sum_rows_forward expects a 2-D float32 tensor");
    auto xc = x.contiguous();
    const int64_t rows = xc.size(0), cols = xc.size(1);
    auto out = torch::empty({rows}, xc.options());
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* row = in + r * cols;
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int64_t c = 0;
        for (; c + 8 <= cols; c += 8)
            for (int k = 0; k < 8; ++k) acc[k] += row[c + k];
        float total = 0.0f;
        for (int k = 0; k < 8; ++k) total += acc[k];
        for (; c < cols; ++c) total += row[c];
        o[r] = total;
    }
    return out;
}
"""

_ext = load_inline(
    name="evk_candidate_sum_rows",
    cpp_sources=[CPP],
    functions=["sum_rows_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        if dim not in (1, -1):
            raise ValueError("this candidate only reduces over the last dimension")
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.sum_rows_forward(x)
