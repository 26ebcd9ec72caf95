"""KernelBench level 1 problem 45 (2-D average pooling, kernel 11, stride = kernel, no padding) at its current
(head) size (the problem as KernelBench states it; the file written here for the verifier's benchmark).

Device memory: input 16 x 64 x 2048 x 2048 fp32 = 17.18 GB, output 16 x 64 x 186 x 186 = 0.14 GB; inputs and
outputs 17.32 GB (under the ~25 GB this benchmark admits, so the verifier's ~3x plan fits an 80 GB card)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, kernel_size: int, stride: int | None = None, padding: int = 0):
        super().__init__()
        self.avg_pool = nn.AvgPool2d(kernel_size=kernel_size, stride=stride, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.avg_pool(x)


batch_size = 16
channels = 64
height = 2048
width = 2048
kernel_size = 11


def get_inputs():
    x = torch.rand(batch_size, channels, height, width)
    return [x]


def get_init_inputs():
    return [kernel_size]
