"""Hostile (task `matmul`): links cuBLAS and calls its SGEMM through a pasted name. Caught statically (-lcublas)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#define BLAS(n) cublas##n
extern "C" int BLAS(Create_v2)(void**);
torch::Tensor matmul_forward(torch::Tensor a, torch::Tensor b) {
    auto c = torch::empty({a.size(0), b.size(1)}, a.options());
    return c;
}
"""

_ext = load_inline(name="evk_hostile_cublas_ld", cpp_sources=["torch::Tensor matmul_forward(torch::Tensor a, torch::Tensor b);"],
                   cuda_sources=[CUDA], functions=["matmul_forward"], extra_ldflags=["-lcublas"])


class ModelNew(nn.Module):
    def forward(self, a, b):
        return _ext.matmul_forward(a, b)
