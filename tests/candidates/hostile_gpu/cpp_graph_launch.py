"""Hostile (task `relu`): instantiates a CUDA graph in C++ once and relaunches it. Caught statically."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
static cudaGraphExec_t exec = nullptr;
torch::Tensor relu_forward(torch::Tensor x) {
    auto y = torch::empty_like(x);
    if (exec) cudaGraphLaunch(exec, at::cuda::getCurrentCUDAStream());
    return y;
}
"""

_ext = load_inline(name="evk_hostile_cpp_graph", cpp_sources=["torch::Tensor relu_forward(torch::Tensor x);"],
                   cuda_sources=[CUDA], functions=["relu_forward"])


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.relu_forward(x)
