"""`benchmarks/kernelbench_gpu.py`'s problems and kernels, checked on the CPU before any device time is spent.

The GPU run is expensive (tens of seconds per problem on a lent card) and a broken row only shows there. So
here, with no GPU and without building anything: every PROBLEMS row's files exist; each problem file, with
its size constants patched down, runs its Model on the CPU and matches a reference computed by hand (a
different formula than the Model's, so a problem file that states the wrong operator fails); the full-size
problems are sized on torch's meta device (inputs + outputs under the benchmark's ~25 GB, the level mix
issue 33 asks for, the GB figures the files state); and each kernel file parses, defines a ModelNew whose
`__init__` and `forward` accept what the problem's Model gets, passes the static rules the kernelbench policy
refuses, declares to `load_inline` exactly the C++ functions its CUDA text defines, and launches every kernel
on the current stream.
"""

from __future__ import annotations

import ast
import copy
import importlib.util
import inspect
import math
import re
import subprocess
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "kernelbench_gpu.py"


def _script():
    spec = importlib.util.spec_from_file_location("kernelbench_gpu_script", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # only the standard library at import: torch is imported in main()
    return module


KG = _script()
ROWS = KG.PROBLEMS
HEAD_ROWS = [r for r in ROWS if r[0].endswith("_head")]
LIMIT_GB = 25.0  # the benchmark admits problems whose inputs + outputs stay under this (its docstring)


def _ids(rows):
    return [r[0] for r in rows]


# --------------------------------------------------------------------------- the list itself


def test_every_row_names_files_that_exist_and_a_known_backend():
    names = [r[0] for r in ROWS]
    assert len(names) == len(set(names)), "two rows share a name: --only could not tell them apart"
    for name, problem, kernel, backend in ROWS:
        assert re.fullmatch(r"L[123]/\w+", name), name
        assert problem.is_file(), f"{name}: no problem file {problem}"
        assert kernel.is_file(), f"{name}: no kernel file {kernel}"
        assert backend in ("cuda", "triton"), name
        assert problem.is_relative_to(ROOT) and kernel.is_relative_to(ROOT)  # main() prints them relative


def test_the_head_list_has_the_problems_issue_33_asks_for():
    """At least 12 head problems from levels 1-3 (13 with this branch's additions), level1/45's average pooling
    among them, and the level-2 and level-3 problems in their own folders."""
    levels = [int(r[0][1]) for r in HEAD_ROWS]
    assert len(HEAD_ROWS) >= 13, _ids(HEAD_ROWS)
    assert levels.count(2) >= 2 and levels.count(3) >= 1, _ids(HEAD_ROWS)
    assert any(r[1].name == "45_Average_Pooling_2D.py" for r in HEAD_ROWS)
    for name, problem, _, _ in HEAD_ROWS:
        level = int(name[1])
        if level > 1:
            assert problem.parent.name == f"level{level}", f"{name}: {problem} is not in a level{level} folder"


# --------------------------------------------------------------------------- the problems, small, on the CPU

#: each problem file's size constants, patched down; every name must exist in the file (a rename fails here)
SMALL: dict[str, dict] = {
    "1_Square_matrix_multiplication_": {"N": 9},
    "100_Huge_ReLU": {"batch_size": 4, "dim": 33},
    "19_ReLU": {"batch_size": 4, "dim": 33},
    "21_Sigmoid": {"batch_size": 4, "dim": 37},
    "22_Tanh": {"batch_size": 4, "dim": 37},
    "23_Softmax": {"batch_size": 4, "dim": 37},
    "24_LogSoftmax": {"batch_size": 4, "dim": 37},
    "26_GELU_": {"batch_size": 4, "dim": 37},
    "36_RMSNorm_": {"batch_size": 2, "features": 5, "dim1": 3, "dim2": 4},
    "40_LayerNorm": {"batch_size": 2, "features": 3, "dim1": 4, "dim2": 5},
    "45_Average_Pooling_2D": {"batch_size": 2, "channels": 3, "height": 25, "width": 34},
    "47_Sum_reduction_over_a_dimension": {"batch_size": 2, "dim1": 5, "dim2": 7},
    "76_Gemm_Add_ReLU": {"batch_size": 3, "in_features": 16, "out_features": 8, "bias_shape": (8,)},
    "63_Gemm_ReLU_Divide": {"batch_size": 3, "in_features": 16, "out_features": 8},
    "1_MLP": {"batch_size": 3, "input_size": 16, "layer_sizes": [12, 10], "output_size": 8},
}


def _linears(model) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
    return [(m.weight, m.bias) for m in model.modules() if isinstance(m, torch.nn.Linear)]


def _by_hand_avgpool(x: torch.Tensor, k: int) -> torch.Tensor:
    """Window sums with explicit loops (stride k, no padding): nothing shared with nn.AvgPool2d."""
    n, c, h, w = x.shape
    oh, ow = (h - k) // k + 1, (w - k) // k + 1
    out = torch.empty(n, c, oh, ow)
    for i in range(oh):
        for j in range(ow):
            out[:, :, i, j] = x[:, :, i * k:i * k + k, j * k:j * k + k].sum(dim=(2, 3)) / (k * k)
    return out


def _mlp_by_hand(model, x: torch.Tensor) -> torch.Tensor:
    layers = _linears(model)
    for i, (w, b) in enumerate(layers):
        x = x @ w.T + b
        if i < len(layers) - 1:
            x = torch.where(x > 0, x, torch.zeros_like(x))
    return x


def _softmax_by_hand(x: torch.Tensor) -> torch.Tensor:
    e = torch.exp(x - x.max(dim=1, keepdim=True).values)
    return e / e.sum(dim=1, keepdim=True)


#: the operator each problem states, computed another way: (model, inputs, the module's globals) -> expected
BY_HAND = {
    "1_Square_matrix_multiplication_": lambda m, xs, g: (xs[0][:, :, None] * xs[1][None, :, :]).sum(dim=1),
    "100_Huge_ReLU": lambda m, xs, g: torch.where(xs[0] > 0, xs[0], torch.zeros_like(xs[0])),
    "19_ReLU": lambda m, xs, g: torch.where(xs[0] > 0, xs[0], torch.zeros_like(xs[0])),
    "21_Sigmoid": lambda m, xs, g: 1 / (1 + torch.exp(-xs[0])),
    "22_Tanh": lambda m, xs, g: 1 - 2 / (torch.exp(2 * xs[0]) + 1),
    "23_Softmax": lambda m, xs, g: _softmax_by_hand(xs[0]),
    "24_LogSoftmax": lambda m, xs, g: torch.log(_softmax_by_hand(xs[0])),
    "26_GELU_": lambda m, xs, g: 0.5 * xs[0] * (1 + torch.erf(xs[0] / math.sqrt(2))),
    "36_RMSNorm_": lambda m, xs, g: xs[0] / torch.sqrt((xs[0] * xs[0]).sum(dim=1, keepdim=True) / g["features"]
                                                       + 1e-5),
    "40_LayerNorm": lambda m, xs, g: (xs[0] - xs[0].mean(dim=(1, 2, 3), keepdim=True))
    / torch.sqrt(xs[0].var(dim=(1, 2, 3), unbiased=False, keepdim=True) + 1e-5),
    "45_Average_Pooling_2D": lambda m, xs, g: _by_hand_avgpool(xs[0], g["kernel_size"]),
    "47_Sum_reduction_over_a_dimension": lambda m, xs, g: sum(xs[0][:, i:i + 1, :] for i in range(xs[0].shape[1])),
    "76_Gemm_Add_ReLU": lambda m, xs, g: (xs[0] @ m.gemm.weight.T + m.bias).clamp(min=0),
    "63_Gemm_ReLU_Divide": lambda m, xs, g: (xs[0] @ m.linear.weight.T + m.linear.bias).clamp(min=0) / g["divisor"],
    "1_MLP": lambda m, xs, g: _mlp_by_hand(m, xs[0]),
}


def _load(path: Path, patch: dict | None = None) -> dict:
    namespace: dict = {"__name__": f"_head_{path.stem}", "__file__": str(path)}
    exec(compile(path.read_text(), str(path), "exec"), namespace)  # our own problem files
    for key, value in (patch or {}).items():
        assert key in namespace, f"{path.name} has no size constant {key!r} to patch down"
        namespace[key] = value
    return namespace


def _nbytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


PROBLEM_FILES = sorted({r[1] for r in ROWS}, key=str)


def test_every_problem_file_has_a_small_size_and_a_hand_reference():
    stems = {p.stem for p in PROBLEM_FILES}
    assert stems <= set(SMALL) and stems <= set(BY_HAND), sorted(stems - set(SMALL) - set(BY_HAND))


@pytest.mark.parametrize("problem", PROBLEM_FILES, ids=[p.stem for p in PROBLEM_FILES])
def test_the_problem_runs_small_on_the_cpu_and_states_the_operator(problem):
    g = _load(problem, SMALL[problem.stem])
    with torch.device("meta"):  # every size constant patched: the inputs are tiny before any is allocated
        assert _nbytes(g["get_inputs"]()) < 1 << 20, f"{problem.name}: a size constant is not patched down"
    torch.manual_seed(0)
    init = g["get_init_inputs"]()
    model = g["Model"](*init)
    inputs = g["get_inputs"]()
    assert all(x.dtype == torch.float32 for x in inputs if isinstance(x, torch.Tensor))
    with torch.no_grad():
        out = model(*inputs)
        expected = BY_HAND[problem.stem](model, inputs, g)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
    assert out.shape == expected.shape, (problem.name, tuple(out.shape), tuple(expected.shape))
    torch.testing.assert_close(out, expected.to(torch.float32), rtol=1e-4, atol=1e-5)


def test_a_wrong_operator_is_caught_by_the_hand_reference():
    """The check above can fail: log-softmax's hand reference refuses plain softmax."""
    g = _load(ROOT / "benchmarks" / "kernelbench_head" / "24_LogSoftmax.py", SMALL["24_LogSoftmax"])
    x = g["get_inputs"]()[0]
    with pytest.raises(AssertionError):
        torch.testing.assert_close(torch.softmax(x, dim=1), BY_HAND["24_LogSoftmax"](None, [x], g))


# --------------------------------------------------------------------------- full sizes, on the meta device


def _full_size(problem: Path) -> dict:
    from core.task_probe import estimate_memory

    return estimate_memory(_load(problem), str(problem))


def test_head_problems_fit_and_the_level_one_mix_is_large():
    """On the meta device (nothing allocated): every head problem's inputs + outputs under ~25 GB, and at least
    6 level-1 head problems of KernelBench's >= 1 GB kind."""
    big_level1 = []
    for name, problem, _, _ in HEAD_ROWS:
        est = _full_size(problem)
        in_out = (est["inputs_bytes"] + est["outputs_bytes"]) / 1e9
        assert in_out <= LIMIT_GB, f"{name}: {in_out:.1f} GB of inputs and outputs"
        if name.startswith("L1/") and est["inputs_bytes"] >= 1e9:
            big_level1.append(name)
    assert len(big_level1) >= 6, big_level1


@pytest.mark.parametrize("problem", sorted({r[1] for r in HEAD_ROWS if "kernelbench_head" in str(r[1])}, key=str),
                         ids=lambda p: p.stem)
def test_the_head_file_says_which_problem_and_its_gb_figure_is_right(problem):
    doc = ast.get_docstring(ast.parse(problem.read_text())) or ""
    m = re.match(r"KernelBench level (\d) problem (\d+)\b", doc)
    assert m, f"{problem.name}: the docstring does not say which KernelBench problem it is"
    level = 1 if problem.parent.name == "kernelbench_head" else int(problem.parent.name.removeprefix("level"))
    assert (int(m.group(1)), int(m.group(2))) == (level, int(problem.name.split("_")[0]))
    assert "current (head) size" in _flat(doc), problem.name
    stated = re.search(r"inputs and\s+outputs\s+([\d.]+)\s+GB", doc)
    if stated:  # the files written with their memory figure: it must be the one the shapes give
        est = _full_size(problem)
        actual = (est["inputs_bytes"] + est["outputs_bytes"]) / 1e9
        assert float(stated.group(1)) == pytest.approx(actual, rel=0.05), (problem.name, actual)


# --------------------------------------------------------------------------- the kernels, read, not built


def _module_strings(tree: ast.Module) -> dict[str, str]:
    return {n.targets[0].id: n.value.value for n in tree.body
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
            and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)}


def _method(tree: ast.Module, cls: str, name: str) -> ast.FunctionDef:
    klass = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls), None)
    assert klass is not None, f"no class {cls}"
    fn = next((n for n in klass.body if isinstance(n, ast.FunctionDef) and n.name == name), None)
    assert fn is not None, f"{cls} has no {name}"
    return fn


def _signature(fn: ast.FunctionDef) -> inspect.Signature:
    """The method's signature, from its text (the kernel file is never imported: that would build it)."""
    bare = copy.deepcopy(fn)
    bare.body, bare.decorator_list, bare.returns = [ast.Pass()], [], None
    for a in [*bare.args.posonlyargs, *bare.args.args, *bare.args.kwonlyargs]:
        a.annotation = None
    module = ast.fix_missing_locations(ast.Module(body=[bare], type_ignores=[]))
    namespace: dict = {"torch": torch, "nn": torch.nn}
    exec(compile(module, "<signature>", "exec"), namespace)
    return inspect.signature(namespace[fn.name])


def _names(sig: inspect.Signature) -> list[str]:
    return [p for p in sig.parameters if p != "self"]


@pytest.mark.parametrize("row", ROWS, ids=_ids(ROWS))
def test_the_kernel_defines_modelnew_taking_what_model_gets(row):
    name, problem, kernel, _ = row
    task, cand = ast.parse(problem.read_text()), ast.parse(kernel.read_text())
    g = _load(problem, SMALL[problem.stem])
    n_init = len(g["get_init_inputs"]())
    n_inputs = len(g["get_inputs"]())
    for method, n_args in (("__init__", n_init), ("forward", n_inputs)):
        theirs, mine = _signature(_method(task, "Model", method)), _signature(_method(cand, "ModelNew", method))
        mine.bind(None, *range(n_args))  # the verifier calls ModelNew(*init) and forward(*inputs)
        assert len(_names(mine)) == len(_names(theirs)), (name, method, str(mine), str(theirs))
        if kernel.parent.name == "kernelbench_gpu":  # this benchmark's own kernels keep the reference's names
            assert _names(mine) == _names(theirs), (name, method, str(mine), str(theirs))


def test_a_modelnew_that_takes_fewer_arguments_is_caught():
    """The check above can fail: a forward of one argument cannot take matmul's two inputs."""
    cand = ast.parse("class ModelNew:\n    def forward(self, a):\n        pass\n")
    with pytest.raises(TypeError):
        _signature(_method(cand, "ModelNew", "forward")).bind(None, 1, 2)


def _load_inline_call(tree: ast.Module) -> ast.Call:
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "load_inline"]
    assert len(calls) == 1, "expected one load_inline call"
    return calls[0]


def _strings(node: ast.expr, consts: dict[str, str]) -> list[str]:
    items = node.elts if isinstance(node, ast.List) else [node]
    out = []
    for item in items:
        if isinstance(item, ast.Constant) and isinstance(item.value, str):
            out.append(item.value)
        elif isinstance(item, ast.Name) and item.id in consts:
            out.append(consts[item.id])
        else:
            raise AssertionError(f"cannot read {ast.dump(item)} as a string")
    return out


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _launch_problems(cuda: str) -> list[str]:
    """Kernel launches not on the current stream: `<<<grid, block, shared, stream>>>` where stream is
    `at::cuda::getCurrentCUDAStream()` or a variable set from it."""
    from_current = set(re.findall(r"(\w+)\s*=\s*at::cuda::getCurrentCUDAStream\(\)", cuda))
    problems = []
    for config in re.findall(r"<<<(.*?)>>>", cuda, re.S):
        parts = [p.strip() for p in config.split(",")]
        if len(parts) != 4 or not (parts[3] == "at::cuda::getCurrentCUDAStream()" or parts[3] in from_current):
            problems.append(_flat(config))
    return problems


CUDA_ROWS = [r for r in ROWS if r[3] == "cuda"]
CUDA_KERNELS = sorted({r[2] for r in CUDA_ROWS}, key=str)


@pytest.mark.parametrize("kernel", CUDA_KERNELS, ids=lambda p: p.stem)
def test_the_cuda_kernel_binds_what_it_defines_and_launches_on_the_current_stream(kernel):
    from verifier.policy.rules import make_policy
    from verifier.policy.static_scan import scan

    source = kernel.read_text()
    tree = ast.parse(source)
    consts = _module_strings(tree)
    kw = {k.arg: k.value for k in _load_inline_call(tree).keywords}
    cuda = "\n".join(_strings(kw["cuda_sources"], consts))
    decls = [d for text in _strings(kw["cpp_sources"], consts) for d in text.split(";") if d.strip()]
    functions = _strings(kw["functions"], consts)
    assert functions and len(decls) == len(functions), (kernel.name, decls, functions)
    for fn, decl in zip(functions, decls, strict=True):
        assert re.search(rf"\b{fn}\(", decl), f"{kernel.name}: {fn} is not what `{_flat(decl)}` declares"
        assert _flat(decl) + " {" in _flat(cuda), f"{kernel.name}: the CUDA text defines no `{_flat(decl)}`"
    called = set(re.findall(r"_ext\.(\w+)\(", source))
    assert called and called <= set(functions), (kernel.name, called, functions)
    assert "<<<" in cuda and _launch_problems(cuda) == [], (kernel.name, _launch_problems(cuda))
    assert "C10_CUDA_KERNEL_LAUNCH_CHECK()" in cuda and "kFloat32" in cuda, kernel.name
    refused = [v for v in scan(source, "cuda") if make_policy("kernelbench").refuses(v.rule)]
    assert refused == [], (kernel.name, [(v.rule, v.line) for v in refused])


def test_cuda_kernels_have_build_names_of_their_own():
    names = {}
    for kernel in CUDA_KERNELS:
        kw = {k.arg: k.value for k in _load_inline_call(ast.parse(kernel.read_text())).keywords}
        assert isinstance(kw["name"], ast.Constant), kernel.name
        names.setdefault(kw["name"].value, []).append(kernel.name)
    assert all(len(v) == 1 for v in names.values()), names


def test_a_launch_on_the_default_stream_is_caught():
    """The stream check can fail: three-argument launches and a stream not taken from torch are named."""
    cuda = ("auto stream = at::cuda::getCurrentCUDAStream();\n"
            "k<<<1, 32, 0, stream>>>(x);\nk<<<1, 32>>>(x);\nk<<<1, 32, 0, other>>>(x);\n"
            "k<<<2, 64, 0, at::cuda::getCurrentCUDAStream()>>>(x);")
    assert _launch_problems(cuda) == ["1, 32", "1, 32, 0, other"]


# --------------------------------------------------------------------------- the verifier's own build plan


@pytest.mark.parametrize("kernel", CUDA_KERNELS, ids=lambda p: p.stem)
def test_the_verifier_plans_the_split_build_with_the_tiny_tensor_first(kernel):
    """What the CUDA backend will do with the kernel on the card, planned here without a compiler: the split
    layout (not torch's 25-70 s single build), bound types the trusted side's bindings accept, and the tiny
    Tensor headers as the first try."""
    from tests.gpu.test_cuda_plan import TOOLCHAIN, spec_of
    from verifier.backends.cuda_plan import fallback_chain
    from verifier.build.shared_artefacts import safe_type

    spec = spec_of(kernel)
    chain = fallback_chain(spec, TOOLCHAIN, {"full": "/job/shim", "light": "/job/shim-light", "tiny": "/job/tiny"})
    assert [p.headers for p in chain] == ["tiny", "light", "full"], (kernel.name, chain[0].reason)
    assert all(p.layout == "split" for p in chain)
    assert all(safe_type(s.ret) and all(safe_type(p) for p in s.params) for s in chain[0].signatures), kernel.name


def _nvcc_tiny(kernel: Path, work: Path) -> subprocess.CompletedProcess:
    """The kernel TU compiled as the split build's first try (behind the tiny Tensor), with this machine's
    nvcc and sm_90 code; no torch header is needed, so a CPU build of torch serves."""
    from tests.gpu.test_cuda_plan import spec_of
    from verifier.backends.cuda import toolchain_here
    from verifier.backends.cuda_plan import fallback_chain
    from verifier.build.split_build import TORCH_NAMESPACE
    from verifier.build.tiny_tensor import tiny_shim_files

    shim = work / "shim-tiny"
    for rel, text in tiny_shim_files(TORCH_NAMESPACE).items():
        (shim / rel).parent.mkdir(parents=True, exist_ok=True)
        (shim / rel).write_text(text)
    plan = fallback_chain(spec_of(kernel), toolchain_here("9.0", ("kernelbench-head-test",)),
                          {"full": str(work / "unused"), "tiny": str(shim)})[0]
    assert plan.headers == "tiny"
    tu = work / kernel.stem
    tu.mkdir()
    for name, text in plan.files.items():
        (tu / name).write_text(text)
    return subprocess.run(list(plan.compile_steps[0].argv), cwd=tu, capture_output=True, text=True, timeout=300)


def _nvcc() -> str | None:
    from verifier.backends.cuda import nvcc_path

    return nvcc_path()


@pytest.mark.slow  # nvcc: about 4 s a kernel
@pytest.mark.skipif(_nvcc() is None, reason="no nvcc on this machine")
def test_every_cuda_kernel_compiles_behind_the_tiny_tensor(tmp_path):
    failed = {}
    for kernel in CUDA_KERNELS:
        done = _nvcc_tiny(kernel, tmp_path)
        if done.returncode != 0:
            failed[kernel.name] = [ln for ln in (done.stdout + done.stderr).splitlines() if "error" in ln][:5]
    assert failed == {}, failed


@pytest.mark.slow
@pytest.mark.skipif(_nvcc() is None, reason="no nvcc on this machine")
def test_a_kernel_that_does_not_compile_is_caught(tmp_path):
    bad = tmp_path / "bad_rmsnorm.py"
    good = (ROOT / "tests" / "candidates" / "kernelbench_gpu" / "rmsnorm_head.py").read_text()
    bad.write_text(good.replace("sqrtf(ss / (float)features", "sqrtf(s_s / (float)features"))
    assert bad.read_text() != good
    done = _nvcc_tiny(bad, tmp_path)
    assert done.returncode != 0 and '"s_s" is undefined' in done.stdout + done.stderr
