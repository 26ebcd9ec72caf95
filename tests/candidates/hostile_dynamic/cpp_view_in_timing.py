"""Hostile (passes the static scan) for transpose_copy: a real transpose on a new input; on a repeated input
pointer (the timing loop refills the same buffers) the C++ returns a strided view of its input, free and right
when copied at once. Caught by copying outputs only after their inputs were overwritten."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
static const void* evk_last = nullptr;
torch::Tensor transpose_forward(torch::Tensor x) {
    const int64_t n = x.size(0);
    if (x.data_ptr() == evk_last) {
        return x.as_strided({n, n}, {1, n});
    }
    evk_last = x.data_ptr();
    auto xc = x.contiguous();
    auto out = torch::empty({n, n}, xc.options());
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) o[j * n + i] = in[i * n + j];
    return out;
}
"""
_ext = load_inline(name="evk_atk_transpose", cpp_sources=[CPP], functions=["transpose_forward"],
                   extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _ext.transpose_forward(x)
