"""Honest, gemm_bias_relu: parameters under other names than the reference's (so its state_dict does not
load): made by an nn.Linear exactly as the reference makes them, under the same seed, then kept as
this module's own `weight` and `bias` (transposed once, in __init__, for the kernel's access order)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>

torch::Tensor gemm_bias_relu_t(torch::Tensor x, torch::Tensor wt, torch::Tensor b) {
    auto xc = x.contiguous();
    const int64_t n = xc.size(0), k = xc.size(1), m = wt.size(1);
    auto out = torch::empty({n, m}, xc.options());
    const float* X = xc.data_ptr<float>();
    const float* W = wt.data_ptr<float>();  // [k, m]
    const float* B = b.data_ptr<float>();
    float* O = out.data_ptr<float>();
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        std::vector<double> acc(m, 0.0);
        for (int64_t t = 0; t < k; ++t) {
            const double xv = X[i * k + t];
            const float* wr = W + t * m;
            for (int64_t j = 0; j < m; ++j) acc[j] += xv * wr[j];
        }
        for (int64_t j = 0; j < m; ++j) {
            const double v = acc[j] + B[j];
            O[i * m + j] = v > 0.0 ? static_cast<float>(v) : 0.0f;
        }
    }
    return out;
}
"""

_ext = load_inline(name="evk_honest_gemm_renamed", cpp_sources=[CPP], functions=["gemm_bias_relu_t"],
                   extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        made = nn.Linear(in_features, out_features)
        self.weight_t = nn.Parameter(made.weight.detach().t().contiguous())
        self.bias = nn.Parameter(made.bias.detach().clone())

    def forward(self, x):
        return _ext.gemm_bias_relu_t(x, self.weight_t, self.bias)
