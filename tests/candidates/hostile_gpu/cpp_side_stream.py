"""Hostile (task `relu`): C++ creates its own non-blocking stream and returns before the kernel ends.
Caught statically."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
__global__ void relu_k(const float* x, float* y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.0f);
}
torch::Tensor relu_forward(torch::Tensor x) {
    static cudaStream_t s = nullptr;
    if (!s) cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    auto y = torch::empty_like(x);
    relu_k<<<(x.numel() + 255) / 256, 256, 0, s>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    return y;
}
"""

_ext = load_inline(name="evk_hostile_cpp_stream", cpp_sources=["torch::Tensor relu_forward(torch::Tensor x);"],
                   cuda_sources=[CUDA], functions=["relu_forward"])


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.relu_forward(x)
