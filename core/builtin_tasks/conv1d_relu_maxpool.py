"""1-D convolution with same padding, ReLU, then max pooling by 2 along the sequence."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.max_pool1d(torch.relu(self.conv(x)), kernel_size=2)


def get_inputs():
    return [torch.randn(16, 32, 4096)]


def get_init_inputs():
    return [32, 64, 5]
