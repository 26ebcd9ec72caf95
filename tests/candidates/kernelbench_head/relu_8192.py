"""ReLU on one 8192x8192 float32 input (256 MB), KernelBench format: a big CPU problem for the seeded
input path (issue 22). The honest candidate is tests/candidates/cpu/relu.py (any float32 shape)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(8192, 8192)]


def get_init_inputs():
    return []
