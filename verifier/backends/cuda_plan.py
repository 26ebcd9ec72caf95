"""The split CUDA build, as pure functions: from a `load_inline` call and a toolchain description to
the files to write and the commands to run. Nothing here starts a compiler, so it is tested without one.

Torch's own `load_inline` compiles two heavy translation units on every change: `main.cpp` (the whole
torch C++ API and pybind11) and `cuda.cu` (`torch/types.h` through nvcc), 25-70 s cold. The split
layout, as the CPU backend does it (`verifier.build.split_build`):

* **kernel TU** `cuda.cu`: the person's `cuda_sources` behind the lightest torch headers that compile
  it (`fallback_chain`: the tiny Tensor of `verifier.build.tiny_tensor`, ~1.5 s of nvcc, then the light
  headers, ~16 s, then the full ATen shim; `#include <torch/extension.h>` resolves to each in
  turn), plus hidden entry points (`evk_fn<i>`, `evk_name<i>`) for the bound functions. Built by
  nvcc inside the candidate's sandbox: it is candidate-controlled and never leaves that job.
* **host TU** `main.cpp`, only when `cpp_sources` holds more than declarations: built by g++ with
  the same shim, in the sandbox.
* **bindings** `bind.o`: the pybind11 module keyed by the bound functions' *types* only (the CPU
  backend's `bind-v4` object, byte-for-byte the same artefact, which also holds the tiny Tensor's bridge). The sandbox never builds a shared
  one: it asks the trusted side with a `need` request (`kind="bind"`), exactly like the CPU backend,
  and only a copy in its own job directory is built locally when the trusted side refuses.
* **link**: g++ `-shared` over those objects (the bindings object's path put in by the executor) with
  torch's CUDA libraries and cudart; the module imports under the bindings' module name.

Anything the shim cannot serve (pybind11 or `py::` in the sources, a module of its own, a bound
function whose definition or types cannot be read) plans the `single` layout: torch's own
`load_inline`, as before. Line numbers stay the person's: `cuda.cu` and `main.cpp` carry exactly the
lines torch's layout prepends (3 and 1), so `map_cuda_diagnostics` maps both layouts alike.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from verifier.build.bindings import Signature, extract_declarations, signature_of
from verifier.build.split_build import KERNEL_TEXTS_KEY, TORCH_NAMESPACE
from verifier.keys import content_key as _key

# What torch's load_inline puts before the person's text (torch/types.h in the original; the shim here).
CUDA_PRELUDE = "#include <torch/extension.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n"
HOST_PRELUDE = "#include <torch/extension.h>\n"
COMMON_NVCC_FLAGS = ("-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
                     "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__",
                     "--expt-relaxed-constexpr")
TORCH_CUDA_LIBS = ("-lc10", "-lc10_cuda", "-ltorch_cpu", "-ltorch_cuda", "-ltorch", "-ltorch_python")
_SINGLE_MARKERS = ("py::", "pybind11", "PYBIND11_MODULE", "torch::autograd", "torch::nn", "torch::jit",
                   "torch/torch.h", "torch/python.h", "TORCH_LIBRARY")
# The light headers the kernel TU tries first (`light_shim_files`): the Tensor class, its options, the
# CUDA stream, TORCH_CHECK and the factory functions KernelBench kernels call, without ATen/ATen.h's
# ~2,000 operator headers. The factories are torch's own generated inline functions, copied out of its
# `ATen/ops/<op>.h` (whose includes pull in ATen/Context.h and most of ATen) at build time.
LIGHT_FACTORIES = ("empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full",
                   "full_like", "arange", "rand", "rand_like", "randn", "randn_like", "from_blob")
LIGHT_INCLUDES = ("ATen/core/Tensor.h", "c10/core/TensorOptions.h", "c10/util/Exception.h", "c10/cuda/CUDAStream.h",
                  "c10/cuda/CUDAException.h", "c10/cuda/CUDAGuard.h", "ATen/Dispatch.h")
# Headers the light directory answers for (it is searched before torch's): what kernels include out of habit.
LIGHT_SHADOWED = ("torch/extension.h", "torch/types.h", "ATen/ATen.h", "ATen/cuda/CUDAContext.h")
# Errors a lighter header can cause (a name or overload it does not declare): then the full shim is tried.
# Anything else (a syntax error, a type error in the person's own code) is reported from the light build.
_LIGHT_MISSES = re.compile(r"is undefined|has no member|was not declared|not declared in this scope|no instance of"
                           r"|no matching function|incomplete type|cannot open source file|No such file|"
                           r"is not a member|not a class or namespace|has not been declared|is not a template"
                           r"|no suitable|does not name a type|explicit type is missing|undefined reference|no operator")
BIND_OBJECT = "@bind.o@"  # replaced by the bindings object's path (before the libraries: --as-needed)
_HIDDEN = '__attribute__((visibility("hidden")))'
_DECL_ONLY = re.compile(r"^\s*(#\s*include\s*[<\"][^>\"]*[>\"]|#\s*pragma\s+once|[\w:<>,\s\*&]+\([^;{}]*\)\s*;)?\s*$")


@dataclass(frozen=True)
class Toolchain:
    """Where the compilers, headers and libraries are; `env_key` names the versions that make an object
    file incompatible (torch, CUDA, nvcc, the host compiler, Python)."""

    nvcc: str
    cxx: str
    arch: str
    torch_includes: tuple[str, ...]
    torch_libdirs: tuple[str, ...]
    cuda_include: str
    cuda_libdir: str
    env_key: tuple = ()
    std: str = "c++20"
    libs: tuple[str, ...] = (*TORCH_CUDA_LIBS, "-lcudart")

    def arch_flags(self, extra_cuda_cflags: list[str]) -> list[str]:
        """`-gencode` for this GPU (as torch does), unless the person named an architecture."""
        if any("arch" in f or "-gencode" in f for f in extra_cuda_cflags):
            return []
        flags = []
        for arch in self.arch.replace(",", ";").split(";"):
            arch = arch.strip()
            if not arch:
                continue
            ptx = arch.endswith("+PTX")
            num = arch.replace("+PTX", "").replace(".", "")
            flags.append(f"-gencode=arch=compute_{num},code=sm_{num}")
            if ptx:
                flags.append(f"-gencode=arch=compute_{num},code=compute_{num}")
        return flags


@dataclass(frozen=True)
class Step:
    """One command of the plan, run in the build directory; `output` is the file it must leave."""

    name: str
    argv: tuple[str, ...]
    output: str


@dataclass
class CudaPlan:
    """What to build for one `load_inline` call."""

    layout: str  # "split" or "single"
    key: str
    name: str
    reason: str = ""  # why the single layout
    headers: str = "full"  # the kernel TU's torch headers: "tiny", "light" (light_shim_files) or "full" (ATen shim)
    signatures: list[Signature] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # file name -> text, written before the steps
    compile_steps: list[Step] = field(default_factory=list)  # independent: run in parallel
    link: Step | None = None  # after the compile steps, with the bindings object appended

    def bind_request(self) -> dict:
        """The `need` request for the trusted side's bindings object (`verifier.build.shared_artefacts.build_shared`)."""
        return {"signatures": [[s.ret, list(s.params)] for s in self.signatures]}


def _as_list(x) -> list[str]:
    if x is None:
        return []
    return [x] if isinstance(x, str) else [str(v) for v in x]


def function_names(functions) -> list[str]:
    """`functions` as load_inline takes it: a name, a list of names, or a dict of name -> docstring."""
    if functions is None:
        return []
    if isinstance(functions, str):
        return [functions]
    if isinstance(functions, dict):
        return [str(k) for k in functions]
    return [str(f) for f in functions]


def normalise_spec(name, cpp_sources=None, cuda_sources=None, functions=None, extra_cflags=None,
                   extra_cuda_cflags=None, extra_ldflags=None, extra_include_paths=None, with_cuda=None) -> dict:
    """The arguments that decide what gets built, in one JSON-able form (the content key hashes it)."""
    return {"name": name, "cpp_sources": _as_list(cpp_sources), "cuda_sources": _as_list(cuda_sources),
            "functions": function_names(functions), "extra_cflags": _as_list(extra_cflags),
            "extra_cuda_cflags": _as_list(extra_cuda_cflags), "extra_ldflags": _as_list(extra_ldflags),
            "extra_include_paths": _as_list(extra_include_paths), "with_cuda": with_cuda}


def content_key(spec: dict, toolchain: Toolchain, layout: str) -> str:
    """Same sources, flags, toolchain, GPU architecture and verifier headers: same key (an unchanged kernel
    is a hit; `split_build.KERNEL_TEXTS_KEY`)."""
    return _key("cuda-v2", layout, spec, toolchain.env_key, toolchain.arch, toolchain.std, KERNEL_TEXTS_KEY,
                LIGHT_INCLUDES, LIGHT_SHADOWED)


def declarations_only(cpp_text: str) -> bool:
    """True when the C++ sources hold only includes and function declarations (KernelBench's usual
    `torch::Tensor f(torch::Tensor x);`): then no host TU is needed."""
    from verifier.build.bindings import _strip_comments

    return all(_DECL_ONLY.match(line) for line in _strip_comments(cpp_text).splitlines())


def find_signatures(cuda_text: str, cpp_text: str, functions: list[str]) -> tuple[list[Signature], list[str]] | None:
    """Each bound function's types, read from its definition, and which TU ("cuda" or "host") defines
    it; None when one cannot be read (then torch's own layout builds it)."""
    sigs, where = [], []
    for fn in functions:
        found = None
        for tu, text in (("cuda", cuda_text), ("host", cpp_text)):
            decls = extract_declarations(text, [fn]) if text else None
            sig = signature_of(decls[0], fn) if decls else None
            if sig is not None:
                found = (sig, tu)
                break
        if found is None:
            return None
        sigs.append(found[0])
        where.append(found[1])
    return sigs, where


def trampolines(entries: list[tuple[int, str, Signature]]) -> str:
    """Appended to the TU that defines the functions: a hidden pointer and name per bound function, read
    by the signature-keyed bindings (the same symbols as `verifier.build.bindings._trampolines`)."""
    lines = ["// EvoKernel: entry points for the signature-keyed Python bindings"]
    for i, fn, sig in entries:
        lines.append(f"{_HIDDEN} {sig.ret} (*evk_fn{i})({', '.join(sig.params)}) = &{fn};")
        lines.append(f'{_HIDDEN} const char* evk_name{i} = "{fn}";')
    return "\n".join(lines) + "\n"


def factory_text(op: str, header: str) -> str | None:
    """The inline functions of torch's generated `ATen/ops/<op>.h` behind an include of its light
    `<op>_ops.h` only (the declarations they call): None when the header is not in the expected form."""
    marker = f"#include <ATen/ops/{op}_ops.h>"
    start = header.find(marker)
    if start < 0 or "namespace at" not in header[start:]:
        return None
    body = header[start:]
    guard = re.search(r"\n#else\s*\n#error[^\n]*\n#endif[^\n]*\s*$", body)  # torch's TORCH_STABLE_ONLY guard
    if guard:
        body = body[:guard.start()]
    return body.rstrip() + "\n"


def light_shim_files(read) -> dict[str, str]:
    """The light header directory, from `read(relative_path) -> text | None` over torch's include dir:
    `torch/extension.h` and the other shadowed headers, relative path -> text."""
    factories = []
    for op in LIGHT_FACTORIES:
        text = read(f"ATen/ops/{op}.h")
        body = factory_text(op, text) if text else None
        if body is not None:
            factories.append(f"// from ATen/ops/{op}.h\n{body}")
    main = ("#pragma once\n// EvoKernel light CUDA shim: the Tensor class, the CUDA stream and the factory "
            "functions, without ATen/ATen.h.\n// A kernel that needs more is rebuilt behind the full shim.\n"
            + "".join(f"#include <{h}>\n" for h in LIGHT_INCLUDES)
            + "#include <cuda_runtime_api.h>\n#include <cmath>\n#include <vector>\n#include <algorithm>\n"
            + "\n".join(factories)
            + "\nnamespace at::cuda {\ncudaDeviceProp* getCurrentDeviceProperties();\n"
              "cudaDeviceProp* getDeviceProperties(c10::DeviceIndex device);\nint warp_size();\n}\n"
            + TORCH_NAMESPACE)
    out = {"torch/extension.h": main}
    for path in LIGHT_SHADOWED[1:]:
        out[path] = "#pragma once\n#include <torch/extension.h>\n"
    return out


def fallback_chain(spec: dict, toolchain: Toolchain, shim_dirs: dict[str, str]) -> list[CudaPlan]:
    """The plans a split build tries in order, lightest headers first: the tiny Tensor (only when the
    kernel TU is the only TU: a host TU compiled against real torch could not call into it), the light
    headers, the full ATen shim; just the one plan for the single layout. `shim_dirs` maps each header
    kind present to its directory ("full" is required)."""
    full = plan_cuda_build(spec, toolchain, shim_dirs["full"])
    if full.layout != "split":
        return [full]
    chain = []
    for kind in ("tiny", "light"):
        if kind in shim_dirs:
            plan = plan_cuda_build(spec, toolchain, shim_dirs[kind], headers=kind)
            if kind == "tiny" and any(step.name == "host" for step in plan.compile_steps):
                continue
            chain.append(plan)
    return [*chain, full]


def light_fallback(log: str) -> bool:
    """True when a failed light-header build may have failed for want of a declaration the full shim
    has (judged on the error lines only: nvcc echoes the person's source line after each)."""
    errors = [ln for ln in log.splitlines() if "error" in ln]
    return not errors or any(_LIGHT_MISSES.search(ln) for ln in errors)


def _includes(toolchain: Toolchain, shim_dir: str, user_includes: list[str], torch: bool = True) -> list[str]:
    """Include flags: the shim first; the tiny headers get no torch include path at all, so a torch header
    they do not answer for is not found (and the build falls back) instead of clashing with them."""
    flags = ["-I", shim_dir]
    for inc in user_includes:
        flags += ["-I", inc]
    for inc in (*(toolchain.torch_includes if torch else ()), toolchain.cuda_include):
        flags += ["-isystem", inc]
    return flags


def single_reason(spec: dict) -> str:
    """Why the split layout cannot serve this call ("" when it can)."""
    text = "\n".join(spec["cpp_sources"] + spec["cuda_sources"])
    if not spec["cuda_sources"]:
        return "no cuda_sources"
    if not spec["functions"]:
        return "no functions to bind"
    marker = next((m for m in _SINGLE_MARKERS if m in text), None)
    if marker:
        return f"the sources use {marker}"
    if spec.get("with_cuda") is False:
        return "with_cuda=False"
    return ""


def plan_cuda_build(spec: dict, toolchain: Toolchain, shim_dir: str, headers: str = "full") -> CudaPlan:
    """The build for one normalised `load_inline` call (`normalise_spec`). `shim_dir` holds the
    `torch/extension.h` the kernel TU sees: the ATen shim (verifier.build.split_build.SHIM_HEADER, `headers="full"`),
    the light one (`light_shim_files`, `headers="light"`) or the tiny Tensor (`verifier.build.tiny_tensor`,
    `headers="tiny"`, no torch include path). All plans share the content key and the person's line
    numbers."""
    name = spec["name"]
    reason = single_reason(spec)
    found = None
    if not reason:
        cuda_text = "\n".join(spec["cuda_sources"])
        cpp_text = "\n".join(spec["cpp_sources"])
        found = find_signatures(cuda_text, cpp_text, spec["functions"])
        if found is None:
            reason = "a bound function's definition or types could not be read"
    if reason or found is None:
        return CudaPlan("single", content_key(spec, toolchain, "single"), name, reason=reason)
    sigs, where = found
    key = content_key(spec, toolchain, "split")
    fns = spec["functions"]
    cuda_entries = [(i, fn, s) for i, (fn, s, w) in enumerate(zip(fns, sigs, where, strict=True)) if w == "cuda"]
    host_entries = [(i, fn, s) for i, (fn, s, w) in enumerate(zip(fns, sigs, where, strict=True)) if w == "host"]
    files = {"cuda.cu": CUDA_PRELUDE + cuda_text + "\n" + trampolines(cuda_entries)}
    includes = _includes(toolchain, shim_dir, spec["extra_include_paths"], torch=headers != "tiny")
    defines = ["-DTORCH_API_INCLUDE_EXTENSION_H", f"-DTORCH_EXTENSION_NAME={name}"]
    nvcc = [toolchain.nvcc, *toolchain.arch_flags(spec["extra_cuda_cflags"]), *includes, *defines,
            *COMMON_NVCC_FLAGS, "-Xcompiler", "-fPIC", *spec["extra_cuda_cflags"]]
    if not any(f.startswith("-std=") for f in spec["extra_cuda_cflags"]):
        nvcc.append(f"-std={toolchain.std}")
    steps = [Step("kernel", (*nvcc, "-c", "cuda.cu", "-o", "cuda.o"), "cuda.o")]
    objects = ["cuda.o"]
    if host_entries or not declarations_only(cpp_text):
        files["main.cpp"] = HOST_PRELUDE + cpp_text + "\n" + trampolines(host_entries)
        cxx = [toolchain.cxx, *includes, *defines, "-fPIC", f"-std={toolchain.std}", *spec["extra_cflags"]]
        steps.append(Step("host", (*cxx, "-c", "main.cpp", "-o", "main.o"), "main.o"))
        objects.append("main.o")
    ld = ["-shared"]
    for d in toolchain.torch_libdirs:
        ld += [f"-L{d}", f"-Wl,-rpath,{d}"]
    ld += [f"-L{toolchain.cuda_libdir}", *toolchain.libs, *spec["extra_ldflags"]]
    link = Step("link", (toolchain.cxx, *objects, BIND_OBJECT, *ld, "-o", f"{name}.so"), f"{name}.so")
    return CudaPlan("split", key, name, signatures=sigs, files=files, compile_steps=steps, link=link,
                    headers=headers)
