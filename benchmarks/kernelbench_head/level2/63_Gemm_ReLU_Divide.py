"""KernelBench level 2 problem 63 (a GEMM with bias, ReLU, then a division by a constant) at its current (head)
size (the problem as KernelBench states it; the file written here for the verifier's benchmark).

Device memory: input 1024 x 8192 fp32 = 0.034 GB, output the same; inputs and outputs 0.067 GB, and
the weights (8192 x 8192 + 8192) 0.27 GB in each model's copy."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, divisor: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.divisor = divisor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.linear(x)
        x = torch.relu(x)
        return x / self.divisor


batch_size = 1024
in_features = 8192
out_features = 8192
divisor = 2.0


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, divisor]
