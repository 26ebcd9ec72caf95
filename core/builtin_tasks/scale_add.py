"""Scaled add of two tensors: alpha * x + y, with alpha fixed at construction."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.alpha * x + y


def get_inputs():
    return [torch.randn(1024, 4096), torch.randn(1024, 4096)]


def get_init_inputs():
    return [0.75]
