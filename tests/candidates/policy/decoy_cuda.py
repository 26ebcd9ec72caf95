"""A CUDA decoy for `relu`: the custom kernel runs on every forward, but its result is thrown away and
torch.relu (allowed to do part of the work under kernelbench) returns the answer: refused as decoy-kernel."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void relu_vec4(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
        float4 v = x[i];
        v.x = fmaxf(v.x, 0.0f);
        v.y = fmaxf(v.y, 0.0f);
        v.z = fmaxf(v.z, 0.0f);
        v.w = fmaxf(v.w, 0.0f);
        y[i] = v;
    }
}

__global__ void relu_tail(const float* __restrict__ x, float* __restrict__ y, int64_t start, int64_t n) {
    int64_t i = start + blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.0f);
}

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "relu_forward expects a float32 CUDA tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t n = xc.numel();
    const int64_t n4 = n / 4;
    auto stream = at::cuda::getCurrentCUDAStream();
    const int threads = 256;
    if (n4 > 0) {
        const int blocks = (int)std::min<int64_t>((n4 + threads - 1) / threads, 132 * 16);
        relu_vec4<<<blocks, threads, 0, stream>>>(reinterpret_cast<const float4*>(xc.data_ptr<float>()),
                                                  reinterpret_cast<float4*>(y.data_ptr<float>()), n4);
    }
    if (n % 4) {
        relu_tail<<<1, 4, 0, stream>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n4 * 4, n);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

CPP = "torch::Tensor relu_forward(torch::Tensor x);"

_ext = load_inline(
    name="evk_cuda_relu",
    cpp_sources=[CPP],
    cuda_sources=[CUDA],
    functions=["relu_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _ext.relu_forward(x)
        return torch.relu(x)
