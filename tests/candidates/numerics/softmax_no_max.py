"""Hostile CPU candidate for `softmax_rows` (any row softmax): exp and normalise per row *without*
subtracting the row's maximum. Right for the task's randn inputs (exp(4) is small); logits a hundred
times larger overflow exp to inf and the rows become nan where the reference is finite, which the
large-magnitude probe of the correctness gate (verifier/correctness/probes.py) catches."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor softmax_nomax_forward(torch::Tensor x) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "softmax_nomax_forward expects float32");
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const int64_t cols = xc.size(-1);
    const int64_t rows = xc.numel() / cols;
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* row = in + r * cols;
        float* orow = o + r * cols;
        float sum = 0.0f;
        for (int64_t c = 0; c < cols; ++c) {
            const float e = std::exp(row[c]);  // no max subtracted: overflows for logits above ~88
            orow[c] = e;
            sum += e;
        }
        const float inv = 1.0f / sum;
        for (int64_t c = 0; c < cols; ++c) orow[c] *= inv;
    }
    return out;
}
"""

_ext = load_inline(
    name="evk_candidate_softmax_no_max",
    cpp_sources=[CPP],
    functions=["softmax_nomax_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.softmax_nomax_forward(x)
