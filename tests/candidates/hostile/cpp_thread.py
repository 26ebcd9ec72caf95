"""relu: the C++ code starts a detached thread that finishes the work later."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
#include <thread>  // HACK: cpp-escape
torch::Tensor relu_forward(torch::Tensor x) {
    auto out = torch::empty_like(x);
    std::thread([=]() mutable {  // HACK: cpp-escape
        const float* in = x.data_ptr<float>();
        float* o = out.data_ptr<float>();
        for (int64_t i = 0; i < x.numel(); ++i) o[i] = in[i] > 0 ? in[i] : 0;
    }).detach();
    return out;
}
"""

_ext = load_inline(name="evk_hostile_thread", cpp_sources=[CPP], functions=["relu_forward"])


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.relu_forward(x)
