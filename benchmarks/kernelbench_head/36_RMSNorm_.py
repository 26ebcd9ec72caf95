"""KernelBench level 1 problem 36 (RMS normalisation over the feature dimension, dim 1) at its current (head) size
(the problem as KernelBench states it; the file written here for the verifier's benchmark).

Device memory: input 112 x 64 x 512 x 512 fp32 = 7.52 GB, output the same; inputs and outputs 15.03 GB."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.sqrt(torch.mean(x**2, dim=1, keepdim=True) + self.eps)
        return x / rms


batch_size = 112
features = 64
dim1 = 512
dim2 = 512


def get_inputs():
    x = torch.rand(batch_size, features, dim1, dim2)
    return [x]


def get_init_inputs():
    return [features]
