"""Single-head causal self-attention with a mask made by torch.tril and weights initialised by a helper."""

import math

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n_embd, max_seqlen):
        super().__init__()
        self.qkv = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)

        def init(m):
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)

        self.apply(init)
        self.register_buffer("mask", torch.tril(torch.ones(max_seqlen, max_seqlen)).view(1, max_seqlen, max_seqlen))
        self.n_embd = n_embd

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.qkv(x).split(self.n_embd, dim=2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c))
        att = att.masked_fill(self.mask[:, :t, :t] == 0, float("-inf"))
        att = torch.softmax(att, dim=-1)
        return self.proj(att @ v)


batch_size = 4
seq_len = 64
n_embd = 64


def get_inputs():
    return [torch.randn(batch_size, seq_len, n_embd)]


def get_init_inputs():
    return [n_embd, seq_len]
