"""Honest CPU candidate for `relu` that takes only the task's shape (2048x4096) and says so with
TORCH_CHECK. Feasible: the held-out shapes of the correctness gate (verifier/correctness/probes.py) see it raise
and the verdict notes that it handles only the task's shapes."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>

torch::Tensor relu_fixed_forward(torch::Tensor x) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "relu_fixed_forward expects float32");
    TORCH_CHECK(x.dim() == 2 && x.size(0) == 2048 && x.size(1) == 4096,
                "relu_fixed_forward is specialised for 2048x4096 inputs");
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < 2048 * 4096; ++i) {
        const float v = in[i];
        o[i] = v > 0.0f ? v : 0.0f;
    }
    return out;
}
"""

_ext = load_inline(
    name="evk_candidate_relu_task_shape_only",
    cpp_sources=[CPP],
    functions=["relu_fixed_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.relu_fixed_forward(x)
