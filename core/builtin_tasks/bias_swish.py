"""Per-channel bias add followed by swish (x * sigmoid(x)) on an NCHW feature map."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(channels, 1, 1) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x + self.bias
        return y * torch.sigmoid(y)


def get_inputs():
    return [torch.randn(16, 64, 64, 64)]


def get_init_inputs():
    return [64]
