"""Subtly wrong candidate for KernelBench-style level 1 problem 12: 0.1% too large. The 1e-2 rule of the
original KernelBench passes it; the fp32 1e-4 rule of KernelBench today does not."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>

torch::Tensor mse(torch::Tensor a, torch::Tensor b) {
    auto ac = a.contiguous();
    auto bc = b.contiguous();
    const float* A = ac.data_ptr<float>();
    const float* B = bc.data_ptr<float>();
    const int64_t n = ac.numel();
    double acc = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        const double d = (double)A[i] - (double)B[i];
        acc += d * d;
    }
    auto out = torch::empty({}, ac.options());
    out.data_ptr<float>()[0] = (float)(1.001 * acc / (double)n);
    return out;
}
"""

_ext = load_inline(name="evk_kb_mse", cpp_sources=[CPP], functions=["mse"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return _ext.mse(predictions, targets)
