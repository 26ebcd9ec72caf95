"""3x3 convolution, inference-mode batch normalisation (running statistics), then ReLU."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)
        self.bn = nn.BatchNorm2d(out_channels)
        with torch.no_grad():
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.5, 0.5)
            self.bn.running_mean.uniform_(-0.2, 0.2)
            self.bn.running_var.uniform_(0.5, 1.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        y = F.batch_norm(
            y, self.bn.running_mean, self.bn.running_var, self.bn.weight, self.bn.bias,
            training=False, eps=self.bn.eps,
        )
        return torch.relu(y)


def get_inputs():
    return [torch.randn(8, 32, 64, 64)]


def get_init_inputs():
    return [32, 32]
