"""Honest CUDA candidate for KernelBench level1/36 (RMS normalisation over dim 1) at head size (112 x 64 x 512 x
512 fp32): one thread per (sample, position) walks the 64 features twice, the sum of squares then x / rms;
neighbouring threads read neighbouring addresses (the features are 512 x 512 elements apart)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void rmsnorm_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t outer, int64_t features,
                               int64_t inner, float eps) {
    const int64_t n = outer * inner;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t b = i / inner, k = i % inner;
        const float* px = x + b * features * inner + k;
        float* py = y + b * features * inner + k;
        float ss = 0.0f;
        for (int64_t f = 0; f < features; ++f) { const float v = px[f * inner]; ss += v * v; }
        const float rms = sqrtf(ss / (float)features + eps);
        for (int64_t f = 0; f < features; ++f) py[f * inner] = px[f * inner] / rms;
    }
}

torch::Tensor forward(torch::Tensor x, double eps) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() >= 2,
                "expects a float32 CUDA tensor of at least 2 dimensions");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t outer = xc.size(0), features = xc.size(1);
    const int64_t inner = features > 0 && outer > 0 ? xc.numel() / (outer * features) : 0;
    const int64_t n = outer * inner;
    if (n > 0 && features > 0) {
        const int threads = 256;
        const int blocks = (int)std::min<int64_t>((n + threads - 1) / threads, 132 * 32);
        rmsnorm_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
            xc.data_ptr<float>(), y.data_ptr<float>(), outer, features, inner, (float)eps);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return y;
}
"""

_ext = load_inline(name="evk_cuda_rmsnorm_head", cpp_sources=["torch::Tensor forward(torch::Tensor x, double eps);"],
                   cuda_sources=[CUDA], functions=["forward"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.forward(x, self.eps)
