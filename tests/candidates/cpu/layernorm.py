"""Honest CPU candidate for `layernorm`: two-pass mean/variance per row, then scale and shift."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "layernorm_forward expects float32");
    auto xc = x.contiguous();
    auto w = weight.contiguous();
    auto b = bias.contiguous();
    auto out = torch::empty_like(xc);
    const int64_t cols = xc.size(-1);
    const int64_t rows = xc.numel() / cols;
    const float* in = xc.data_ptr<float>();
    const float* wp = w.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    float* o = out.data_ptr<float>();
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* row = in + r * cols;
        float* orow = o + r * cols;
        double mean = 0.0;
        for (int64_t c = 0; c < cols; ++c) mean += row[c];
        mean /= cols;
        double var = 0.0;
        for (int64_t c = 0; c < cols; ++c) {
            const double d = row[c] - mean;
            var += d * d;
        }
        var /= cols;
        const float inv = static_cast<float>(1.0 / std::sqrt(var + eps));
        const float mu = static_cast<float>(mean);
        for (int64_t c = 0; c < cols; ++c) orow[c] = (row[c] - mu) * inv * wp[c] + bp[c];
    }
    return out;
}
"""

_ext = load_inline(
    name="evk_candidate_layernorm",
    cpp_sources=[CPP],
    functions=["layernorm_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.norm = nn.LayerNorm(features)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.layernorm_forward(x, self.norm.weight, self.norm.bias, self.norm.eps)
