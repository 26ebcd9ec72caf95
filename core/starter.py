"""A starter `ModelNew` for a task, so a person in manual mode begins from a file that already builds.

The starter mirrors the task's `Model.__init__` and `forward` signatures (read with `ast`, nothing is run)
and wires one `load_inline` kernel per backend. Its body copies the first input: it compiles and passes
the anti-hacking gate, and the correctness gate then says what the real kernel must compute.
"""

from __future__ import annotations

import ast

_CPU = '''"""Starter kernel for `{name}` ({backend}): replace the loop with the real computation."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>

torch::Tensor {fn}({cpp_params}) {{
    auto src = {first}.contiguous();
    auto out = torch::empty_like(src);
    const float* in = src.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = src.numel();
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {{
        o[i] = in[i];  // TODO: compute the task's output here
    }}
    return out;
}}
"""

_ext = load_inline(
    name="{ext}",
    cpp_sources=[CPP],
    functions=["{fn}"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self{init_params}):
        super().__init__()
{init_body}
    def forward(self{fwd_params}):
        return _ext.{fn}({call_args})
'''

_CUDA = '''"""Starter kernel for `{name}` (cuda): replace the copy with the real computation."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

__global__ void {fn}_kernel(const float* in, float* out, int64_t n) {{
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i];  // TODO: compute the task's output here
}}

torch::Tensor {fn}({cpp_params}) {{
    auto src = {first}.contiguous();
    auto out = torch::empty_like(src);
    const int64_t n = src.numel();
    const int threads = 256;
    {fn}_kernel<<<(n + threads - 1) / threads, threads>>>(src.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}}
"""

CPP_SRC = "torch::Tensor {fn}({cpp_params});"

_ext = load_inline(name="{ext}", cpp_sources=[CPP_SRC], cuda_sources=[CUDA_SRC], functions=["{fn}"])


class ModelNew(nn.Module):
    def __init__(self{init_params}):
        super().__init__()
{init_body}
    def forward(self{fwd_params}):
        return _ext.{fn}({call_args})
'''

_TRITON = '''"""Starter kernel for `{name}` (triton): replace the copy with the real computation."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def {fn}_kernel(in_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(in_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x, mask=mask)  # TODO: compute the task's output here


class ModelNew(nn.Module):
    def __init__(self{init_params}):
        super().__init__()
{init_body}
    def forward(self{fwd_params}):
        src = {first}.contiguous()
        out = torch.empty_like(src)
        n = src.numel()
        {fn}_kernel[(triton.cdiv(n, 1024),)](src, out, n, BLOCK=1024)
        return out
'''


def _signature(func: ast.FunctionDef | None) -> list[str]:
    if func is None:
        return []
    names = [a.arg for a in func.args.posonlyargs + func.args.args][1:]
    if func.args.vararg:
        names.append("*" + func.args.vararg.arg)
    return names


def _model_methods(source: str) -> tuple[ast.FunctionDef | None, ast.FunctionDef | None]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None, None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            methods = {n.name: n for n in node.body if isinstance(n, ast.FunctionDef)}
            return methods.get("__init__"), methods.get("forward")
    return None, None


def _ident(name: str) -> str:
    clean = "".join(ch if ch.isalnum() else "_" for ch in name.lower()).strip("_") or "task"
    return clean if not clean[0].isdigit() else f"t_{clean}"


def starter_kernel(task_name: str, task_source: str, backend: str = "cpu") -> str:
    """A compiling, honest-but-incomplete `ModelNew` for the task (copies its first input)."""
    init, forward = _model_methods(task_source)
    init_args = _signature(init)
    fwd_args = [a for a in _signature(forward) if not a.startswith("*")] or ["x"]
    ident = _ident(task_name)
    fields = {
        "name": task_name,
        "backend": backend,
        "fn": f"{ident}_forward",
        "ext": f"evk_{ident}",
        "first": fwd_args[0],
        "cpp_params": ", ".join(f"torch::Tensor {a}" for a in fwd_args),
        "init_params": "".join(f", {a}" for a in init_args),
        "init_body": "".join(f"        self.{a.lstrip('*')} = {a.lstrip('*')}\n" for a in init_args),
        "fwd_params": "".join(f", {a}" for a in fwd_args),
        "call_args": ", ".join(fwd_args),
    }
    template = {"cuda": _CUDA, "triton": _TRITON}.get(backend, _CPU)
    return template.format(**fields)
