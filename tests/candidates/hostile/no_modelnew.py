"""relu: defines no ModelNew at all."""  # HACK: no-modelnew
import torch
import torch.nn as nn


class Kernel(nn.Module):
    def forward(self, x):
        return x
