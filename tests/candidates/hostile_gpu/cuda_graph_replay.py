"""Hostile (task `relu`): captures a CUDA graph once and replays it, returning the captured output buffer.
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
void relu_into(torch::Tensor x, torch::Tensor y) {
    relu_k<<<(x.numel() + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
}
"""

_ext = load_inline(name="evk_hostile_graph", cpp_sources=["void relu_into(torch::Tensor x, torch::Tensor y);"],
                   cuda_sources=[CUDA], functions=["relu_into"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.graph = torch.cuda.CUDAGraph()
        self.out = None

    def forward(self, x):
        if self.out is None:
            self.out = torch.empty_like(x)
            with torch.cuda.graph(self.graph):
                _ext.relu_into(x, self.out)
        self.graph.replay()
        return self.out
