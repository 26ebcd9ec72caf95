"""KernelBench's commonest level-2 solution on the GPU, for `gemm_bias_relu`: cuBLAS does the GEMM through
torch.matmul and one CUDA kernel fuses bias + ReLU in place over its output. Feasible under the
kernelbench policy (aten::mm and its share reported), refused under strict."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void bias_relu_kernel(float* __restrict__ y, const float* __restrict__ b, int64_t rows, int64_t cols) {
    const int64_t n = rows * cols;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const float v = y[i] + b[i % cols];
        y[i] = v > 0.0f ? v : 0.0f;
    }
}

torch::Tensor bias_relu_(torch::Tensor y, torch::Tensor bias) {
    TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.dim() == 2, "expects a contiguous 2-D CUDA tensor");
    const int64_t rows = y.size(0), cols = y.size(1);
    const int threads = 256;
    const int blocks = (int)std::min<int64_t>((rows * cols + threads - 1) / threads, 132 * 32);
    bias_relu_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        y.data_ptr<float>(), bias.data_ptr<float>(), rows, cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

CPP = "torch::Tensor bias_relu_(torch::Tensor y, torch::Tensor bias);"

_ext = load_inline(name="evk_policy_epilogue_cuda", cpp_sources=[CPP], cuda_sources=[CUDA], functions=["bias_relu_"],
                   extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.matmul(x, self.linear.weight.t()).contiguous()
        return _ext.bias_relu_(y, self.linear.bias.contiguous())
