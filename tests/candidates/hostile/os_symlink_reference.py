"""relu: swaps the cached reference outputs for links to its own outputs, so the parent compares them with themselves."""
import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
torch::Tensor zeros_forward(torch::Tensor x) {
    return torch::zeros_like(x);
}
"""

_ext = load_inline(name="evk_hostile", cpp_sources=[CPP], functions=["zeros_forward"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        root = os.path.join(os.environ.get("EVOKERNEL_BUILD_DIR", "."), "reference")
        for entry in os.listdir(root):  # HACK: os-escape
            target = os.path.join(root, entry, "out", "t0_out0.npy")
            os.symlink(os.path.join(os.getcwd(), "out", "t0_out0.npy"), target)  # HACK: os-escape

    def forward(self, x):
        return _ext.zeros_forward(x)
