"""ReLU on inputs drawn in [0, 1) as KernelBench head draws them (smaller): ReLU is the identity there."""
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.rand(64, 1024)]

def get_init_inputs():
    return []
