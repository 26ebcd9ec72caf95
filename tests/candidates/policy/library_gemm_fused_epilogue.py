"""KernelBench's commonest level-2 solution for `gemm_bias_relu`: the GEMM stays in torch (a library call)
and one custom kernel fuses the epilogue (bias + ReLU) in place over the GEMM's output. Feasible under
the kernelbench policy (the verdict names aten::mm and its share), refused under strict."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>

torch::Tensor bias_relu_(torch::Tensor y, torch::Tensor bias) {
    TORCH_CHECK(y.is_contiguous() && y.dim() == 2, "expects a contiguous (B, OUT) tensor");
    const int64_t B = y.size(0), OUT = y.size(1);
    float* Y = y.data_ptr<float>();
    const float* b = bias.data_ptr<float>();
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < B; ++i)
        for (int64_t j = 0; j < OUT; ++j) {
            const float v = Y[i * OUT + j] + b[j];
            Y[i * OUT + j] = v > 0.0f ? v : 0.0f;
        }
    return y;
}
"""

_ext = load_inline(name="evk_policy_epilogue", cpp_sources=[CPP], functions=["bias_relu_"],
                   extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.matmul(x, self.linear.weight.t()).contiguous()
        return _ext.bias_relu_(y, self.linear.bias.contiguous())
