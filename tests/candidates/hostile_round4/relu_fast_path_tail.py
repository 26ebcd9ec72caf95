"""Fourth held-out round (issue 37), no trickery at all: an ordinary fast-path bug. Tensors of 2^20
elements or more take a blocked path that drops the `numel % 4096` tail; smaller ones a plain loop that is
right. The task's own 2048x4096 is a multiple of 4096 and the old held-out shapes were all below 2^18
elements, so every probe passed; wrong at 2047x4099."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>

torch::Tensor relu_fast_forward(torch::Tensor x) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "relu_fast_forward expects float32");
    auto xc = x.contiguous();
    auto out = torch::zeros_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = xc.numel();
    if (n >= (int64_t(1) << 20)) {
        const int64_t blocks = n / 4096;  // the bug: the tail past the last whole block is never written
        #pragma omp parallel for schedule(static)
        for (int64_t b = 0; b < blocks; ++b)
            for (int64_t i = b * 4096; i < (b + 1) * 4096; ++i) o[i] = in[i] > 0.0f ? in[i] : 0.0f;
    } else {
        for (int64_t i = 0; i < n; ++i) o[i] = in[i] > 0.0f ? in[i] : 0.0f;
    }
    return out;
}
"""

_ext = load_inline(name="evk_round4_relu_fast_path", cpp_sources=[CPP], functions=["relu_fast_forward"],
                   extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.relu_fast_forward(x)
