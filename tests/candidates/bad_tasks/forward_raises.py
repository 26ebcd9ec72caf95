"""A task whose reference forward raises: the verifier must say so in one line."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        raise ValueError("this reference is broken on purpose")


def get_inputs():
    return [torch.randn(8, 8)]


def get_init_inputs():
    return []
