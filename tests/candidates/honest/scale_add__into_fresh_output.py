"""Honest, scale_add: the scalar from __init__ kept on the module; Python allocates a fresh output and
a C++ function with no return value fills it in place (OpenMP, a scalar argument)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>

void scale_add_into(torch::Tensor x, torch::Tensor y, double alpha, torch::Tensor out) {
    TORCH_CHECK(x.is_contiguous() && y.is_contiguous() && out.is_contiguous(), "contiguous tensors expected");
    const float* a = x.data_ptr<float>();
    const float* b = y.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const float s = static_cast<float>(alpha);
    const int64_t n = x.numel();
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        const float scaled = s * a[i];
        o[i] = scaled + b[i];
    }
}
"""

_ext = load_inline(name="evk_honest_scale_add", cpp_sources=[CPP], functions=["scale_add_into"],
                   extra_cflags=["-O3", "-fopenmp", "-ffp-contract=off"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = y.contiguous()
        out = torch.empty_like(x)
        _ext.scale_add_into(x, y, self.alpha, out)
        return out
