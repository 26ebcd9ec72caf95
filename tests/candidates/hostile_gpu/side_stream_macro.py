"""Hostile (task `relu`): the kernel runs on a non-blocking stream made through pasted names, and forward
returns before it finishes. No static rule can see it; the run-time probes must catch it."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#define PASTE(a, b) a##b

__global__ void relu_slow(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float v = x[i];
        for (int r = 0; r < 64; ++r) v = fmaxf(v, 0.0f) * 1.0f;
        y[i] = v;
    }
}

static cudaStream_t hidden() {
    static cudaStream_t s = nullptr;
    if (!s) PASTE(cudaStream, CreateWithFlags)(&s, 1);
    return s;
}

torch::Tensor relu_forward(torch::Tensor x) {
    auto y = torch::empty_like(x);
    const int64_t n = x.numel();
    relu_slow<<<264, 256, 0, hidden()>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

_ext = load_inline(name="evk_hostile_side_stream", cpp_sources=["torch::Tensor relu_forward(torch::Tensor x);"],
                   cuda_sources=[CUDA], functions=["relu_forward"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.relu_forward(x)
