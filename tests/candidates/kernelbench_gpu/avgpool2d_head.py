"""Honest CUDA candidate for KernelBench level1/45 (2-D average pooling, kernel 11, stride 11, no padding) at head
size (16 x 64 x 2048 x 2048 fp32 in): one thread per output element sums its window and divides by the window's
size as nn.AvgPool2d counts it (count_include_pad, floor mode: padding counted, the input's far edge not).
Input offsets are 64-bit (the input has 4.3e9 elements)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void avgpool2d_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t planes,
                                 int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t k, int64_t s, int64_t p) {
    const int64_t n = planes * OH * OW;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t ow = i % OW, oh = (i / OW) % OH, plane = i / (OW * OH);
        int64_t h0 = oh * s - p, w0 = ow * s - p;
        int64_t h1 = min(h0 + k, H + p), w1 = min(w0 + k, W + p);
        const float divisor = (float)((h1 - h0) * (w1 - w0));
        h0 = max(h0, (int64_t)0); w0 = max(w0, (int64_t)0);
        h1 = min(h1, H); w1 = min(w1, W);
        const float* base = x + plane * H * W;
        float acc = 0.0f;
        for (int64_t h = h0; h < h1; ++h)
            for (int64_t w = w0; w < w1; ++w) acc += base[h * W + w];
        y[i] = acc / divisor;
    }
}

torch::Tensor forward(torch::Tensor x, int64_t k, int64_t s, int64_t p) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() == 4, "expects a 4-D float32 CUDA tensor");
    TORCH_CHECK(k > 0 && s > 0 && p >= 0 && 2 * p <= k, "bad pooling parameters");
    auto xc = x.contiguous();
    const int64_t N = xc.size(0), C = xc.size(1), H = xc.size(2), W = xc.size(3);
    const int64_t OH = (H + 2 * p - k) / s + 1, OW = (W + 2 * p - k) / s + 1;
    TORCH_CHECK(OH > 0 && OW > 0, "the pooling window is larger than the padded input");
    auto y = torch::empty({N, C, OH, OW}, xc.options());
    const int64_t n = y.numel();
    if (n > 0) {
        const int threads = 256;
        const int blocks = (int)std::min<int64_t>((n + threads - 1) / threads, 132 * 32);
        avgpool2d_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
            xc.data_ptr<float>(), y.data_ptr<float>(), N * C, H, W, OH, OW, k, s, p);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return y;
}
"""

_ext = load_inline(name="evk_cuda_avgpool2d_head",
                   cpp_sources=["torch::Tensor forward(torch::Tensor x, int64_t k, int64_t s, int64_t p);"],
                   cuda_sources=[CUDA], functions=["forward"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, stride: int | None = None, padding: int = 0):
        super().__init__()
        self.kernel_size = int(kernel_size)
        self.stride = int(stride) if stride else self.kernel_size  # nn.AvgPool2d: None means the kernel size
        self.padding = int(padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.forward(x, self.kernel_size, self.stride, self.padding)
