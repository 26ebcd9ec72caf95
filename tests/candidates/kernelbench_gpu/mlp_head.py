"""Honest CUDA candidate for KernelBench level3/1 (MLP: Linear + ReLU twice, then a Linear; batch 128, 16384 ->
16384 -> 16384 -> 8192 fp32) at head size: cuBLAS does each layer's GEMM through torch.matmul (what the
kernelbench policy allows beside a custom kernel; it reports aten::mm's share) and one CUDA kernel adds the bias
and, between layers, applies the ReLU, from the GEMM's output into a fresh tensor."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void bias_act_kernel(const float* __restrict__ y, const float* __restrict__ b, float* __restrict__ out,
                                int64_t rows, int64_t cols, bool relu) {
    const int64_t n = rows * cols;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const float v = y[i] + b[i % cols];
        out[i] = relu ? (v > 0.0f ? v : 0.0f) : v;
    }
}

torch::Tensor bias_act(torch::Tensor y, torch::Tensor bias, bool relu) {
    TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.dim() == 2 && y.scalar_type() == torch::kFloat32,
                "expects a contiguous 2-D float32 CUDA tensor");
    TORCH_CHECK(bias.is_cuda() && bias.is_contiguous() && bias.numel() == y.size(1) &&
                bias.scalar_type() == torch::kFloat32, "expects one float32 bias per output column");
    auto out = torch::empty_like(y);
    const int64_t rows = y.size(0), cols = y.size(1);
    if (rows * cols > 0) {
        const int threads = 256;
        const int blocks = (int)std::min<int64_t>((rows * cols + threads - 1) / threads, 132 * 32);
        bias_act_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
            y.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), rows, cols, relu);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return out;
}
"""

_ext = load_inline(name="evk_cuda_mlp_head",
                   cpp_sources=["torch::Tensor bias_act(torch::Tensor y, torch::Tensor bias, bool relu);"],
                   cuda_sources=[CUDA], functions=["bias_act"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, input_size: int, layer_sizes: list, output_size: int):
        super().__init__()
        # the reference's layout (network.0, network.2, ...): its weights load by name
        layers: list[nn.Module] = []
        current_input_size = input_size
        for layer_size in layer_sizes:
            layers.append(nn.Linear(current_input_size, layer_size))
            layers.append(nn.ReLU())
            current_input_size = layer_size
        layers.append(nn.Linear(current_input_size, output_size))
        self.network = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        linears = [m for m in self.network if isinstance(m, nn.Linear)]
        for i, layer in enumerate(linears):
            y = torch.matmul(x, layer.weight.t()).contiguous()
            x = _ext.bias_act(y, layer.bias.contiguous(), i < len(linears) - 1)
        return x
