"""Softmax of temperature-scaled logits with an additive bias row: softmax((x + bias) / t)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features: int, temperature: float):
        super().__init__()
        self.temperature = temperature
        self.bias = nn.Parameter(torch.randn(features) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax((x + self.bias) / self.temperature, dim=-1)


def get_inputs():
    return [torch.randn(1024, 4096)]


def get_init_inputs():
    return [4096, 2.0]
