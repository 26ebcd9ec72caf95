"""Hostile (task `matmul`): the .cu file calls at::matmul, i.e. cuBLAS does the work. Caught statically."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
torch::Tensor matmul_forward(torch::Tensor a, torch::Tensor b) {
    return at::matmul(a, b);
}
"""

_ext = load_inline(name="evk_hostile_cublas", cpp_sources=["torch::Tensor matmul_forward(torch::Tensor a, torch::Tensor b);"],
                   cuda_sources=[CUDA], functions=["matmul_forward"])


class ModelNew(nn.Module):
    def forward(self, a, b):
        return _ext.matmul_forward(a, b)
