"""KernelBench level 2 problem 76 (a bias-free GEMM, a bias added, ReLU) at its current (head) size (the problem as
KernelBench states it; the file written here for the verifier's benchmark).

Device memory: input 1024 x 8192 fp32 = 0.034 GB, output the same; inputs and outputs 0.067 GB, and
the weights (8192 x 8192 + 8192) 0.27 GB in each model's copy."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, bias_shape: tuple):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.gemm(x)
        x = x + self.bias
        return torch.relu(x)


batch_size = 1024
in_features = 8192
out_features = 8192
bias_shape = (out_features,)


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, bias_shape]
