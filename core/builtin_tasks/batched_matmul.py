"""Batched matrix product of many small matrices: C[b] = A[b] @ B[b]."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.bmm(a, b)


def get_inputs():
    return [torch.randn(64, 256, 128), torch.randn(64, 128, 256)]


def get_init_inputs():
    return []
