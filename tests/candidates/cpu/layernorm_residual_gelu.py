"""Honest CPU candidate for `layernorm_residual_gelu`: residual add, layer norm and erf-GELU fused per row."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
#include <cmath>
#include <vector>

torch::Tensor ln_residual_gelu_forward(torch::Tensor x, torch::Tensor res, torch::Tensor weight,
                                       torch::Tensor bias, double eps) {
    TORCH_CHECK(x.sizes() == res.sizes(), "x and residual must have the same shape");
    auto xc = x.contiguous();
    auto rc = res.contiguous();
    auto w = weight.contiguous();
    auto b = bias.contiguous();
    auto out = torch::empty_like(xc);
    const int64_t cols = xc.size(-1);
    const int64_t rows = xc.numel() / cols;
    const float* X = xc.data_ptr<float>();
    const float* R = rc.data_ptr<float>();
    const float* wp = w.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const float inv_sqrt2 = 0.70710678118654752f;
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        float* orow = o + r * cols;
        double mean = 0.0;
        for (int64_t c = 0; c < cols; ++c) {
            orow[c] = X[r * cols + c] + R[r * cols + c];
            mean += orow[c];
        }
        mean /= cols;
        double var = 0.0;
        for (int64_t c = 0; c < cols; ++c) {
            const double d = orow[c] - mean;
            var += d * d;
        }
        var /= cols;
        const float inv = static_cast<float>(1.0 / std::sqrt(var + eps));
        const float mu = static_cast<float>(mean);
        for (int64_t c = 0; c < cols; ++c) {
            const float y = (orow[c] - mu) * inv * wp[c] + bp[c];
            orow[c] = 0.5f * y * (1.0f + std::erf(y * inv_sqrt2));
        }
    }
    return out;
}
"""

_ext = load_inline(
    name="evk_candidate_layernorm_residual_gelu",
    cpp_sources=[CPP],
    functions=["ln_residual_gelu_forward"],
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

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return _ext.ln_residual_gelu_forward(x, residual, self.norm.weight, self.norm.bias, self.norm.eps)
