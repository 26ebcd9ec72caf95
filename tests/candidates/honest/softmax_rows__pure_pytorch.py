"""Not a kernel: a pure-PyTorch ModelNew re-expressing softmax with other torch ops. Refused by policy
(the anti-hacking gate: torch operators do the work), which must be said as such, not as a crash."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        shifted = x - x.max(dim=1, keepdim=True).values
        e = shifted.exp()
        return e / e.sum(dim=1, keepdim=True)
