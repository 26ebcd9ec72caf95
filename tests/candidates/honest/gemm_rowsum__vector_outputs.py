"""Honest, gemm_rowsum: sum_j (x W^T + b)_j = x . (sum_j W_j) + sum_j b_j, so one C++ helper folds the
weight (returned with the result in a std::vector) and the row sums are dot products. nn.Linear kept
from __init__; double accumulation."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
#include <vector>

static std::vector<double> fold_weight(const float* W, const float* B, int64_t m, int64_t k, double* bsum) {
    std::vector<double> col(k, 0.0);
    double s = 0.0;
    for (int64_t j = 0; j < m; ++j) {
        const float* row = W + j * k;
        for (int64_t t = 0; t < k; ++t) col[t] += row[t];
        s += B[j];
    }
    *bsum = s;
    return col;
}

std::vector<torch::Tensor> gemm_rowsum(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    auto xc = x.contiguous(), wc = w.contiguous(), bc = b.contiguous();
    const int64_t n = xc.size(0), k = xc.size(1), m = wc.size(0);
    double bsum = 0.0;
    std::vector<double> col = fold_weight(wc.data_ptr<float>(), bc.data_ptr<float>(), m, k, &bsum);
    auto out = torch::empty({n, 1}, xc.options());
    auto folded = torch::empty({k}, xc.options().dtype(torch::kFloat64));
    std::copy(col.begin(), col.end(), folded.data_ptr<double>());
    const float* X = xc.data_ptr<float>();
    float* O = out.data_ptr<float>();
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        double acc = bsum;
        for (int64_t t = 0; t < k; ++t) acc += static_cast<double>(X[i * k + t]) * col[t];
        O[i] = static_cast<float>(acc);
    }
    return {out, folded};
}
"""

_ext = load_inline(name="evk_honest_gemm_rowsum", cpp_sources=[CPP], functions=["gemm_rowsum"],
                   extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        out, _folded = _ext.gemm_rowsum(x, self.linear.weight, self.linear.bias)
        return out
