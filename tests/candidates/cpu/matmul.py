"""Honest CPU candidate for `matmul`: blocked i-k-j loops over raw pointers, rows split across threads."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
#include <algorithm>
#include <vector>

torch::Tensor matmul_forward(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "matmul_forward expects (M,K) @ (K,N)");
    TORCH_CHECK(a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32, "float32 only");
    auto ac = a.contiguous();
    auto bc = b.contiguous();
    const int64_t M = ac.size(0), K = ac.size(1), N = bc.size(1);
    auto out = torch::zeros({M, N}, ac.options());
    const float* A = ac.data_ptr<float>();
    const float* B = bc.data_ptr<float>();
    float* C = out.data_ptr<float>();
    const int64_t KB = 128;
    // Each row accumulates in double, then rounds once: within KernelBench's fp32 tolerance (1e-4).
    #pragma omp parallel
    {
        std::vector<double> acc(N);
        #pragma omp for schedule(static)
        for (int64_t i = 0; i < M; ++i) {
            std::fill(acc.begin(), acc.end(), 0.0);
            for (int64_t k0 = 0; k0 < K; k0 += KB) {
                const int64_t k1 = std::min(K, k0 + KB);
                for (int64_t k = k0; k < k1; ++k) {
                    const double aik = A[i * K + k];
                    const float* brow = B + k * N;
                    #pragma omp simd
                    for (int64_t j = 0; j < N; ++j) acc[j] += aik * brow[j];
                }
            }
            float* crow = C + i * N;
            for (int64_t j = 0; j < N; ++j) crow[j] = static_cast<float>(acc[j]);
        }
    }
    return out;
}
"""

_ext = load_inline(
    name="evk_candidate_matmul",
    cpp_sources=[CPP],
    functions=["matmul_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return _ext.matmul_forward(a, b)
