"""KernelBench level 1 problem 23 (Softmax over dim 1) at KernelBench v0's size (16 x 16384: a kernel of a few µs) (the problem as KernelBench states it;
the file written here for the verifier's benchmark)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


batch_size = 16
dim = 16384


def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
