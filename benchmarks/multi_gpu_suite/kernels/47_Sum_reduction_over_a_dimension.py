"""Honest CUDA kernel for the multi-GPU suite's 47_Sum_reduction_over_a_dimension (Sum over one dimension, kept): one thread per output
element walks the reduced dimension; neighbouring threads read neighbouring addresses."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void reduce_middle(const float* __restrict__ x, float* __restrict__ y, int64_t outer, int64_t mid,
                              int64_t inner) {
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= outer * inner) return;
    const int64_t b = i / inner, k = i % inner;
    const float* p = x + b * mid * inner + k;
    float acc = 0.0f;
    for (int64_t r = 0; r < mid; ++r) acc = acc + p[r * inner];
    y[i] = acc;
}

torch::Tensor forward(torch::Tensor x, int64_t dim) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "expects a float32 CUDA tensor");
    auto xc = x.contiguous();
    const int64_t d = dim < 0 ? dim + xc.dim() : dim;
    TORCH_CHECK(d >= 0 && d < xc.dim(), "dim out of range");
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < d; ++i) outer *= xc.size(i);
    for (int64_t i = d + 1; i < xc.dim(); ++i) inner *= xc.size(i);
    auto sizes = xc.sizes().vec();
    const int64_t mid = sizes[d];
    TORCH_CHECK(mid > 0, "cannot reduce an empty dimension");
    sizes[d] = 1;
    auto y = torch::empty(sizes, xc.options());
    const int64_t n = outer * inner;
    if (n == 0) return y;
    reduce_middle<<<(unsigned)((n + 255) / 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), outer, mid, inner);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

_ext = load_inline(name="evk_mg_sum_dim", cpp_sources=["torch::Tensor forward(torch::Tensor x, int64_t dim);"],
                   cuda_sources=[CUDA], functions=["forward"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.forward(x, self.dim)
