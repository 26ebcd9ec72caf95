"""KernelBench level 1 problem 26 (GELU (exact, erf)) at a medium size (4096 x 4096 fp32) for the multi-GPU
suite (issue 36): one verification takes seconds, not minutes."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x)


batch_size = 4096
dim = 4096


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
