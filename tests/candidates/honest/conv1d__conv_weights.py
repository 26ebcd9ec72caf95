"""Honest, conv1d: the nn.Conv1d kept from __init__ (its weight and bias loaded from the reference);
a direct convolution in C++ with the kernel width as a template parameter for the common sizes."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>

template <int K>
static void conv_row(const float* x, const float* w, float* o, int64_t len_out) {
    for (int64_t t = 0; t < len_out; ++t) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) acc += x[t + k] * w[k];
        o[t] += acc;
    }
}

static void conv_row_any(const float* x, const float* w, float* o, int64_t len_out, int64_t K) {
    for (int64_t t = 0; t < len_out; ++t) {
        float acc = 0.0f;
        for (int64_t k = 0; k < K; ++k) acc += x[t + k] * w[k];
        o[t] += acc;
    }
}

torch::Tensor conv1d_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    auto xc = x.contiguous(), wc = weight.contiguous();
    const int64_t n = xc.size(0), cin = xc.size(1), len = xc.size(2);
    const int64_t cout = wc.size(0), K = wc.size(2), len_out = len - K + 1;
    auto out = torch::empty({n, cout, len_out}, xc.options());
    const float* X = xc.data_ptr<float>();
    const float* W = wc.data_ptr<float>();
    const float* B = bias.data_ptr<float>();
    float* O = out.data_ptr<float>();
    #pragma omp parallel for collapse(2) schedule(static)
    for (int64_t b = 0; b < n; ++b) {
        for (int64_t co = 0; co < cout; ++co) {
            float* o = O + (b * cout + co) * len_out;
            for (int64_t t = 0; t < len_out; ++t) o[t] = B[co];
            for (int64_t ci = 0; ci < cin; ++ci) {
                const float* xr = X + (b * cin + ci) * len;
                const float* wr = W + (co * cin + ci) * K;
                if (K == 3) conv_row<3>(xr, wr, o, len_out);
                else if (K == 5) conv_row<5>(xr, wr, o, len_out);
                else conv_row_any(xr, wr, o, len_out, K);
            }
        }
    }
    return out;
}
"""

_ext = load_inline(name="evk_honest_conv1d", cpp_sources=[CPP], functions=["conv1d_forward"],
                   extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        return _ext.conv1d_forward(x, self.conv.weight, self.conv.bias)
