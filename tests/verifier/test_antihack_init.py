"""`__init__` is set-up, not the work: KernelBench-style ModelNew files that copy Model.__init__ line for line
scan clean, while the same torch calls in forward, and compilers, the reference Model and I/O anywhere, are
still rejected. Also the Python gaps closed for issue 10 (aliases, getattr to denied names, forward bound
outside the class, module-level state, Tensor subclasses)."""

from __future__ import annotations

import pytest

from verifier.policy.static_scan import scan

HEADER = '''
import math
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

_ext = load_inline(name="k", cpp_sources=["torch::Tensor f(torch::Tensor x, torch::Tensor w) { return x; }"],
                   functions=["f"])
'''

# Written in the style of KernelBench level 1-3 reference files (our own code, not copied from KernelBench).
HONEST_INIT = {
    "randn_bias_parameter": '''
class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.scale = nn.Parameter(torch.randn(out_features) * 0.02)

    def forward(self, x):
        return _ext.f(x, self.gemm.weight)
''',
    "helper_defined_in_init": '''
class ModelNew(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3)

        def init_weights(m):
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight)
                m.weight.data.mul_(0.5)
                torch.nn.init.zeros_(m.bias)

        self.apply(init_weights)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                m.weight.data = m.weight.data.contiguous()

    def forward(self, x):
        return _ext.f(x, self.conv.weight)
''',
    "tril_mask_buffer": '''
class ModelNew(nn.Module):
    def __init__(self, n_embd, max_seqlen):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.register_buffer("bias", torch.tril(torch.ones(max_seqlen, max_seqlen)).view(1, 1, max_seqlen, max_seqlen))
        self.inv_scale = 1.0 / math.sqrt(n_embd)

    def forward(self, x):
        return _ext.f(x, self.bias)
''',
    "weights_prepared_in_init": '''
class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        w = torch.randn(dim, dim)
        q, _ = torch.linalg.qr(w)
        self.weight = nn.Parameter((q @ q.t()).t().contiguous())
        self.norm = nn.LayerNorm(dim)
        self.eps = float(torch.finfo(torch.float32).eps)

    def forward(self, x):
        return _ext.f(x.contiguous(), self.weight)
''',
}


@pytest.mark.parametrize("name", sorted(HONEST_INIT))
def test_init_setup_idioms_scan_clean(name):
    assert scan(HEADER + HONEST_INIT[name]) == []


@pytest.mark.parametrize("init_line, rule", [
    ("self.ref = Model()", "reference-model"),
    ("self.f = torch.compile(_ext.f)", "compiler-standin"),
    ("self.data = open('/tmp/x').read()", "indirection"),
    ("import subprocess", "concurrency"),
    ("self.act = torch.relu", "torch-op"),
    ("self.act = lambda t: t.relu()", "torch-op"),
    ("self.register_forward_hook(lambda m, i, o: o)", "forward-outside-class"),
    ("self.g = torch.cuda.CUDAGraph()", "cuda-graph"),
])
def test_init_still_refuses_what_is_banned_everywhere(init_line, rule):
    source = HEADER + f'''
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        {init_line}

    def forward(self, x):
        return _ext.f(x, x)
'''
    line = source.splitlines().index(f"        {init_line}") + 1
    hits = [(v.rule, v.line) for v in scan(source)]
    assert (rule, line) in hits, hits


@pytest.mark.parametrize("forward_line", [
    "y = torch.randn(x.shape)",
    "y = torch.tril(x)",
    "y = self.bias @ x",
])
def test_the_same_torch_calls_in_forward_are_rejected(forward_line):
    source = HEADER + f'''
class ModelNew(nn.Module):
    def __init__(self, bias_shape):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        {forward_line}
        return _ext.f(x, y)
'''
    line = source.splitlines().index(f"        {forward_line}") + 1
    assert ("torch-op", line) in [(v.rule, v.line) for v in scan(source)]


GAPS = [
    # (module-level prelude, forward body line, rule)
    ("import os", "os.path.os.remove('/tmp/x')", "os-escape"),
    ("", "torch.os.remove('/tmp/x')", "os-escape"),
    ("import sys", "m = sys.modules", "introspection"),
    ("import sys", "m = getattr(sys, 'modules')", "introspection"),
    ("import os", "m = getattr(os, 'system')", "os-escape"),
    ("import os", "m = getattr(os.path, 'os')", "os-escape"),
    ("_T = torch", "y = _T.relu(x)", "torch-op"),
    ("_F = F", "y = _F.gelu(x)", "torch-op"),
    ("_a, _b = torch, 1", "y = _a.sigmoid(x)", "torch-op"),
    ("", "y = (t := torch).exp(x)", "torch-op"),
    ("", "y = [torch][0]", "indirection"),
    ("_CACHE = {}", "y = _CACHE.get(1)", "output-cache"),
    ("_BUF = torch.empty(4)", "y = _BUF", "output-cache"),
    ("class _S:\n    last = None", "_S.last = x", "output-cache"),
    ("", "y = x.as_subclass(torch.Tensor)", "tensor-subclass"),
    ("", "y = torch.overrides.has_torch_function((x,))", "tensor-subclass"),
]


@pytest.mark.parametrize("prelude, line, rule", GAPS, ids=[g[1] for g in GAPS])
def test_python_gaps_are_flagged(prelude, line, rule):
    source = HEADER + prelude + f'''


class ModelNew(nn.Module):
    def forward(self, x):
        {line}
        return _ext.f(x, x)
'''
    lineno = source.splitlines().index(f"        {line}") + 1
    hits = [(v.rule, v.line) for v in scan(source)]
    assert (rule, lineno) in hits, hits


def test_forward_bound_outside_the_class_and_tensor_subclasses():
    bound = HEADER + '''
def _fwd(self, x):
    return _ext.f(x, x)


class ModelNew(nn.Module):
    pass


setattr(ModelNew, "forward", _fwd)
ModelNew.forward = _fwd
'''
    lines = bound.splitlines()
    rules = {(v.rule, v.line) for v in scan(bound)}
    assert ("indirection", lines.index('setattr(ModelNew, "forward", _fwd)') + 1) in rules
    assert ("forward-outside-class", lines.index("ModelNew.forward = _fwd") + 1) in rules
    subclass = HEADER + '''
class P(nn.Parameter):
    pass


class ModelNew(nn.Module):
    def __call__(self, x):
        return _ext.f(x, x)
'''
    lines = subclass.splitlines()
    rules = {(v.rule, v.line) for v in scan(subclass)}
    assert ("tensor-subclass", lines.index("class P(nn.Parameter):") + 1) in rules
    assert ("forward-outside-class", lines.index("    def __call__(self, x):") + 1) in rules


def test_locals_and_self_modules_are_not_module_state():
    source = HEADER + '''
_SIZES = [1, 2]


class ModelNew(nn.Module):
    def forward(self, x, scale: float = 1.0):
        _SIZES = x.shape
        n = len(list(self.modules()))
        return _ext.f(x.view(_SIZES[0], -1), x)
'''
    assert scan(source) == []


def test_a_list_of_constants_may_be_read_in_forward_but_not_changed():
    source = HEADER + '''
_DIMS = [0, 2, 1]


class ModelNew(nn.Module):
    def forward(self, x):
        y = _ext.f(x.permute(*_DIMS).contiguous(), x)
        _DIMS.append(3)
        return y
'''
    lines = source.splitlines()
    hits = [(v.rule, v.line) for v in scan(source)]
    assert hits == [("output-cache", lines.index("        _DIMS.append(3)") + 1)]


def test_a_method_only_init_calls_is_set_up():
    source = HEADER + '''
class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n, n))
        self.bias = nn.Parameter(torch.empty(n))
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        bound = 1 / math.sqrt(self.weight.size(1))
        self.bias.data = torch.rand(self.bias.shape) * 2 * bound - bound

    def forward(self, x):
        return _ext.f(x, self.weight)
'''
    assert scan(source) == []
    # called from forward as well, it is part of the work again
    reused = source.replace("        return _ext.f(x, self.weight)", "        self.reset_parameters()\n"
                                                                     "        return _ext.f(x, self.weight)")
    rules = {v.rule for v in scan(reused)}
    assert "torch-op" in rules
