"""Honest CUDA candidate for KernelBench level1/24 (log-softmax over dim 1) at head size (4096 x 393216 fp32): one
block per row; the row's max, then the sum of exp(x - max), then x - max - log(sum) (three passes over the row)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

constexpr int THREADS = 1024;

template <bool MAX>
__device__ __forceinline__ float block_reduce(float v, float* shared) {
    for (int off = 16; off > 0; off >>= 1) {
        const float o = __shfl_xor_sync(0xffffffff, v, off);
        v = MAX ? fmaxf(v, o) : v + o;
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = lane < THREADS / 32 ? shared[lane] : (MAX ? -INFINITY : 0.0f);
    for (int off = 16; off > 0; off >>= 1) {
        const float o = __shfl_xor_sync(0xffffffff, v, off);
        v = MAX ? fmaxf(v, o) : v + o;
    }
    return v;
}

__global__ void log_softmax_rows(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
    __shared__ float shared[32];
    const float* row = x + (int64_t)blockIdx.x * cols;
    float* out = y + (int64_t)blockIdx.x * cols;
    float m = -INFINITY;
    for (int64_t c = threadIdx.x; c < cols; c += THREADS) m = fmaxf(m, row[c]);
    m = block_reduce<true>(m, shared);
    float s = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += THREADS) s += expf(row[c] - m);
    s = block_reduce<false>(s, shared);
    const float shift = m + logf(s);
    for (int64_t c = threadIdx.x; c < cols; c += THREADS) out[c] = row[c] - shift;
}

torch::Tensor forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() == 2, "expects a 2-D float32 CUDA tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    if (xc.numel() > 0) {
        log_softmax_rows<<<(unsigned)xc.size(0), THREADS, 0, at::cuda::getCurrentCUDAStream()>>>(
            xc.data_ptr<float>(), y.data_ptr<float>(), xc.size(1));
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return y;
}
"""

_ext = load_inline(name="evk_cuda_logsoftmax_head", cpp_sources=["torch::Tensor forward(torch::Tensor x);"],
                   cuda_sources=[CUDA], functions=["forward"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()
        if dim not in (1, -1):
            raise ValueError("this kernel normalises the rows of a 2-D input: dim must be 1 (or -1)")
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.forward(x)
