"""relu, honest, with one line more: `mallopt(M_MMAP_MAX, 0)` through ctypes when the module is imported.

Before (issue 37): the trusted stub round ran in the reference worker's process, which still mapped its
32 MB input sets fresh each round and paid their page faults; this candidate's own loop did not, so every
one of its rounds came out below the stub ("unresolved": no figure, while `timing.lo/hi` read
19984-65828). The overhead subtracted is now bounded by its own stub round (`verifier.clock.stats.own_overhead_ratio`). Its calls still gained: their
32 MiB outputs came from reused heap pages, the reference's were mmapped and faulted in afresh (paired
re-timing of the relu against the same kernel without the line: 12.4x and 24.9x). Now both processes
time their rounds under the cheapest allocator settings (`verifier.clock.paired_calls.steady_heap`),
and the line buys nothing."""

import ctypes

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "relu_forward expects float32");
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = xc.numel();
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        const float v = in[i];
        o[i] = v > 0.0f ? v : 0.0f;
    }
    return out;
}
"""

_ext = load_inline(
    name="evk_round4_relu_mallopt",
    cpp_sources=[CPP],
    functions=["relu_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


M_MMAP_MAX = -4
ctypes.CDLL(None).mallopt(M_MMAP_MAX, 0)  # the attack: no allocation of this process is mmapped any more


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.relu_forward(x)
