"""The split CUDA build plan, without a GPU or nvcc: which files and commands a `load_inline` call
becomes, what its content key depends on, when it falls back to torch's own layout, and that the
kernel TU's entry points match the bindings object the trusted side builds. One test runs the whole
split executor on the CPU, with a stand-in `nvcc` that compiles the `.cu` file as C++."""

from __future__ import annotations

import dataclasses
import re
import sys
import textwrap
import types
from pathlib import Path

import pytest

from tests.gpu.conftest import CANDIDATES
from verifier.backends.cuda_plan import (
    CUDA_PRELUDE,
    LIGHT_SHADOWED,
    Toolchain,
    declarations_only,
    factory_text,
    fallback_chain,
    light_fallback,
    light_shim_files,
    normalise_spec,
    plan_cuda_build,
)
from verifier.build.shared_artefacts import safe_type
from verifier.build.split_build import _shared_bindings

TOOLCHAIN = Toolchain(nvcc="/cuda/bin/nvcc", cxx="c++", arch="9.0", torch_includes=("/t/include", "/t/api"),
                      torch_libdirs=("/t/lib",), cuda_include="/cuda/include", cuda_libdir="/cuda/lib64",
                      env_key=("torch-x", "13.0"))


def load_inline_call(path: Path) -> dict:
    """The keyword arguments an honest candidate passes to load_inline (its module is run with a stub)."""
    from torch.utils import cpp_extension

    seen: dict = {}

    def stub(*args, **kwargs):
        seen.update(kwargs)
        return types.SimpleNamespace()

    original = cpp_extension.load_inline
    cpp_extension.load_inline = stub
    try:
        exec(compile(path.read_text(), str(path), "exec"), {"__name__": "plan_probe"})
    finally:
        cpp_extension.load_inline = original
    return seen


def spec_of(path: Path) -> dict:
    kw = load_inline_call(path)
    return normalise_spec(kw["name"], kw.get("cpp_sources"), kw.get("cuda_sources"), kw.get("functions"),
                          kw.get("extra_cflags"), kw.get("extra_cuda_cflags"), kw.get("extra_ldflags"),
                          kw.get("extra_include_paths"), kw.get("with_cuda"))


HONEST = sorted((CANDIDATES / "cuda").glob("*.py"))


@pytest.mark.parametrize("path", HONEST, ids=lambda p: p.stem)
def test_honest_kernels_get_the_split_layout(path):
    spec = spec_of(path)
    plan = plan_cuda_build(spec, TOOLCHAIN, "/job/build/shim")
    assert plan.layout == "split", plan.reason
    kernel = plan.compile_steps[0]
    assert kernel.argv[0] == "/cuda/bin/nvcc" and kernel.argv[-4:] == ("-c", "cuda.cu", "-o", "cuda.o")
    assert "-gencode=arch=compute_90,code=sm_90" in kernel.argv
    argv = list(kernel.argv)
    # the shim's torch/extension.h must win over torch's own: -I is searched before -isystem
    assert argv.index("/job/build/shim") < argv.index("/t/include")
    assert [s.name for s in plan.compile_steps] == ["kernel"], "declaration-only cpp_sources need no host TU"
    assert plan.link.argv[0] == "c++" and "-shared" in plan.link.argv and "-lcudart" in plan.link.argv
    assert plan.link.argv[-2:] == ("-o", f"{spec['name']}.so")
    # the person's CUDA text starts on line 4, as in torch's cuda.cu: compiler lines map back alike
    cu = plan.files["cuda.cu"].splitlines()
    person = "\n".join(spec["cuda_sources"]).splitlines()
    assert CUDA_PRELUDE.count("\n") == 3 and cu[3:3 + len(person)] == person
    for i, fn in enumerate(spec["functions"]):
        assert f"(*evk_fn{i})" in plan.files["cuda.cu"] and f'evk_name{i} = "{fn}"' in plan.files["cuda.cu"]
    assert all(safe_type(s.ret) and all(safe_type(p) for p in s.params) for s in plan.signatures), \
        "the trusted side must accept the bindings request"


def test_entry_points_match_the_trusted_bindings_object():
    """The extern declarations in the bindings TU (verifier.build.split_build) must name exactly the pointer types the
    kernel TU defines, or the link fails (or worse, calls through the wrong type)."""
    plan = plan_cuda_build(spec_of(CANDIDATES / "cuda" / "layernorm.py"), TOOLCHAIN, "/s")
    bind = _shared_bindings("evk_bind_x", plan.signatures)
    for line in plan.files["cuda.cu"].splitlines():
        m = re.match(r"(__attribute__.*\(\*evk_fn\d+\)\(.*\)) = &\w+;", line)
        if m:
            assert f"extern {m.group(1)};" in bind, (m.group(1), bind)


def test_content_key_and_bindings_request():
    spec = spec_of(CANDIDATES / "cuda" / "relu.py")
    plan = plan_cuda_build(spec, TOOLCHAIN, "/s")
    assert plan_cuda_build(dict(spec), TOOLCHAIN, "/s").key == plan.key, "unchanged source: same key (a hit)"
    changed = {**spec, "cuda_sources": [spec["cuda_sources"][0].replace("256", "128")]}
    other = plan_cuda_build(changed, TOOLCHAIN, "/s")
    assert other.key != plan.key and other.bind_request() == plan.bind_request(), \
        "a changed kernel is rebuilt but reuses the bindings (same function types)"
    renamed = {**spec, "name": "evk_other", "functions": ["relu_forward2"],
               "cuda_sources": [spec["cuda_sources"][0].replace("relu_forward(", "relu_forward2(")]}
    assert plan_cuda_build(renamed, TOOLCHAIN, "/s").bind_request() == plan.bind_request()
    assert plan.bind_request() == {"signatures": [["torch::Tensor", ["torch::Tensor"]]]}
    h100 = dataclasses.replace(TOOLCHAIN, arch="9.0")
    a100 = dataclasses.replace(TOOLCHAIN, arch="8.0")
    assert plan_cuda_build(spec, a100, "/s").key != plan_cuda_build(spec, h100, "/s").key
    assert plan_cuda_build({**spec, "extra_cuda_cflags": ["-O2"]}, TOOLCHAIN, "/s").key != plan.key


def test_person_named_architecture_is_kept():
    spec = spec_of(CANDIDATES / "cuda" / "relu.py")
    spec["extra_cuda_cflags"] = ["-O3", "-arch=sm_90a"]
    argv = plan_cuda_build(spec, TOOLCHAIN, "/s").compile_steps[0].argv
    assert not any(a.startswith("-gencode") for a in argv) and "-arch=sm_90a" in argv
    ptx = dataclasses.replace(TOOLCHAIN, arch="9.0+PTX")
    argv = plan_cuda_build(spec_of(CANDIDATES / "cuda" / "relu.py"), ptx, "/s").compile_steps[0].argv
    assert "-gencode=arch=compute_90,code=compute_90" in argv


@pytest.mark.parametrize(("change", "why"), [
    (lambda s: {**s, "cuda_sources": [s["cuda_sources"][0] + "\nPYBIND11_MODULE(x, m) {}\n"]}, "PYBIND11_MODULE"),
    (lambda s: {**s, "cpp_sources": [s["cpp_sources"][0] + "\nnamespace py = pybind11;\n"]}, "pybind11"),
    (lambda s: {**s, "cuda_sources": []}, "no cuda_sources"),
    (lambda s: {**s, "functions": []}, "no functions"),
    (lambda s: {**s, "functions": ["not_defined_anywhere"]}, "could not be read"),
])
def test_what_the_shim_cannot_serve_uses_torchs_layout(change, why):
    spec = change(spec_of(CANDIDATES / "cuda" / "relu.py"))
    plan = plan_cuda_build(spec, TOOLCHAIN, "/s")
    assert plan.layout == "single" and why in plan.reason and not plan.compile_steps


def test_definitions_in_cpp_sources_get_a_host_tu():
    cuda = "__global__ void k(float* y) {}\nvoid launch(float* y, int64_t n) { k<<<1, 1>>>(y); }\n"
    cpp = "void launch(float* y, int64_t n);\ntorch::Tensor fwd(torch::Tensor x) {\n  launch(x.data_ptr<float>(), x.numel());\n  return x;\n}\n"
    plan = plan_cuda_build(normalise_spec("evk_h", cpp, cuda, ["fwd"]), TOOLCHAIN, "/s")
    assert plan.layout == "split" and [s.name for s in plan.compile_steps] == ["kernel", "host"]
    assert plan.files["main.cpp"].startswith("#include <torch/extension.h>\n" + cpp)
    assert '(*evk_fn0)(torch::Tensor) = &fwd;' in plan.files["main.cpp"]
    assert "evk_fn0" not in plan.files["cuda.cu"]
    assert plan.link.argv[1:4] == ("cuda.o", "main.o", "@bind.o@"), "objects before the libraries (--as-needed)"


def test_declarations_only():
    assert declarations_only("#include <torch/extension.h>\n// doc\ntorch::Tensor f(torch::Tensor x);\n\n")
    assert declarations_only("std::vector<torch::Tensor> g(torch::Tensor a, int64_t n);")
    assert not declarations_only("torch::Tensor f(torch::Tensor x) { return x; }")
    assert not declarations_only("static int counter = 0;")


FAKE_NVCC = """#!{python}
# Stand-in for nvcc on a machine without CUDA: the same command, compiled by g++ as C++.
import subprocess, sys
out = []
for a in sys.argv[1:]:
    if a.startswith(("-gencode", "--expt")) or a.startswith("-D__CUDA_NO"):
        continue
    if a == "-Xcompiler":
        continue
    out.append(a)
sys.exit(subprocess.call(["c++", "-x", "c++", "-I", {fake_include!r}, *out]))
"""


def fake_toolchain(tmp_path: Path) -> Toolchain:
    """A CUDA toolchain on a machine without CUDA: the stand-in nvcc, empty CUDA headers (with the one
    type the light shim names), the CPU torch's headers and libraries."""
    from verifier.build.split_build import _torch_paths

    fake_include = tmp_path / "fake-cuda-include"
    fake_include.mkdir()
    (fake_include / "cuda.h").write_text("#pragma once\n")
    (fake_include / "cuda_runtime.h").write_text("#pragma once\n")
    (fake_include / "cuda_runtime_api.h").write_text(
        "#pragma once\nstruct cudaDeviceProp { int major; };\ntypedef struct CUstream_st* cudaStream_t;\n"
        "typedef int cudaError_t;\nenum { cudaSuccess = 0 };\n"
        "inline cudaError_t cudaGetLastError() { return 0; }\n"
        "inline const char* cudaGetErrorString(cudaError_t) { return \"no error\"; }\n")
    nvcc = tmp_path / "nvcc"
    nvcc.write_text(FAKE_NVCC.format(python=sys.executable, fake_include=str(fake_include)))
    nvcc.chmod(0o755)
    includes, libdirs = _torch_paths()
    return Toolchain(nvcc=str(nvcc), cxx="c++", arch="9.0", torch_includes=tuple(includes),
                     torch_libdirs=tuple(libdirs), cuda_include=str(fake_include), cuda_libdir=libdirs[0],
                     env_key=("cpu-test",), libs=("-lc10", "-ltorch_cpu", "-ltorch", "-ltorch_python"))


def cpu_cuda_builder(tmp_path: Path, shared_build_root: Path):
    """A CudaBuilder on the CPU (the stand-in nvcc) whose shared artefacts the trusted side builds on request."""
    from verifier.backends.cuda import CudaBuilder

    shared = shared_build_root / "shared"

    def trusted_side(kind, spec, wait=True):
        from verifier.build.shared_artefacts import build_shared

        if wait != "only":
            assert build_shared(shared, kind, spec)

    return CudaBuilder(tmp_path / "job", timeout_s=300, shared=shared, request=trusted_side,
                       toolchain=fake_toolchain(tmp_path))


@pytest.mark.slow
def test_split_executor_builds_links_and_imports_on_the_cpu(tmp_path, shared_build_root, monkeypatch):
    """The executor end to end: nvcc (a stand-in) and the bindings in parallel, the trusted copy of the
    bindings used when it exists, the link, the import under the bindings' module, the record's steps;
    a second call is a content-cache hit; an error in the kernel TU maps to the person's line."""
    import torch

    from verifier.backends.cuda import CudaBuilder
    from verifier.build.split_build import BuildError

    monkeypatch.delenv("CXX", raising=False)  # as in the sandbox: the job's `c++`, not a machine-wide CXX
    chain = fake_toolchain(tmp_path)
    cuda = textwrap.dedent("""
        #include <torch/extension.h>
        torch::Tensor twice(torch::Tensor x) {
            auto y = torch::empty_like(x);
            const float* a = x.data_ptr<float>();
            float* b = y.data_ptr<float>();
            for (int64_t i = 0; i < x.numel(); ++i) b[i] = 2.0f * a[i];
            return y;
        }
        """)
    shared = shared_build_root / "shared"
    requests = []

    def trusted_side(kind, spec, wait=True):  # what api._Run._serve_request does for a `need` mark
        from verifier.build.shared_artefacts import build_shared

        if wait == "only":
            return
        requests.append((kind, spec))
        assert build_shared(shared, kind, spec)

    builder = CudaBuilder(tmp_path / "job", timeout_s=300, shared=shared, request=trusted_side, toolchain=chain,
                          light_headers=False)
    mod = builder.load_inline("evk_twice", "torch::Tensor twice(torch::Tensor x);", cuda, functions=["twice"])
    x = torch.arange(6, dtype=torch.float32)
    assert torch.equal(mod.twice(x), 2 * x)
    rec = builder.records[-1]
    assert rec.layout == "split" and not rec.cache_hit
    assert [s.split()[0] for s in rec.steps] == ["kernel", "bindings", "link"], rec.steps
    assert rec.steps[1].startswith("bindings shared"), "the trusted copy of the bindings is linked"
    assert requests in ([], [("bind", {"signatures": [["torch::Tensor", ["torch::Tensor"]]]})])
    again = builder.load_inline("evk_twice", "torch::Tensor twice(torch::Tensor x);", cuda, functions=["twice"])
    assert builder.records[-1].cache_hit and torch.equal(again.twice(x), 2 * x)
    bad = cuda.replace("return y;", "return undefined_thing;")
    with pytest.raises(BuildError) as exc:
        builder.load_inline("evk_twice_bad", "torch::Tensor twice(torch::Tensor x);", bad, functions=["twice"])
    line = bad.splitlines().index("    return undefined_thing;") + 1
    assert any(d.startswith(f"cuda_sources:{line}: error:") for d in exc.value.diagnostics), exc.value.diagnostics


def test_only_error_lines_decide_the_fallback_to_torchs_layout():
    from verifier.backends.cuda import _shim_insufficient

    own = ('cuda.cu(10): error: identifier "undefined_thing" is undefined\n'
           "      auto y = torch::empty_like(xc); undefined_thing;\n")
    assert not _shim_insufficient(own), "the person's own error, on a line that mentions torch::"
    assert _shim_insufficient('cuda.cu(12): error: namespace "torch" has no member "nn"')
    assert _shim_insufficient('cuda.cu(12): error: namespace "at" has no member "native"')
    assert _shim_insufficient("main.cpp:3:5: error: \u2018py\u2019 has not been declared; py::object")


def _torch_header(rel: str):
    from verifier.build.split_build import _torch_paths

    for inc in _torch_paths()[0]:
        if Path(inc, rel).is_file():
            return Path(inc, rel).read_text()
    return None


def test_light_shim_copies_torchs_own_factories_without_their_heavy_includes():
    files = light_shim_files(_torch_header)
    assert set(files) == set(LIGHT_SHADOWED)
    main = files["torch/extension.h"]
    for op in ("empty", "empty_like", "zeros", "zeros_like", "ones", "full"):
        assert f"#include <ATen/ops/{op}_ops.h>" in main, op
        assert re.search(rf"inline at::Tensor {op}\(", main), op
    assert "#include <ATen/ATen.h>" not in main and "#include <ATen/Context.h>" not in main
    assert "#error" not in main, "torch's TORCH_STABLE_ONLY guard is cut, not copied half"
    assert "c10/cuda/CUDAStream.h" in main, "at::cuda::getCurrentCUDAStream"
    assert "namespace torch {" in main and "constexpr auto kFloat32 = at::kFloat;" in main
    for rel in LIGHT_SHADOWED[1:]:
        assert files[rel] == "#pragma once\n#include <torch/extension.h>\n"


def test_factory_text_takes_the_inline_functions_only():
    header = ("#if !defined(TORCH_STABLE_ONLY)\n#pragma once\n#include <ATen/Context.h>\n\n"
              "#include <ATen/ops/foo_ops.h>\n\nnamespace at {\ninline at::Tensor foo(int x) { return {}; }\n}\n\n"
              "#else\n#error \"This file should not be included\"\n#endif  // guard\n")
    body = factory_text("foo", header)
    assert body.startswith("#include <ATen/ops/foo_ops.h>") and "inline at::Tensor foo" in body
    assert "#error" not in body and "#else" not in body and "Context.h" not in body
    assert factory_text("foo", header.replace("#else\n#error \"This file should not be included\"\n#endif  // guard\n", "")) \
        .rstrip().endswith("}")
    assert factory_text("bar", header) is None, "a header not in the expected form is left out"
    missing = light_shim_files(lambda rel: None)["torch/extension.h"]
    assert "ATen/ops/" not in missing and "ATen/core/Tensor.h" in missing


@pytest.mark.parametrize(("log", "fallback"), [
    ('cuda.cu(12): error: identifier "AT_DISPATCH_FLOATING_TYPES" is undefined', True),
    ('cuda.cu(9): error: namespace "at" has no member "relu"', True),
    ("cuda.cu:9:5: error: 'relu' is not a member of 'torch'", True),
    ("main.cpp:4:3: error: 'thing' was not declared in this scope", True),
    ('cuda.cu(3): fatal error: cannot open source file "ATen/native/cuda/Loops.cuh"', True),
    ('cuda.cu(14): error: no instance of overloaded function "torch::zeros" matches the argument list', True),
    ("", True),
    ('cuda.cu(10): error: expected a ";"\n      return y\n', False),
    ('cuda.cu(11): error: a value of type "float *" cannot be used to initialize an entity of type "int *"', False),
    ("cuda.cu:9:5: error: expected ';' before 'return'", False),
])
def test_which_light_header_failures_retry_behind_the_full_shim(log, fallback):
    """A light-header build that failed for want of a name retries behind the full shim; the person's
    own syntax and type errors come straight back (the full shim would only repeat them, slower)."""
    assert light_fallback(log) is fallback


def test_the_light_plan_differs_only_in_its_header_directory():
    spec = spec_of(CANDIDATES / "cuda" / "relu.py")
    full = plan_cuda_build(spec, TOOLCHAIN, "/job/shim")
    light = plan_cuda_build(spec, TOOLCHAIN, "/job/shim-light", headers="light")
    assert (light.headers, full.headers) == ("light", "full")
    assert light.key == full.key and light.files == full.files and light.link == full.link
    argv = list(light.compile_steps[0].argv)
    assert argv.index("/job/shim-light") < argv.index("/t/include") and "/job/shim" not in argv
    assert [a for a in argv if a != "/job/shim-light"] == [a for a in full.compile_steps[0].argv if a != "/job/shim"]


def test_the_tiny_plan_comes_first_sees_no_torch_headers_and_needs_a_single_tu():
    spec = spec_of(CANDIDATES / "cuda" / "relu.py")
    dirs = {"full": "/job/shim", "light": "/job/shim-light", "tiny": "/job/shim-tiny"}
    chain = fallback_chain(spec, TOOLCHAIN, dirs)
    assert [p.headers for p in chain] == ["tiny", "light", "full"]
    tiny, light = chain[0], chain[1]
    assert tiny.key == light.key and tiny.files == light.files and tiny.link == light.link
    argv = list(tiny.compile_steps[0].argv)
    assert "/job/shim-tiny" in argv and "/cuda/include" in argv
    assert not {"/t/include", "/t/api"} & set(argv), "no torch include path: an unanswered torch header is not found"
    assert [p.headers for p in fallback_chain(spec, TOOLCHAIN, {"full": "/job/shim"})] == ["full"]
    with_host = dict(spec, cpp_sources=["torch::Tensor relu(torch::Tensor x) { return relu_cuda(x); }"],
                     cuda_sources=[spec["cuda_sources"][0] + "\ntorch::Tensor relu_cuda(torch::Tensor x);"],
                     functions=["relu"])
    assert [p.headers for p in fallback_chain(with_host, TOOLCHAIN, dirs)] == ["light", "full"], \
        "a host TU built against real torch cannot call into the tiny Tensor's TU"


@pytest.mark.slow
def test_tiny_tensor_behaves_like_torchs_across_the_bindings(tmp_path, shared_build_root):
    """The tiny Tensor (no torch header in the kernel TU) through the real signature-keyed bindings: values,
    views, factories, options, dispatch, errors as RuntimeError with torch's wording, reference counts
    (a leak or a double release would show in use counts or crash the loop)."""
    import torch


    builder = cpu_cuda_builder(tmp_path, shared_build_root)
    cuda = textwrap.dedent("""
        #include <torch/extension.h>
        #include <ATen/cuda/CUDAContext.h>
        torch::Tensor scale(const torch::Tensor& x, double k) {
            TORCH_CHECK(x.dim() >= 1, "scale needs at least one dimension, got ", x.dim());
            auto xc = x.contiguous();
            auto y = torch::empty_like(xc);
            AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "scale", ([&] {
                const scalar_t* a = xc.data_ptr<scalar_t>();
                scalar_t* b = y.data_ptr<scalar_t>();
                for (int64_t i = 0; i < xc.numel(); ++i) b[i] = static_cast<scalar_t>(k) * a[i];
            }));
            return y;
        }
        std::vector<torch::Tensor> shapes(torch::Tensor x, int64_t rows) {
            auto z = torch::zeros({rows, x.size(-1)}, x.options().dtype(torch::kFloat64));
            auto f = at::full({2}, 3.5, torch::dtype(torch::kFloat32));
            auto o = torch::ones_like(x, torch::kInt32);
            torch::Tensor flat = x.view({-1});
            torch::Tensor moved = std::move(flat);
            std::vector<int64_t> dims = x.sizes().vec();
            auto info = torch::empty({6}, torch::TensorOptions().dtype(torch::kInt64));
            int64_t* p = info.data_ptr<int64_t>();
            p[0] = static_cast<int64_t>(dims.size()); p[1] = x.stride(0); p[2] = x.element_size();
            p[3] = x.is_contiguous(); p[4] = x.is_cuda(); p[5] = x.numel();
            return {z, f, o, moved, x.reshape({x.numel()}), info};
        }
        int64_t first_long(torch::Tensor x) { return x.data_ptr<int64_t>()[0]; }
        """)
    decl = "torch::Tensor scale(const torch::Tensor& x, double k);\n" \
           "std::vector<torch::Tensor> shapes(torch::Tensor x, int64_t rows);\nint64_t first_long(torch::Tensor x);"
    mod = builder.load_inline("evk_tiny", decl, cuda, functions=["scale", "shapes", "first_long"])
    steps = builder.records[-1].steps
    assert steps[0].startswith("kernel (tiny headers)") and not any("failed" in s for s in steps), steps
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    assert torch.equal(mod.scale(x.t(), 2.0), 2 * x.t().contiguous())
    assert torch.equal(mod.scale(x.double(), 0.5), 0.5 * x.double())
    z, f, o, flat, flat2, info = mod.shapes(x, 4)
    assert z.shape == (4, 3) and z.dtype == torch.float64 and not z.any()
    assert torch.equal(f, torch.full((2,), 3.5)) and o.dtype == torch.int32 and torch.equal(o, torch.ones(2, 3, dtype=torch.int32))
    assert torch.equal(flat, x.view(-1)) and flat.data_ptr() == x.data_ptr(), "view shares the storage"
    assert torch.equal(flat2, x.reshape(-1)) and info.tolist() == [2, 3, 4, 1, 0, 6]
    with pytest.raises(RuntimeError, match="scale needs at least one dimension, got 0"):
        mod.scale(torch.tensor(1.0), 1.0)
    assert mod.first_long(torch.tensor([7, 8])) == 7
    with pytest.raises(RuntimeError, match="expected scalar type Long but found Float"):
        mod.first_long(x)
    with pytest.raises(RuntimeError, match="\"scale\" not implemented for 'Int'"):
        mod.scale(torch.ones(3, dtype=torch.int32), 1.0)
    del z, f, o, flat, flat2, info
    assert x._use_count() == 1, "every handle the kernel TU took is released"
    for _ in range(2000):
        mod.scale(x, 1.0)
        mod.shapes(x, 2)
    assert x._use_count() == 1


@pytest.mark.slow
def test_tiny_then_light_headers_then_the_full_shim_then_the_persons_error(tmp_path, shared_build_root, monkeypatch):
    """The executor with the light headers on the CPU (the stand-in nvcc; the c10/cuda headers, which a
    CPU torch lacks, left out): a kernel that needs only the tiny Tensor builds behind it; one that calls a
    Tensor method it lacks is rebuilt behind the light headers; one that calls an operator neither
    declares, behind the full shim; a syntax error comes from the first build, at the person's line,
    without a second build."""
    import torch

    from verifier.backends import cuda_plan
    from verifier.backends.cuda import CudaBuilder
    from verifier.build.split_build import BuildError

    monkeypatch.setattr(cuda_plan, "LIGHT_INCLUDES", tuple(h for h in cuda_plan.LIGHT_INCLUDES if "c10/cuda" not in h))
    builder = cpu_cuda_builder(tmp_path, shared_build_root)
    decl = "torch::Tensor twice(torch::Tensor x);"
    light_ok = textwrap.dedent("""
        #include <torch/extension.h>
        #include <ATen/cuda/CUDAContext.h>
        torch::Tensor twice(torch::Tensor x) {
            TORCH_CHECK(x.scalar_type() == torch::kFloat32, "float32 only");
            auto xc = x.contiguous();
            auto y = torch::empty_like(xc);
            auto z = torch::zeros({xc.size(0)}, xc.options());
            const float* a = xc.data_ptr<float>();
            float* b = y.data_ptr<float>();
            for (int64_t i = 0; i < xc.numel(); ++i) b[i] = 2.0f * a[i] + z.data_ptr<float>()[0];
            return y;
        }
        """)
    x = torch.arange(6, dtype=torch.float32)
    mod = builder.load_inline("evk_light", decl, light_ok, functions=["twice"])
    assert torch.equal(mod.twice(x), 2 * x)
    steps = builder.records[-1].steps
    assert steps[0].startswith("kernel (tiny headers)") and not any("failed" in s for s in steps), steps
    assert (tmp_path / "job" / "shim-light" / "ATen" / "cuda" / "CUDAContext.h").exists()

    # a Tensor method the tiny Tensor lacks: rebuilt behind the light headers, which declare every method
    tensor_method = light_ok.replace("return y;", "return y.abs();")  # x >= 0 here
    mod = builder.load_inline("evk_light_mul", decl, tensor_method, functions=["twice"])
    assert torch.equal(mod.twice(x), 2 * x)
    steps = builder.records[-1].steps
    assert steps[0].startswith("tiny headers failed") and steps[0].endswith("light headers"), steps
    assert steps[1].startswith("kernel (light headers)"), steps

    # (without CUDAContext.h: torch's own one, which the full shim leaves in place, needs the CUDA libraries' headers)
    needs_aten = light_ok.replace("return y;", "return torch::relu(y);").replace("#include <ATen/cuda/CUDAContext.h>\n", "")
    mod = builder.load_inline("evk_light_relu", decl, needs_aten, functions=["twice"])
    assert torch.equal(mod.twice(-x), torch.zeros_like(x))
    steps = builder.records[-1].steps
    assert steps[0].startswith("tiny headers failed") and steps[1].startswith("light headers failed"), steps
    assert steps[1].endswith("full headers") and steps[2].startswith("kernel (full headers)"), steps

    tried = []
    compile_ = CudaBuilder._compile

    def spy(self, plan, *args):
        tried.append(plan.headers)
        return compile_(self, plan, *args)

    monkeypatch.setattr(CudaBuilder, "_compile", spy)
    syntax = light_ok.replace("return y;", "return y")
    with pytest.raises(BuildError) as exc:
        builder.load_inline("evk_light_bad", decl, syntax, functions=["twice"])
    line = syntax.splitlines().index("    return y") + 1
    assert any(d.startswith(f"cuda_sources:{line + 1}: error:") or d.startswith(f"cuda_sources:{line}: error:")
               for d in exc.value.diagnostics), exc.value.diagnostics
    assert tried == ["tiny"], "reported from the first build, without a second one"
