"""Mean of each column of a matrix (reduction over the leading, strided dimension)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mean(x, dim=0)


def get_inputs():
    return [torch.randn(8192, 2048)]


def get_init_inputs():
    return []
