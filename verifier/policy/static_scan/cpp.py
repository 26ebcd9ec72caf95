"""The rules over native code: the C++/CUDA sources a candidate embeds (string constants passed to
`load_inline`) and its linker flags. The text is read with comments and string literals blanked, so a
rule word inside a comment neither hides nor fakes a call."""

from __future__ import annotations

import ast
import re

from verifier.policy.static_scan.violation import Violation

CPP_ALLOWED = {
    "Tensor", "empty", "empty_like", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "empty_strided", "TensorOptions", "ScalarType", "Device", "DeviceType", "kFloat", "kFloat32", "kHalf",
    "kBFloat16", "kDouble", "kInt", "kLong", "kBool", "kCPU", "kCUDA", "IntArrayRef", "Scalar", "Half",
    "BFloat16", "MemoryFormat", "Layout", "kStrided", "dtype", "device", "TensorAccessor",
    "PackedTensorAccessor32", "PackedTensorAccessor64", "RestrictPtrTraits", "DefaultPtrTraits", "get_num_threads",
    "parallel_for", "cuda", "OptionalDeviceGuard", "DeviceGuard", "TensorArg", "checkDim", "opmath_type",
    "acc_type", "native", "detail", "vec", "Vectorized", "getCurrentCUDAStream", "CUDAStream", "Generator",
    "TORCH_CHECK", "IntList", "optional", "nullopt", "kInt32", "kInt64", "kFloat16", "kByte", "kChar",
    "MaybeOwned", "ArrayRef", "cuda::getCurrentCUDAStream", "scalar_type",
}
CPP_METHODS = {"matmul", "mm", "bmm", "addmm", "softmax", "log_softmax", "relu", "gelu", "sigmoid", "tanh",
               "sum", "mean", "amax", "amin", "var", "std", "norm", "layer_norm", "conv1d", "conv2d", "linear",
               "clamp", "clamp_min", "pow", "sqrt", "rsqrt", "exp", "log", "mul", "add", "sub", "div", "einsum",
               "max", "min", "argmax", "matmul_", "mul_", "add_", "copy_", "logsumexp", "baddbmm", "cumsum", "abs",
               "maximum", "minimum", "transpose", "permute", "t"}
CPP_LIBRARIES = re.compile(
    r"\b(cblas_\w+|sgemm_?|dgemm_?|mkl_\w+|dnnl\w*|mkldnn\w*|cublas\w*|cublasLt\w*|cudnn\w*|cutlass::\w+|cute::\w+|"
    r"openblas\w*|Eigen::\w+|at::native::\w+|at::cpu::\w+|at::cuda::blas\w*|at::_\w+)"
)
CPP_INCLUDES = re.compile(r"#\s*include\s*[<\"](cblas|mkl|dnnl|oneapi|cublas|cudnn|cutlass|cute|Eigen|openblas|"
                          r"ATen/native|ATen/ops|ATen/cpu|torch/torch\.h|thread|future|pthread|Python\.h)")
CPP_ESCAPE = re.compile(r"\b(std::thread|std::async|pthread_create|fork\s*\(|vfork\s*\(|system\s*\(|popen\s*\(|"
                        r"execv\w*\s*\(|dlopen\s*\(|dlsym\s*\(|PyRun_\w+|PyImport_\w+|PyEval_\w+|py::module|"
                        r"py::eval|py::exec|getenv\s*\(|std::getenv|fopen\s*\(|freopen\s*\(|std::[io]?fstream|"
                        r"\bifstream\b|\bofstream\b|\bopen\s*\(|\bmmap\s*\(|opendir\s*\(|std::filesystem|"
                        r"\bsyscall\s*\(|\bkill\s*\(|\bsignal\s*\(|\bsetenv\s*\()")
# pybind11 reaches any Python object from C++: `m.attr("__globals__")`, `module_::import("builtins")`,
# `py::eval`, `py::globals()`, `py::getattr(o, name)`, whatever the namespace alias (`namespace q = pybind11`)
CPP_PY_ESCAPE = re.compile(
    r"(::\s*(?:import|eval|exec|eval_file|globals|getattr|setattr|hasattr|delattr|builtins|module_?|dict|cpp_function|"
    r"reinterpret_borrow|reinterpret_steal)\b|\battr\s*\(\s*(?!\"[A-Za-z][A-Za-z0-9_]*\"\s*\))|"
    r"\bPy[A-Z]\w*_(?:GetAttr\w*|GetItem\w*|Call\w*|Import\w*|GetBuiltins|GetGlobals|GetLocals|GetFrame)\b|"
    r"\bPyEval_\w+|\bPyRun_\w+|\bPyImport_\w+|\bPyObject_\w+)")
CPP_PY_DUNDER = re.compile(r'"[^"\n]*__(?:globals|builtins|import|dict|class|subclasses|code|getattribute|getattr|'
                           r'loader|spec|self|func|closure|mro|bases|reduce|reduce_ex|main|frame|traceback)__')
CPP_GPU_STREAMS = re.compile(
    r"\b(cudaStreamCreate\w*|cudaStreamNonBlocking|cudaStreamPerThread|cudaStreamAddCallback|cudaLaunchHostFunc|"
    r"cudaEvent\w*|cuStreamCreate\w*|cuEvent\w*|getStreamFromPool|getStreamFromExternal|setCurrentCUDAStream|"
    r"CUDAStreamGuard|CUDAMultiStreamGuard|CUDAEvent)\b"
)
CPP_GPU_GRAPHS = re.compile(r"\b(cudaGraph\w*|cuGraph\w*|cudaStreamBeginCapture\w*|cudaStreamEndCapture|CUDAGraph)\b")
VENDOR_LDFLAGS = re.compile(r"^-l\s*(cublas\w*|cudnn\w*|cusparse\w*|cufft\w*|cusolver\w*|curand\w*|nvblas|mkl\w*|"
                            r"openblas|blas|cblas|dnnl|mkldnn)$")
TORCH_CUDA_STREAMS = ("torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.Event", "torch.cuda.set_stream",
                      "torch.cuda.ExternalStream", "torch.cuda.StreamContext", "torch.cuda._sleep", "torch.Stream",
                      "torch.Event", "torch.cuda.streams")
TORCH_CUDA_GRAPHS = ("torch.cuda.graph", "torch.cuda.CUDAGraph", "torch.cuda.make_graphed_callables")
CPP_OPS = re.compile(r"\b(?:torch|at)::((?:\w+::)*\w+)\s*\(")
CPP_METHOD_CALL = re.compile(r"[\w\)\]]\s*\.\s*(\w+)\s*\(")


def _embedded_sources(tree: ast.Module) -> list[tuple[int, str]]:
    """String constants that look like C/C++/CUDA code, with the line where each starts."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) > 30:
            text = node.value
            if any(tok in text for tok in ("{", "#include", "__global__", "torch::", "at::")):
                found.append((node.lineno, text))
    return found


def _cpp_line(base_line: int, text: str, pos: int) -> int:
    return base_line + text.count("\n", 0, pos)


_CPP_TOKENS = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|//[^\n]*|/\*.*?\*/', re.S)
CPP_LOCAL_INCLUDE = re.compile(r'#\s*include\s*(?:"|<\s*/|<[^>\n]*\.\.)')


def strip_cpp_comments(code: str) -> str:
    """Comments out, string literals kept (a "//" inside a string must not hide the rest of the line);
    newlines are preserved so line numbers still match."""

    def keep(m: re.Match) -> str:
        text = m.group(0)
        return text if text[0] in "\"'" else "\n" * text.count("\n")

    return _CPP_TOKENS.sub(keep, code)


CPP_ESCAPE_WORDS = re.compile(r"\b(system|popen|fork|vfork|execv\w*|execl\w*|execvp\w*|dlopen|dlsym|syscall|"
                              r"posix_spawn\w*|fopen|freopen|ifstream|ofstream|fstream|mmap|opendir|setenv|putenv)\b")


def _blank_strings(code: str) -> str:
    """String and character literals emptied (quotes kept): their text is data, not code."""
    return re.sub(r'"(?:\\.|[^"\\\n])*"', '""', re.sub(r"'(?:\\.|[^'\\\n])*'", "''", code))


def scan_cpp(base_line: int, code: str) -> list[Violation]:
    """Regex rules over embedded C++: torch/ATen operators, vendor libraries, escapes, local includes.

    Comments are stripped string-aware; identifiers are matched with string contents blanked, and
    dangerous calls are matched as bare names, so a `#define` cannot rename them out of sight.
    """
    clean = strip_cpp_comments(code)
    bare = _blank_strings(clean)
    out: list[Violation] = []

    def at(pos: int) -> int:
        return _cpp_line(base_line, clean, pos)

    for m in CPP_LOCAL_INCLUDE.finditer(clean):
        out.append(Violation("cpp-escape", at(m.start()), "only system headers may be included (#include <...>), not files by path"))
    for m in CPP_INCLUDES.finditer(clean):
        rule = "cpp-escape" if m.group(1) in {"thread", "future", "pthread", "Python.h"} else "cpp-library"
        out.append(Violation(rule, at(m.start()), f"#include of {m.group(1)} is not allowed"))
    for m in CPP_LIBRARIES.finditer(bare):
        out.append(Violation("cpp-library", at(m.start()), f"{m.group(1)} does the work in a vendor library"))
    for m in CPP_GPU_STREAMS.finditer(bare):
        out.append(Violation("gpu-stream", at(m.start()),
                             f"{m.group(1)}: launch on at::cuda::getCurrentCUDAStream(); own streams and events are not allowed"))
    for m in CPP_GPU_GRAPHS.finditer(bare):
        out.append(Violation("cuda-graph", at(m.start()), f"{m.group(1)}: CUDA graph replay can return captured outputs"))
    for m in CPP_ESCAPE.finditer(bare):
        out.append(Violation("cpp-escape", at(m.start()), f"{m.group(1).strip('( ')} is not allowed"))
    for m in CPP_PY_ESCAPE.finditer(bare):
        out.append(Violation("cpp-python-escape", at(m.start()),
                             f"{' '.join(m.group(0).split())} reaches Python objects from C++; the kernel may only "
                             "compute on the tensors it is given"))
    for m in CPP_PY_DUNDER.finditer(clean):
        out.append(Violation("cpp-python-escape", at(m.start()),
                             f"{m.group(0).strip(chr(34))!r} names a Python internal; not allowed in C++"))
    for m in CPP_ESCAPE_WORDS.finditer(bare):
        out.append(Violation("cpp-escape", at(m.start()), f"{m.group(1)} is not allowed in a kernel"))
    for m in CPP_OPS.finditer(bare):
        op = m.group(1)
        leaf = op.split("::")[-1]
        if op in CPP_ALLOWED or leaf in CPP_ALLOWED or op.split("::")[0] in {"cuda", "Tensor"}:
            continue
        out.append(Violation("cpp-torch-op", at(m.start()), f"{m.group(0).rstrip('( ')} is a torch operator; compute it in the kernel"))
    for m in CPP_METHOD_CALL.finditer(bare):
        if m.group(1) in CPP_METHODS:
            out.append(Violation("cpp-torch-op", at(m.start(1)),
                                 f".{m.group(1)}() on a tensor runs a torch operator; compute it in the kernel"))
    return out


def _vendor_ldflags(tree: ast.Module) -> list[Violation]:
    """Linker flags that pull in a vendor library (`-lcublas` in extra_ldflags)."""
    return [Violation("cpp-library", node.lineno, f"linking {node.value.strip()} brings in a vendor library")
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and VENDOR_LDFLAGS.match(node.value.strip())]
