"""A task whose reference works in place: ReLU written into its input, which it returns."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.relu_()


def get_inputs():
    return [torch.randn(1024, 1024)]


def get_init_inputs():
    return []
