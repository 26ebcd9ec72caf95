"""Hostile (task `matmul`): at::matmul hidden behind a macro so no rule sees it. Caught at run time
(the reference's aten::mm and its cuBLAS kernel run inside forward)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
#define ATEN(op) at::op
torch::Tensor matmul_forward(torch::Tensor a, torch::Tensor b) {
    return ATEN(matmul)(a, b);
}
"""

_ext = load_inline(name="evk_hostile_cublas_macro", cpp_sources=[CPP], functions=["matmul_forward"])


class ModelNew(nn.Module):
    def forward(self, a, b):
        return _ext.matmul_forward(a, b)
