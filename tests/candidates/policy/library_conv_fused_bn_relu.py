"""The commonest level-2 solution for `conv2d_bn_relu`: the convolution stays in torch (on the CPU, oneDNN,
which JITs its code into anonymous executable memory at the first call of each shape: 256 KiB regions,
`mmap` RW then `mprotect` RWX, kept for the process's life) and one custom kernel fuses the inference-mode
batch norm and the ReLU in place over the convolution's output. It must stay feasible under kernelbench
with the exec watch on (`verifier.sandbox.exec_watch`): its JIT regions are made during forward, at new
shapes too (the held-out probes), and none is ever dropped."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor bn_relu_(torch::Tensor y, torch::Tensor mean, torch::Tensor var, torch::Tensor w,
                       torch::Tensor b, double eps) {
    TORCH_CHECK(y.is_contiguous() && y.dim() == 4, "expects a contiguous NCHW tensor");
    const int64_t N = y.size(0), C = y.size(1), HW = y.size(2) * y.size(3);
    float* Y = y.data_ptr<float>();
    const float *m = mean.data_ptr<float>(), *v = var.data_ptr<float>(), *g = w.data_ptr<float>(),
                *s = b.data_ptr<float>();
    for (int64_t n = 0; n < N; ++n)
        for (int64_t c = 0; c < C; ++c) {
            const float scale = g[c] / std::sqrt(v[c] + (float)eps), shift = s[c] - m[c] * scale;
            float* p = Y + (n * C + c) * HW;
            for (int64_t i = 0; i < HW; ++i) {
                const float t = p[i] * scale + shift;
                p[i] = t > 0.0f ? t : 0.0f;
            }
        }
    return y;
}
"""

_ext = load_inline(name="evk_policy_conv_bn_relu", cpp_sources=[CPP], functions=["bn_relu_"],
                   extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)
        self.bn = nn.BatchNorm2d(out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x, self.conv.weight, self.conv.bias, padding=1).contiguous()
        return _ext.bn_relu_(y, self.bn.running_mean.contiguous(), self.bn.running_var.contiguous(),
                             self.bn.weight.contiguous(), self.bn.bias.contiguous(), self.bn.eps)
