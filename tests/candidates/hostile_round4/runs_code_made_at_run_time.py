"""relu, honest, that also runs machine code it wrote at run time: x86-64 bytes (`mov eax, 42; ret`)
copied into executable memory and called through ctypes, at import and on every forward. The binary
audit reads the files a process maps; code in anonymous memory (`MODE = "anon"`: mmap with PROT_EXEC,
no file) has none, so before issue 37's fourth round nothing saw it. With `MODE = "memfd"` the code
lies in a memfd mapped executable (a deleted file: the audit must read it, and it is no ELF object).

Whatever such code does (a raw `syscall`, a BLAS routine found at run time) is out of the audit's sight;
here it only returns 42, so the verdict's finding is about the code's existence, not its effect."""
import ctypes
import mmap
import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

MODE = "anon"

CPP = r"""
#include <torch/extension.h>
torch::Tensor relu_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) o[i] = in[i] > 0.0f ? in[i] : 0.0f;
    return out;
}
"""

_ext = load_inline(name="evk_round4_code_at_run_time", cpp_sources=[CPP], functions=["relu_forward"])

_CODE = bytes([0xB8, 42, 0, 0, 0, 0xC3])  # mov eax, 42 ; ret
if MODE == "memfd":
    _fd = os.memfd_create("evk-jit")
    os.write(_fd, _CODE.ljust(4096, b"\xc3"))
    _libc = ctypes.CDLL(None)
    _libc.mmap.restype = ctypes.c_void_p
    _libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    _addr = _libc.mmap(None, 4096, mmap.PROT_READ | mmap.PROT_EXEC, mmap.MAP_PRIVATE, _fd, 0)
else:
    # private: a shared anonymous mapping shows as a deleted /dev/zero, a file the audit reads (and refuses)
    _buf = mmap.mmap(-1, 4096, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS,
                     prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    _buf.write(_CODE)
    _addr = ctypes.addressof(ctypes.c_char.from_buffer(_buf))
_jit = ctypes.CFUNCTYPE(ctypes.c_int)(_addr)
assert _jit() == 42


class ModelNew(nn.Module):
    def forward(self, x):
        if _jit() != 42:
            raise RuntimeError("the code made at run time did not run")
        return _ext.relu_forward(x)
