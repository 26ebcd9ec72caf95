"""Honest CUDA candidate for `softmax_rows`: one block per row, online max/sum in one read, then normalise."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cfloat>

constexpr int THREADS = 256;

__device__ __forceinline__ void combine(float& m, float& s, float om, float os) {
    const float nm = fmaxf(m, om);
    s = (m == -FLT_MAX ? 0.0f : s * __expf(m - nm)) + (om == -FLT_MAX ? 0.0f : os * __expf(om - nm));
    m = nm;
}

__global__ void softmax_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
    const float* row = x + blockIdx.x * cols;
    float* out = y + blockIdx.x * cols;
    float m = -FLT_MAX, s = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += THREADS) {
        const float v = row[c];
        if (v > m) { s = s * __expf(m - v) + 1.0f; m = v; }
        else { s += __expf(v - m); }
    }
    for (int off = 16; off > 0; off >>= 1) {
        const float om = __shfl_xor_sync(0xffffffff, m, off);
        const float os = __shfl_xor_sync(0xffffffff, s, off);
        combine(m, s, om, os);
    }
    __shared__ float sm[THREADS / 32], ss[THREADS / 32];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) { sm[warp] = m; ss[warp] = s; }
    __syncthreads();
    if (warp == 0) {
        m = lane < THREADS / 32 ? sm[lane] : -FLT_MAX;
        s = lane < THREADS / 32 ? ss[lane] : 0.0f;
        for (int off = 16; off > 0; off >>= 1) {
            const float om = __shfl_xor_sync(0xffffffff, m, off);
            const float os = __shfl_xor_sync(0xffffffff, s, off);
            combine(m, s, om, os);
        }
        if (lane == 0) { sm[0] = m; ss[0] = s; }
    }
    __syncthreads();
    const float rm = sm[0], inv = 1.0f / ss[0];
    for (int64_t c = threadIdx.x; c < cols; c += THREADS) out[c] = __expf(row[c] - rm) * inv;
}

torch::Tensor softmax_rows_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "softmax_rows_forward expects a float32 CUDA tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t cols = xc.size(-1);
    const int64_t rows = xc.numel() / cols;
    softmax_rows_kernel<<<rows, THREADS, 0, at::cuda::getCurrentCUDAStream()>>>(xc.data_ptr<float>(), y.data_ptr<float>(), cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

CPP = "torch::Tensor softmax_rows_forward(torch::Tensor x);"

_ext = load_inline(
    name="evk_cuda_softmax_rows",
    cpp_sources=[CPP],
    cuda_sources=[CUDA],
    functions=["softmax_rows_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.softmax_rows_forward(x)
