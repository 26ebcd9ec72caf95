"""Fourth held-out round (issue 37): a helper in a *nested* user + PID namespace, made with a raw
`clone` from inline assembly (no libc symbol for the binary audit to see). The old pause stopped only the
processes of the sandbox's own PID namespace, so such a helper ran on while the sandbox was "paused".
This candidate computes relu honestly; it only makes the helper (which sleeps) and, when the kernel
refuses the namespace, raises the refusal so the test can see which boundary held."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>

static long raw5(long n, long a1, long a2, long a3, long a4, long a5) {
    long ret;
    register long r10 asm("r10") = a4;
    register long r8 asm("r8") = a5;
    asm volatile("syscall" : "=a"(ret) : "a"(n), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8)
                 : "rcx", "r11", "memory");
    return ret;
}

// clone(CLONE_NEWUSER | CLONE_NEWPID | SIGCHLD): a fork whose child is pid 1 of a new PID namespace
int64_t nest() {
    long pid = raw5(56, 0x10000000L | 0x20000000L | 17, 0, 0, 0, 0);
    if (pid == 0) {
        for (;;) raw5(34, 0, 0, 0, 0, 0);  // pause(): the helper would compute here, off the clock
    }
    return pid;  // > 0: the helper's pid; < 0: -errno
}

torch::Tensor kernel_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) o[i] = in[i] > 0.0f ? in[i] : 0.0f;
    return out;
}
"""

_ext = load_inline(name="evk_round4_nested_ns", cpp_sources=[CPP], functions=["nest", "kernel_forward"],
                   extra_cflags=["-O2"])
_HELPER = _ext.nest()
if _HELPER < 0:
    raise RuntimeError(f"NESTED-NAMESPACE-REFUSED errno={-_HELPER}")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _ext.kernel_forward(x)
