"""Honest CUDA kernel for the multi-GPU suite's 40_LayerNorm (the head-size kernel of
`tests/candidates/kernelbench_gpu/layernorm_head.py`): one block per sample, the mean, then the centred variance."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

constexpr int THREADS = 256;

__device__ __forceinline__ float block_sum(float v, float* shared) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffff, v, off);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = lane < THREADS / 32 ? shared[lane] : 0.0f;
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffff, v, off);
    return v;
}

__global__ void layernorm_kernel(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                                 float* __restrict__ y, int64_t cols, float eps) {
    __shared__ float shared[THREADS / 32];
    const float* row = x + blockIdx.x * cols;
    float* out = y + blockIdx.x * cols;
    float s = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += THREADS) s += row[c];
    const float mean = block_sum(s, shared) / cols;
    float v = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += THREADS) { const float d = row[c] - mean; v += d * d; }
    const float rstd = rsqrtf(block_sum(v, shared) / cols + eps);
    for (int64_t c = threadIdx.x; c < cols; c += THREADS) out[c] = (row[c] - mean) * rstd * w[c] + b[c];
}

torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "layernorm_forward expects a float32 CUDA tensor");
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    auto bc = bias.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t cols = xc.size(-1);
    const int64_t rows = xc.numel() / cols;
    layernorm_kernel<<<rows, THREADS, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), wc.data_ptr<float>(), bc.data_ptr<float>(), y.data_ptr<float>(), cols, (float)eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

CPP = "torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps);"

_ext = load_inline(
    name="evk_mg_layernorm",
    cpp_sources=[CPP],
    cuda_sources=[CUDA],
    functions=["layernorm_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)  # the reference's names: its weights load

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = len(self.ln.normalized_shape)
        rows = x.reshape(-1, self.ln.weight.numel()) if n else x
        y = _ext.layernorm_forward(rows, self.ln.weight.reshape(-1), self.ln.bias.reshape(-1), self.ln.eps)
        return y.reshape(x.shape)
