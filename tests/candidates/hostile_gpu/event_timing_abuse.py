"""Hostile (task `relu`): records its own CUDA events and waits on them to shift work around the timer.
Caught statically."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
__global__ void relu_k(const float* x, float* y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.0f);
}
torch::Tensor relu_forward(torch::Tensor x) {
    auto y = torch::empty_like(x);
    relu_k<<<(x.numel() + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    return y;
}
"""

_ext = load_inline(name="evk_hostile_events", cpp_sources=["torch::Tensor relu_forward(torch::Tensor x);"],
                   cuda_sources=[CUDA], functions=["relu_forward"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.done = torch.cuda.Event()

    def forward(self, x):
        y = _ext.relu_forward(x)
        self.done.record()
        return y
