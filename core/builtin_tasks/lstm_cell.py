"""One LSTM cell step over a batch: gates from input and hidden state, new hidden and cell state."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        self.ih = nn.Linear(input_size, 4 * hidden_size)
        self.hh = nn.Linear(hidden_size, 4 * hidden_size)

    def forward(self, x: torch.Tensor, h: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        i, f, g, o = (self.ih(x) + self.hh(h)).chunk(4, dim=1)
        c_next = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h_next = torch.sigmoid(o) * torch.tanh(c_next)
        return torch.cat([h_next, c_next], dim=1)


def get_inputs():
    return [torch.randn(256, 512), torch.randn(256, 512), torch.randn(256, 512)]


def get_init_inputs():
    return [512, 512]
