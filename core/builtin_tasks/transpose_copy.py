"""Materialised transpose of a square matrix (a pure memory-movement op)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.t().contiguous()


def get_inputs():
    return [torch.randn(2048, 2048)]


def get_init_inputs():
    return []
