"""Static anti-hacking: every hostile candidate is rejected before anything builds, naming the rule and
the line marked `# HACK: rule` in the file; every honest candidate scans clean."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from core.tasks import load_task
from verifier import verify
from verifier.policy.rules import Policy
from verifier.policy.static_scan import RULES, scan

CANDIDATES = Path(__file__).resolve().parents[1] / "candidates"
HOSTILE = sorted((CANDIDATES / "hostile").glob("*.py"))
HONEST = sorted((CANDIDATES / "cpu").glob("*.py"))
MARK = re.compile(r"HACK: ([\w-]+)")


def _marks(source: str) -> list[tuple[str, int]]:
    return [(m.group(1), i) for i, text in enumerate(source.splitlines(), 1) for m in MARK.finditer(text)]


def _task_of(source: str) -> str:
    """Each hostile file's docstring starts with its built-in task name ("relu: ...")."""
    return source.split('"""', 2)[1].split(":", 1)[0].strip()


def test_hostile_set_covers_every_static_rule():
    rules = {rule for p in HOSTILE for rule, _ in _marks(p.read_text())}
    static_rules = {"no-modelnew", "torch-op", "indirection", "reference-model", "try-fallback",
                    "compiler-standin", "output-cache", "monkey-patch", "introspection", "concurrency",
                    "cpp-torch-op", "cpp-library", "cpp-escape", "os-escape", "tensor-arithmetic",
                    "forward-outside-class", "tensor-subclass"}
    assert static_rules <= set(RULES)
    assert static_rules <= rules, f"no hostile file for {static_rules - rules}"
    assert all(_marks(p.read_text()) for p in HOSTILE), "every hostile file marks its offending line"


@pytest.mark.parametrize("path", HOSTILE, ids=[p.stem for p in HOSTILE])
def test_scan_flags_each_marked_line(path):
    source = path.read_text()
    found = {(v.rule, v.line) for v in scan(source)}
    missing = [m for m in _marks(source) if m not in found]
    assert not missing, f"{path.name}: not flagged {missing}; scan found {sorted(found)}"


@pytest.mark.parametrize("path", HOSTILE, ids=[p.stem for p in HOSTILE])
def test_verify_rejects_before_building(path, make_config, build_root, monkeypatch):
    """Under strict every marked rule refuses before anything builds or runs: no process is started
    (`lifetime.spawn` starts every compiler, build helper, task probe and sandbox of the verifier). This
    was a wall-clock bound (under 5 s) that had to run `alone` under pytest-xdist, 63 times draining the
    other worker; what is started is what the bound stood for, and it does not depend on the load."""
    from verifier.sandbox import lifetime

    source = path.read_text()
    task = load_task(_task_of(source))
    seen = []
    started: list[str] = []
    spawn = lifetime.spawn

    def recorded(argv, *args, **kwargs):
        started.append(" ".join(map(str, argv if isinstance(argv, (list, tuple)) else [argv]))[:200])
        return spawn(argv, *args, **kwargs)

    monkeypatch.setattr(lifetime, "spawn", recorded)
    res = verify(task.source, source, config=make_config(policy="strict"),
                 on_gate=lambda name, state: seen.append((name, state)))
    assert started == [], f"a static rejection must not build or run anything: {started}"
    gate = res.gate("anti_hacking")
    marks = _marks(source)
    first_line = min(line for _, line in marks)
    first = (gate.detail["rule"], gate.detail["line"])
    assert gate.status == "fail"
    assert first in marks and first[1] == first_line, (first, marks)
    assert {(v["rule"], v["line"]) for v in gate.detail["violations"]} >= set(marks)
    assert f"line {first[1]}" in gate.reason and f"[{first[0]}]" in gate.reason
    assert gate.detail["rule_help"] == RULES[first[0]]
    assert [g.status for g in res.gates[1:]] == ["skip"] * 4
    assert not res.feasible and res.outcome == "hack_fail"
    assert ("anti_hacking", "fail") in seen
    assert not (build_root / "ext").exists() or not any((build_root / "ext").glob(f"*/{path.stem}*.so"))
    fb = res.feedback()
    assert f"rule: {first[0]}" in fb and f"line: {first[1]}" in fb


LIBRARY_ONLY = [p for p in HOSTILE if not any(Policy().refuses(rule) for rule, _ in _marks(p.read_text()))]


def test_kernelbench_refuses_statically_all_but_the_library_rules():
    """Under the default (kernelbench) preset the only hostile files that get past the static scan are those
    whose every marked rule is a library rule (torch ops, C++ torch/vendor calls): their fate is decided at
    run time (a custom kernel must run on every forward and reach the output)."""
    reported = {rule for p in LIBRARY_ONLY for rule, _ in _marks(p.read_text())}
    assert reported <= {"torch-op", "tensor-arithmetic", "cpp-torch-op", "cpp-library"}, reported
    for path in HOSTILE:
        if path in LIBRARY_ONLY:
            continue
        refused = [(rule, line) for rule, line in _marks(path.read_text()) if Policy().refuses(rule)]
        assert refused, path.name
        found = {(v.rule, v.line) for v in scan(path.read_text())}
        assert set(refused) <= found, (path.name, refused, found)


LIBRARY_ONLY_RUNTIME = ["torch_relu", "functional_softmax", "cpp_identity_kernel"]


@pytest.mark.slow
@pytest.mark.parametrize("stem", LIBRARY_ONLY_RUNTIME)
def test_kernelbench_still_refuses_torch_without_a_working_kernel(stem, make_config):
    """What the library rules no longer stop statically, the run-time rules stop: torch doing the work
    with no custom kernel, or with one whose result never reaches the output."""
    path = CANDIDATES / "hostile" / f"{stem}.py"
    assert path in LIBRARY_ONLY
    source = path.read_text()
    res = verify(load_task(_task_of(source)).source, source, config=make_config())
    gate = res.gate("anti_hacking")
    assert not res.feasible and gate.status == "fail", (stem, [(g.name, g.status, g.reason) for g in res.gates])
    assert gate.detail["rule"] in {"no-custom-kernel", "custom-kernel-unused", "custom-kernel-skipped",
                                   "decoy-kernel", "copy-kernel"}, gate.reason
    assert res.policy["preset"] == "kernelbench"


@pytest.mark.parametrize("path", HONEST, ids=[p.stem for p in HONEST])
def test_honest_candidates_scan_clean(path):
    assert scan(path.read_text()) == []


HONEST_WRAPPERS = {
    "os_environ_flags": '''
import os
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

FLAGS = ["-O3"] + (["-march=native"] if os.environ.get("EVK_NATIVE") else [])
_ext = load_inline(name="k", cpp_sources=["torch::Tensor f(torch::Tensor x) { return x; }"], functions=["f"],
                   extra_cflags=FLAGS)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.f(x.contiguous())
''',
    "params_and_shapes": '''
import math
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_ext = load_inline(name="k", cpp_sources=["torch::Tensor f(torch::Tensor x, torch::Tensor w) { return x; }"],
                   functions=["f"])


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))

    def forward(self, x):
        n, k = x.shape
        y = _ext.f(x.reshape(n, k).contiguous(), self.weight)
        return y.view(n, -1)
''',
}


@pytest.mark.parametrize("name", sorted(HONEST_WRAPPERS))
def test_honest_wrapper_idioms_are_allowed(name):
    assert scan(HONEST_WRAPPERS[name]) == []


@pytest.mark.parametrize("snippet, rule", [
    ("y = x.exp()", "torch-op"),
    ("y = torch.nn.functional.gelu(x)", "torch-op"),
    ("y = torch.sum(x, dim=1)", "torch-op"),
    ("y = x @ x", "torch-op"),
    ("y = eval('x')", "indirection"),
    ("y = vars(x)", "indirection"),
    ("y = x.__class__", "introspection"),
    ("y = torch._C._nn.gelu(x)", "compiler-standin"),
    ("y = torch.func.vmap(_ext.f)(x)", "compiler-standin"),
])
def test_forward_snippets(snippet, rule):
    source = f'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline
_ext = load_inline(name="k", cpp_sources=["torch::Tensor f(torch::Tensor x) {{ return x; }}"], functions=["f"])


class ModelNew(nn.Module):
    def forward(self, x):
        {snippet}
        return _ext.f(y)
'''
    hits = [(v.rule, v.line) for v in scan(source)]
    assert (rule, 10) in hits, hits


def test_cpp_comments_do_not_trigger_rules():
    source = '''
import torch.nn as nn
from torch.utils.cpp_extension import load_inline
CPP = r"""
#include <torch/extension.h>
// the reference uses torch::softmax and at::matmul; we do not
torch::Tensor f(torch::Tensor x) { return torch::empty_like(x); }
"""
_ext = load_inline(name="k", cpp_sources=[CPP], functions=["f"])


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.f(x)
'''
    assert scan(source) == []


def test_violation_lines_point_into_embedded_cpp():
    source = 'import torch.nn as nn\nCPP = """\n#include <torch/extension.h>\n\ntorch::Tensor f(torch::Tensor x) {\n    return at::relu(x);\n}\n"""\n\n\nclass ModelNew(nn.Module):\n    pass\n'
    [v] = scan(source)
    assert (v.rule, v.line) == ("cpp-torch-op", 6)
    assert "at::relu" in v.message


def test_syntax_error_names_the_line(make_config):
    source = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x)\n        return x\n"
    [v] = scan(source)
    assert (v.rule, v.line) == ("syntax", 5)
    res = verify(load_task("relu").source, source, config=make_config())
    assert (res.gates[0].detail["rule"], res.gates[0].detail["line"]) == ("syntax", 5)
    assert res.outcome == "hack_fail"


# issue 21: escapes that won against the earlier rules -------------------------------------------------
ESCAPE_HEAD = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline
_ext = load_inline(name="k", cpp_sources=["torch::Tensor f(torch::Tensor x) { return x; }"], functions=["f"])
'''
ESCAPE_TAIL = '''

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        {init}

    def forward(self, x):
        return _ext.f(x)
'''


@pytest.mark.parametrize("line, rule", [
    ("m = [torch.utils][0].cpp_extension.importlib", "indirection"),
    ("m = (torch.utils,)[0].cpp_extension.importlib.import_module('os')", "indirection"),
    ("m = {'a': torch.utils}['a'].cpp_extension.os.system('id')", "os-escape"),
    ("m = (torch.utils if True else None).cpp_extension.subprocess", "indirection"),
    ("m = (lambda: torch.utils)().cpp_extension.importlib", "indirection"),
    ("m = [t for t in (torch.utils,)][0].cpp_extension.importlib", "indirection"),
    ("m = torch.utils.cpp_extension.load_inline.__getattribute__('x')", "introspection"),
])
def test_chains_through_subscripts_and_calls_are_checked(line, rule):
    source = ESCAPE_HEAD + line + ESCAPE_TAIL.format(init="pass")
    hits = [(v.rule, v.line) for v in scan(source)]
    assert (rule, 5) in hits, hits


@pytest.mark.parametrize("init", [
    "self.w = torch.load('/tmp/w.pt', weights_only=False)",
    "self.w = torch.load('/tmp/w.pt')",
    "self.w = torch.from_file('/etc/shadow', size=64, dtype=torch.uint8)",
    "self.w = torch.UntypedStorage.from_file('/etc/shadow', False, 64)",
    "self.w = torch.serialization.load('/tmp/w.pt')",
    "self.w = torch.hub.load_state_dict_from_url('http://x')",
])
def test_deserialization_is_refused_even_in_init(init):
    """A torch.load of a hand-made pickle in __init__ forged the whole run; set-up is no excuse."""
    hits = [v.rule for v in scan(ESCAPE_HEAD + ESCAPE_TAIL.format(init=init))]
    assert "deserialization" in hits, hits


@pytest.mark.parametrize("extra", [
    "import pickle\nW = pickle.loads(b'')",
    "import marshal\nW = marshal.loads(b'')",
    "import numpy as np\nW = np.load('/tmp/w.npy', allow_pickle=True)",
    "from torch import load\nW = load('/tmp/w.pt')",
])
def test_pickle_marshal_and_numpy_loads_are_refused(extra):
    hits = [v.rule for v in scan(ESCAPE_HEAD + extra + ESCAPE_TAIL.format(init="pass"))]
    assert "deserialization" in hits, hits


@pytest.mark.parametrize("cpp", [
    'py::object g = m.attr("__globals__");',
    'auto b = m.attr("__builtins__");',
    'auto n = "__builtins__"; auto b = m.attr(n);',
    'auto os = py::module_::import("builtins");',
    'auto os = pybind11::module_::import("os");',
    'py::eval("__import__(\'os\')");',
    'py::exec("x = 1");',
    'auto g = py::globals();',
    'auto v = py::getattr(m, "x");',
    'PyObject* b = PyEval_GetBuiltins();',
    'PyObject* v = PyObject_GetAttrString(o, "x");',
])
def test_pybind11_reaching_python_from_cpp_is_refused(cpp):
    source = ESCAPE_HEAD + f'CPP = r"""\n#include <torch/extension.h>\nvoid g(py::object m, PyObject* o) {{\n    {cpp}\n}}\n"""\n' \
        + ESCAPE_TAIL.format(init="pass")
    hits = [(v.rule, v.line) for v in scan(source)]
    assert ("cpp-python-escape", 8) in hits, hits


def test_explicit_pybind11_bindings_stay_allowed():
    source = ESCAPE_HEAD + '''CPP = r"""
#include <torch/extension.h>
torch::Tensor f2(torch::Tensor x) { return torch::empty_like(x); }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("f2", &f2, "f2", py::arg("x"));
}
"""
''' + ESCAPE_TAIL.format(init="pass")
    assert scan(source) == []
