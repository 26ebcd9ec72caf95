"""Honest CPU candidate for `gemm_bias_relu`: fused x @ W^T + b and ReLU in one pass over the output."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>

torch::Tensor gemm_bias_relu_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && x.size(1) == weight.size(1), "expects x (B,in), weight (out,in)");
    auto xc = x.contiguous();
    auto w = weight.contiguous();
    auto b = bias.contiguous();
    const int64_t B = xc.size(0), IN = xc.size(1), OUT = w.size(0);
    auto out = torch::empty({B, OUT}, xc.options());
    const float* X = xc.data_ptr<float>();
    const float* W = w.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    float* Y = out.data_ptr<float>();
    #pragma omp parallel for collapse(2) schedule(static)
    for (int64_t i = 0; i < B; ++i) {
        for (int64_t j = 0; j < OUT; ++j) {
            const float* xr = X + i * IN;
            const float* wr = W + j * IN;
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            int64_t k = 0;
            for (; k + 8 <= IN; k += 8)
                for (int u = 0; u < 8; ++u) acc[u] += xr[k + u] * wr[k + u];
            float s = bp[j];
            for (int u = 0; u < 8; ++u) s += acc[u];
            for (; k < IN; ++k) s += xr[k] * wr[k];
            Y[i * OUT + j] = s > 0.0f ? s : 0.0f;
        }
    }
    return out;
}
"""

_ext = load_inline(
    name="evk_candidate_gemm_bias_relu",
    cpp_sources=[CPP],
    functions=["gemm_bias_relu_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.gemm_bias_relu_forward(x, self.linear.weight, self.linear.bias)
