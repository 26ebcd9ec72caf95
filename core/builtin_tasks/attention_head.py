"""One causal self-attention head: q/k/v projections, scaled scores, masked softmax, weighted sum."""

import math

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d_model: int, d_head: int):
        super().__init__()
        self.q = nn.Linear(d_model, d_head, bias=False)
        self.k = nn.Linear(d_model, d_head, bias=False)
        self.v = nn.Linear(d_model, d_head, bias=False)
        self.scale = 1.0 / math.sqrt(d_head)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.q(x), self.k(x), self.v(x)
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        seq = x.shape[1]
        mask = torch.ones(seq, seq, dtype=torch.bool, device=x.device).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
        return torch.matmul(torch.softmax(scores, dim=-1), v)


def get_inputs():
    return [torch.randn(8, 512, 256)]


def get_init_inputs():
    return [256, 64]
