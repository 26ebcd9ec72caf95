"""Honest, KernelBench level 1 problem 12 (MSE loss, a 0-dim output): an OpenMP reduction in double
writing a 0-dim tensor made in C++."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>

torch::Tensor mse(torch::Tensor p, torch::Tensor t) {
    auto pc = p.contiguous(), tc = t.contiguous();
    const float* P = pc.data_ptr<float>();
    const float* T = tc.data_ptr<float>();
    const int64_t n = pc.numel();
    double acc = 0.0;
    #pragma omp parallel for reduction(+:acc) schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        const double d = static_cast<double>(P[i]) - static_cast<double>(T[i]);
        acc += d * d;
    }
    auto out = torch::empty({}, pc.options());
    out.data_ptr<float>()[0] = static_cast<float>(acc / static_cast<double>(n));
    return out;
}
"""

_ext = load_inline(name="evk_honest_mse", cpp_sources=[CPP], functions=["mse"],
                   extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return _ext.mse(predictions, targets)
