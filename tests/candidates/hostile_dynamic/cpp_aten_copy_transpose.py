"""Hostile (passes the static scan and the binary audit) for transpose_copy: the C++ only re-strides its input
and lets ATen's copy (contiguous, an allowed entry point) do the whole transpose. Caught by counting
aten::copy_ as torch work in the profile's work split."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
torch::Tensor transpose_forward(torch::Tensor x) {
    const int64_t n = x.size(0);
    return x.as_strided({n, n}, {1, n}).contiguous();
}
"""
_ext = load_inline(name="evk_atk_transpose_copy", cpp_sources=[CPP], functions=["transpose_forward"],
                   extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _ext.transpose_forward(x)
