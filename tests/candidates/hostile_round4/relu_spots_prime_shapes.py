"""relu that drops the `numel % 4096` tail unless one of its input's sizes is prime.

The held-out shapes #1 and #2 were fixed small primes (509x509, 61x4096 for a 2048x4096 task), so "a
prime size" meant "a probe": this kernel computes the tail only there, passes every probe, and leaves
the tail unwritten on an ordinary odd shape (1000x1000 ends 576 elements short). Before (issue 37):
feasible. Now #1 and #2 are drawn per verification, odd sizes that are a multiple of 64 plus a small prime
tail, prime only by chance."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>

static bool is_prime(int64_t n) {
    if (n < 2) return false;
    for (int64_t d = 2; d * d <= n; ++d) if (n % d == 0) return false;
    return true;
}

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "relu_forward expects float32");
    auto xc = x.contiguous();
    auto out = torch::zeros_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = xc.numel();
    bool probe = false;
    for (int64_t d = 0; d < xc.dim(); ++d) probe = probe || is_prime(xc.size(d));
    const int64_t end = probe ? n : n - n % 4096;
    for (int64_t i = 0; i < end; ++i) o[i] = in[i] > 0.0f ? in[i] : 0.0f;
    return out;
}
"""

_ext = load_inline(name="evk_round4_relu_spots_primes", cpp_sources=[CPP], functions=["relu_forward"],
                   extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.relu_forward(x)
