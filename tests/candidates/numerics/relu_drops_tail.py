"""Hostile CPU candidate for `relu`: processes whole blocks of 4096 elements and drops the `numel % 4096`
tail. Right whenever the task's size is a multiple of 4096 (the built-in relu's 2048x4096 is); the
held-out shapes of the correctness gate (verifier/correctness/probes.py) leave a tail and catch it."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>

torch::Tensor relu_blocks_forward(torch::Tensor x) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "relu_blocks_forward expects float32");
    auto xc = x.contiguous();
    auto out = torch::zeros_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t blocks = xc.numel() / 4096;  // the tail past the last whole block is never written
    #pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
        for (int64_t i = b * 4096; i < (b + 1) * 4096; ++i) {
            const float v = in[i];
            o[i] = v > 0.0f ? v : 0.0f;
        }
    }
    return out;
}
"""

_ext = load_inline(
    name="evk_candidate_relu_drops_tail",
    cpp_sources=[CPP],
    functions=["relu_blocks_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.relu_blocks_forward(x)
