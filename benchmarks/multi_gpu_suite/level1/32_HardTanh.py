"""KernelBench level 1 problem 32 (HardTanh (-1, 1)) at a medium size (4096 x 4096 fp32) for the multi-GPU
suite (issue 36): one verification takes seconds, not minutes."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.hardtanh(x, min_val=-1.0, max_val=1.0)


batch_size = 4096
dim = 4096


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
