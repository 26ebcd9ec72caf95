"""Honest candidate for KernelBench-style level 2 problem 12: __init__ copied line for line from Model
(nn.Linear, then parameters made with torch.randn); one C++ loop does the GEMM, the scale and the bias."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>

torch::Tensor gemm_scale_bias(torch::Tensor x, torch::Tensor w, torch::Tensor b, torch::Tensor scale,
                              torch::Tensor bias) {
    auto xc = x.contiguous();
    auto wc = w.contiguous();
    const int64_t n = xc.size(0), k = xc.size(1), m = wc.size(0);
    auto out = torch::empty({n, m}, xc.options());
    const float* X = xc.data_ptr<float>();
    const float* W = wc.data_ptr<float>();
    const float* B = b.data_ptr<float>();
    const float* S = scale.data_ptr<float>();
    const float* C = bias.data_ptr<float>();
    float* O = out.data_ptr<float>();
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < m; ++j) {
            double acc = 0.0;
            for (int64_t t = 0; t < k; ++t) acc += (double)X[i * k + t] * (double)W[j * k + t];
            O[i * m + j] = (float)((acc + B[j]) * S[j] + C[j]);
        }
    }
    return out;
}
"""

_ext = load_inline(name="evk_kb_gemm_scale_bias", cpp_sources=[CPP], functions=["gemm_scale_bias"],
                   extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.scale = nn.Parameter(torch.randn(out_features) * 0.5)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        return _ext.gemm_scale_bias(x, self.gemm.weight, self.gemm.bias, self.scale, self.bias)
