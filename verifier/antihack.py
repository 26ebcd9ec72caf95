"""Static anti-hacking rules: read the candidate's Python AST and its embedded C++ without running it.

Every rule names itself and the line, so a person (or the model's next prompt) knows what to remove.
Dynamic checks (profiler, tripwires, clocks, threads) run in the sandbox; see `verifier.harness`.
"""

from __future__ import annotations

import ast
import re
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Violation:
    rule: str
    line: int
    message: str

    def to_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        return f"line {self.line}: [{self.rule}] {self.message}"


RULES = {
    "syntax": "the candidate is not valid Python",
    "no-modelnew": "the candidate must define class ModelNew(nn.Module)",
    "torch-op": "a torch operator does the work instead of the custom kernel",
    "indirection": "dynamic code (exec/eval/importlib/getattr/base64) can hide torch calls",
    "reference-model": "the reference Model must not be imported or instantiated",
    "try-fallback": "try/except can fall back to torch when the kernel fails",
    "compiler-standin": "a compiler or another library stands in for the kernel",
    "output-cache": "state kept across forward calls can replay cached outputs",
    "monkey-patch": "patching torch, comparison functions or clocks",
    "introspection": "reading other objects through gc, frames or sys.modules",
    "concurrency": "threads or processes can finish the work after forward returns",
    "cpp-torch-op": "the C++ code calls a torch/ATen operator instead of computing",
    "cpp-library": "the C++ code calls a vendor library (BLAS, oneDNN, cuBLAS, cuDNN) for the work",
    "os-escape": "os functions other than os.environ and os.path can touch files and processes",
    "tensor-arithmetic": "arithmetic on tensors in forward runs torch operators instead of the kernel",
    "torch-work-outside-kernel": "torch operators around the custom kernel do most of the work",
    "custom-kernel-skipped": "the custom kernel did not run on some forward call; every forward must call it",
    "decoy-kernel": "the custom kernel's result does not reach the output (it runs beside torch and is thrown away)",
    "cpp-escape": "the C++ code starts threads or processes, runs Python or touches files",
    "gpu-stream": "side streams and events let GPU work run outside the timed stream",
    "cuda-graph": "CUDA graph replay can return outputs captured earlier",
    "unsynchronised-work": "the output was not ready on the current stream when forward returned",
    "vendor-kernel": "a vendor library kernel (cuBLAS, cuDNN) ran in place of the custom kernel",
    "forward-outside-class": "forward must be defined with def inside class ModelNew, not bound from elsewhere",
    "tensor-subclass": "outputs must be plain tensors: Tensor subclasses and __torch_function__ can run code later",
    "job-tamper": "the candidate changed the job directory while the verifier handed it inputs",
    "deserialization": "unpickling or mapping files (torch.load, pickle, marshal, np.load, from_file) runs code "
                       "or brings in data the verifier did not hand over",
    "cpp-python-escape": "the C++ code reaches Python internals (__globals__, __builtins__, imports, eval) "
                         "through pybind11",
}

# torch attributes a kernel wrapper legitimately needs: allocation, metadata, dtypes, building.
ALLOWED_TORCH = {
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "tensor", "as_tensor", "from_numpy", "arange", "manual_seed", "no_grad", "inference_mode", "device", "dtype",
    "Size", "Tensor", "is_tensor", "is_floating_point", "get_default_dtype", "float32", "float16", "bfloat16",
    "float64", "float", "half", "double", "int8", "uint8", "int16", "int32", "int64", "long", "int", "bool",
    "contiguous_format", "channels_last", "preserve_format", "finfo", "iinfo", "set_grad_enabled",
    "get_num_threads", "set_num_threads", "strided", "cdiv",
}
ALLOWED_TORCH_PREFIXES = (
    "torch.nn.Module", "torch.nn.Parameter", "torch.nn.init", "torch.nn.ParameterList", "torch.nn.ModuleList",
    "torch.utils.cpp_extension", "torch.cuda.is_available", "torch.cuda.current_device", "torch.cuda.device",
    "torch.cuda.get_device", "torch.cuda.synchronize", "torch.backends.cpu", "torch.version", "torch.Size",
)
# nn layers may hold parameters (built in __init__) but calling them runs torch's kernel.
NN_LAYER_PREFIX = "torch.nn."

COMPUTE_METHODS = {
    "matmul", "mm", "bmm", "addmm", "baddbmm", "mv", "dot", "einsum", "softmax", "log_softmax", "relu", "relu_",
    "gelu", "silu", "sigmoid", "tanh", "exp", "log", "sum", "mean", "max", "min", "amax", "amin", "argmax",
    "argmin", "var", "std", "norm", "layer_norm", "batch_norm", "group_norm", "conv1d", "conv2d", "conv3d",
    "conv_transpose2d", "linear", "clamp", "clamp_min", "clamp_max", "pow", "sqrt", "rsqrt", "mul", "add", "sub",
    "div", "addcmul", "cumsum", "prod", "abs", "neg", "where", "maximum", "minimum", "logsumexp", "erf",
    "softplus", "hardtanh", "leaky_relu", "elu", "dropout", "scaled_dot_product_attention", "matmul_", "mul_",
    "add_", "div_", "sub_", "exp_", "sigmoid_", "tanh_", "t_", "topk", "sort", "cumprod", "tril", "triu",
}
COMPILER_MODULES = {"numba", "jax", "jaxlib", "tvm", "tensorflow", "cupy", "numpy", "scipy", "numexpr",
                    "torch_tensorrt", "tensorrt", "onnxruntime", "taichi", "mlx", "sklearn", "pandas"}
COMPILER_TORCH = ("torch.compile", "torch.jit", "torch._dynamo", "torch._inductor", "torch.fx", "torch.export",
                  "torch._C", "torch.ops", "torch.library", "torch._prims", "torch._refs", "torch._decomp",
                  "torch.func", "torch.vmap", "torch.cuda.graphs", "torch.cuda.CUDAGraph", "torch.cuda.graph",
                  "torch.cuda.make_graphed_callables", "torch.backends.cudnn", "torch.backends.cuda")
INDIRECTION_MODULES = {"importlib", "base64", "codecs", "marshal", "pickle", "zlib", "binascii", "runpy", "dill",
                       "cloudpickle", "types", "builtins", "operator", "functools", "copyreg", "zipimport", "lzma",
                       "bz2", "gzip"}
INDIRECTION_CALLS = {"exec", "eval", "compile", "__import__", "globals", "vars", "locals", "setattr", "delattr",
                     "memoryview", "breakpoint", "open"}
INTROSPECTION_MODULES = {"gc", "inspect", "ctypes", "cffi", "traceback", "weakref", "tracemalloc", "dis",
                         "faulthandler"}
INTROSPECTION_ATTRS = {"__globals__", "__builtins__", "__subclasses__", "__code__", "f_back", "f_locals",
                       "f_globals", "gi_frame", "__closure__", "_getframe", "modules", "settrace", "setprofile",
                       "__dict__", "__class__", "__bases__", "__mro__", "__reduce__", "__reduce_ex__",
                       "tb_frame", "cr_frame", "__self__", "__func__", "__wrapped__", "_current_frames",
                       "__getattribute__", "__getattr__", "__loader__", "__spec__", "__import__"}
CONCURRENCY_MODULES = {"threading", "_thread", "multiprocessing", "concurrent", "subprocess", "asyncio", "signal",
                       "pty", "socket", "sched", "shutil", "resource", "atexit", "posix", "nt"}
# os, sys and time are common in honest wrappers (os.environ for build flags); everything else in os can
# touch files (the reference and build caches included) or processes, so only these names are allowed.
# tensor methods that return a view or copy of the same data (not a number like .numel() or .size())
TENSOR_VIEWS = {"contiguous", "view", "reshape", "to", "float", "half", "double", "cuda", "cpu", "flatten",
                "permute", "transpose", "t", "unsqueeze", "squeeze", "expand", "clone", "detach", "view_as",
                "reshape_as", "narrow", "select", "type_as", "unflatten", "movedim"}
ARITHMETIC_DUNDERS = {f"__{op}__" for op in (
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "neg", "abs", "gt", "ge", "lt", "le", "eq",
    "ne", "and", "or", "xor", "invert", "radd", "rsub", "rmul", "rtruediv", "iadd", "isub", "imul", "itruediv")}
# what forward may call on a tensor: views and copies of the same data, metadata, allocation
TENSOR_METHODS_OK = TENSOR_VIEWS | {
    "size", "numel", "nelement", "dim", "ndimension", "stride", "data_ptr", "is_contiguous", "element_size",
    "get_device", "storage_offset", "untyped_storage", "is_floating_point", "new_empty", "new_zeros",
    "new_ones", "new_full", "new_empty_strided", "requires_grad_", "record_stream", "type",
}
OS_ALLOWED = {"environ", "path", "getenv", "cpu_count", "sep", "linesep", "name", "pathsep"}
PATCHABLE_ROOTS = {"torch", "time", "np", "numpy", "builtins", "math", "sys", "os", "random", "F", "nn"}
# modules that other modules re-export as attributes (`os.path.os`, `torch.sys`): reaching them that way
# hides an import the rules above would have refused
REACHABLE_MODULES = {"os", "sys", "subprocess", "importlib", "builtins", "ctypes", "gc", "inspect", "threading",
                     "multiprocessing", "shutil", "socket", "pickle", "numpy", "io", "pathlib", "glob", "tempfile",
                     "signal", "posix", "marshal", "_thread", "weakref", "traceback", "functools", "operator"}
# names an import statement makes that are modules (so `_T = torch` makes _T a module alias)
KNOWN_MODULES = {"torch", "torch.nn", "torch.nn.functional", "torch.cuda", "torch.utils", "torch.utils.cpp_extension",
                 "torch.linalg", "torch.fft", "torch.special", "torch.backends", "os", "os.path", "sys", "time",
                 "math", "triton", "triton.language", "numpy", "collections", "typing", "dataclasses"}
TENSOR_BASES = ("torch.Tensor", "torch.nn.Parameter", "torch.nn.parameter", "torch._C", "torch.nn.Buffer")
TENSOR_SUBCLASS_NAMES = {"__torch_function__", "__torch_dispatch__", "as_subclass", "_make_subclass",
                         "_make_wrapper_subclass", "_disabled_torch_function_impl"}
TENSOR_SUBCLASS_TORCH = ("torch.overrides", "torch.utils._python_dispatch", "torch._subclasses",
                         "torch.utils._pytree")
MODULE_HOOKS = {"register_forward_hook", "register_forward_pre_hook", "register_full_backward_hook",
                "register_backward_hook", "register_full_backward_pre_hook", "register_module_forward_hook",
                "register_module_forward_pre_hook", "register_module_full_backward_hook"}
MUTABLE_FACTORIES = {"dict", "list", "set", "bytearray", "deque", "defaultdict", "OrderedDict", "Counter",
                     "SimpleNamespace", "ChainMap", "collections.deque", "collections.defaultdict",
                     "collections.OrderedDict", "collections.Counter", "collections.ChainMap"}
CONTAINER_MUTATORS = {"append", "extend", "insert", "pop", "popitem", "clear", "remove", "update", "setdefault", "add",
                      "discard", "appendleft", "extendleft", "__setitem__", "__delitem__", "sort", "reverse"}
# deserialization: a pickle runs code and can forge any record the candidate's process writes; a mapped
# or read file brings in data (or host secrets) the verifier did not hand over. Refused everywhere,
# __init__ included (set-up is no excuse: a torch.load in __init__ forged a whole run).
DESERIALIZATION_NAMES = ("torch.load", "torch.serialization", "torch.from_file", "torch.hub", "torch.package",
                         "torch.utils.model_zoo", "torch.utils.data", "torch.storage", "numpy.load", "numpy.fromfile",
                         "numpy.memmap", "numpy.lib", "pickle", "_pickle", "cPickle", "marshal", "dill",
                         "cloudpickle", "shelve", "joblib", "copyreg")
DESERIALIZATION_ATTRS = {"from_file", "fromfile", "_load_from_bytes", "_legacy_load", "__setstate__",
                         "_new_shared_filename", "_new_shared_filename_cpu", "_new_using_filename",
                         "_new_using_filename_cpu", "_share_filename_", "_share_filename_cpu_", "memmap"}
DESERIALIZATION_KEYWORDS = {("weights_only", False), ("allow_pickle", True), ("mmap", True)}
TORCH_ALLOCATIONS = {"empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full",
                     "full_like", "tensor", "as_tensor", "from_numpy", "arange"}

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


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _setup_methods(cls: ast.ClassDef) -> set[str]:
    """Methods of `cls` called as self.NAME(...) from __init__ and from no other method (e.g. reset_parameters)."""
    methods = {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}

    def called(fn: ast.AST) -> set[str]:
        return {c.func.attr for c in ast.walk(fn) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                and _dotted(c.func.value) == "self" and c.func.attr in methods}

    init = methods.get("__init__")
    if init is None:
        return set()
    elsewhere = set().union(*(called(fn) for name, fn in methods.items() if name != "__init__"), set())
    return (called(init) - elsewhere) - {"forward", "__init__"}


class _Scanner(ast.NodeVisitor):
    """One pass over the module; collects violations with line numbers."""

    def __init__(self, backend: str):
        self.backend = backend
        self.aliases: dict[str, str] = {}
        self.violations: list[Violation] = []
        self.ext_names: set[str] = set()
        self.self_ext: set[str] = set()
        self.self_layers: dict[str, str] = {}
        self.func_stack: list[str] = []
        self.tensor_names: set[str] = set()
        self.class_stack: list[str] = []
        self.has_modelnew = False
        self.module_aliases: set[str] = set()
        self.class_names: set[str] = set()
        self.top_names: set[str] = set()
        self.global_mutable: set[str] = set()
        self.local_stack: list[set[str]] = []
        self.def_stack: list[set[str]] = []
        self.parents: dict[int, ast.AST] = {}
        self.setup_methods: dict[str, set[str]] = {}
        self.allowed_modules = {"triton", "triton.language", "tl"} if backend == "triton" else set()

    def add(self, rule: str, node: ast.AST, message: str) -> None:
        self.violations.append(Violation(rule, getattr(node, "lineno", 0), message))

    # names --------------------------------------------------------------------------------------
    def resolve(self, node: ast.AST) -> str | None:
        name = _dotted(node)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        if head in self.aliases:
            full = self.aliases[head]
            return f"{full}.{rest}" if rest else full
        return name

    def in_setup(self) -> bool:
        """Inside an `__init__`, a helper defined in one, or a method only `__init__` calls (`reset_parameters`):
        set-up, not the work, so torch calls are allowed."""
        if "__init__" in self.func_stack:
            return True
        return bool(self.class_stack and self.func_stack) and \
            self.func_stack[0] in self.setup_methods.get(self.class_stack[-1], set())

    def in_forward(self) -> bool:
        """Inside a method of a class the candidate defines (ModelNew, its bases, its sub-modules), other than
        `__init__`: the code that runs on every call."""
        return bool(self.class_stack) and bool(self.func_stack) and not self.in_setup()

    def is_local(self, name: str) -> bool:
        return bool(self.local_stack) and name in self.local_stack[-1]

    def prepare(self, tree: ast.Module) -> None:
        """Module-level facts the rules need before the pass: parents, class names, mutable globals."""
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parents[id(child)] = node
            if isinstance(node, ast.ClassDef):
                self.class_names.add(node.name)
                self.setup_methods[node.name] = _setup_methods(node)
        for node in tree.body:
            targets: list[ast.AST] = []
            value = None
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                targets, value = [node.target], node.value
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                self.top_names.add(node.name)
            for t in targets:
                for name in (n.id for n in ast.walk(t) if isinstance(n, ast.Name)):
                    self.top_names.add(name)
                    if value is not None and self._is_mutable_value(value):
                        self.global_mutable.add(name)

    def _is_mutable_value(self, value: ast.AST) -> bool:
        if isinstance(value, ast.List | ast.Set) and value.elts and all(isinstance(e, ast.Constant) for e in value.elts):
            return False  # a list of constants (dims, flags): only changing it in forward is state, see visit_Call
        if isinstance(value, ast.Dict | ast.List | ast.Set | ast.ListComp | ast.DictComp | ast.SetComp):
            return True
        if isinstance(value, ast.Call):
            name = _dotted(value.func) or ""
            leaf = name.split(".")[-1]
            if name in MUTABLE_FACTORIES or leaf in MUTABLE_FACTORIES - {"list", "dict", "set"} or name in self.class_names:
                return True
            return name.split(".")[0] in {"torch"} and leaf in TORCH_ALLOCATIONS
        return False

    # imports ------------------------------------------------------------------------------------
    def _check_module(self, node: ast.AST, module: str) -> None:
        root = module.split(".")[0]
        if module in self.allowed_modules or root in self.allowed_modules:
            return
        if root == "triton" and self.backend != "triton":
            self.add("compiler-standin", node, "triton is only allowed with --backend triton")
        elif root in COMPILER_MODULES:
            self.add("compiler-standin", node, f"import of {module}: the work must be done by the custom kernel")
        elif root in INDIRECTION_MODULES:
            self.add("indirection", node, f"import of {module} is not allowed in a candidate")
            self._check_deserialization(node, module, "")
        elif root in INTROSPECTION_MODULES:
            self.add("introspection", node, f"import of {module} is not allowed in a candidate")
        elif root in CONCURRENCY_MODULES and module not in {"os.path"}:
            self.add("concurrency", node, f"import of {module} is not allowed in a candidate")
        elif module.startswith(COMPILER_TORCH):
            self.add("compiler-standin", node, f"import of {module}: compilers cannot stand in for the kernel")
        elif root not in {"torch", "math", "typing", "__future__", "dataclasses", "collections", "triton", "os", "sys",
                          "time"}:
            self.add("indirection", node, f"import of {module}: only torch (and the backend's toolchain) may be imported")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._check_module(node, alias.name)
            self.aliases[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
            self.module_aliases.add(alias.asname or alias.name.split(".")[0])
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level:
            self.add("reference-model", node, "relative imports can reach the reference task")
        self._check_module(node, module)
        for alias in node.names:
            if module == "os" and alias.name not in OS_ALLOWED:
                self.add("os-escape", node, f"os.{alias.name} is not allowed: only os.environ and os.path may be used")
            if alias.name == "Model":
                self.add("reference-model", node, f"imports Model from {module}")
            if alias.name == "*":
                self.add("indirection", node, f"`from {module} import *` hides what is called")
            if alias.name in INTROSPECTION_ATTRS:
                self.add("introspection", node, f"`from {module} import {alias.name}` is not allowed in a candidate")
            self.aliases[alias.asname or alias.name] = f"{module}.{alias.name}" if module else alias.name
            if f"{module}.{alias.name}" in KNOWN_MODULES:
                self.module_aliases.add(alias.asname or alias.name)
            if alias.name in TENSOR_SUBCLASS_NAMES or f"{module}.".startswith(tuple(p + "." for p in TENSOR_SUBCLASS_TORCH)):
                self.add("tensor-subclass", node, f"`from {module} import {alias.name}`: outputs must be plain tensors")
            if module:
                self._check_module(node, f"{module}.{alias.name}")
        self.generic_visit(node)

    # structure ----------------------------------------------------------------------------------
    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if node.name == "ModelNew":
            self.has_modelnew = True
            for base in node.bases:
                if _dotted(base) in {"Model"}:
                    self.add("reference-model", node, "ModelNew must not inherit from the reference Model")
        for base in node.bases:
            full = self.resolve(base) or ""
            if full.startswith(TENSOR_BASES) or full.startswith(TENSOR_SUBCLASS_TORCH):
                self.add("tensor-subclass", node, f"class {node.name}({full}): outputs must be plain torch.Tensor, "
                                                  "not a subclass that can compute later")
        for item in node.body:
            targets = item.targets if isinstance(item, ast.Assign) else (
                [item.target] if isinstance(item, ast.AnnAssign | ast.AugAssign) else [])
            for t in targets:
                if isinstance(t, ast.Name) and t.id in {"forward", "__call__"}:
                    self.add("forward-outside-class", item, f"{t.id} = ... binds a function defined elsewhere; "
                                                            f"write def {t.id}(self, ...) in the class body")
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name == "__call__":
                self.add("forward-outside-class", item, "overriding __call__ bypasses forward; define forward only")
        self.class_stack.append(node.name)
        self.generic_visit(node)
        self.class_stack.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        for dec in node.decorator_list:
            name = self.resolve(dec.func if isinstance(dec, ast.Call) else dec) or ""
            if name.split(".")[-1] in {"lru_cache", "cache", "cached_property"}:
                self.add("output-cache", dec, f"@{name} caches results across calls")
            if name.startswith(COMPILER_TORCH):
                self.add("compiler-standin", dec, f"@{name}: compilers cannot stand in for the kernel")
        if node.name in {"__torch_function__", "__torch_dispatch__"}:
            self.add("tensor-subclass", node, f"{node.name} lets a tensor run code whenever torch touches it; "
                                              "return plain tensors")
        self.func_stack.append(node.name)
        outer = self.tensor_names
        args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
        local = {a.arg for a in args}
        for a in (node.args.vararg, node.args.kwarg):
            if a is not None:
                local.add(a.arg)
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                local.add(sub.id)
        self.local_stack.append(local)
        self.def_stack.append({n.name for n in ast.walk(node) if n is not node and
                               isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef)
                               and hasattr(n, "name")})
        if self.in_forward():
            self.tensor_names = {a.arg for a in args if a.arg != "self"}
            for default in [*node.args.defaults, *node.args.kw_defaults]:
                if default is not None and self._is_mutable_value(default):
                    self.add("output-cache", default, f"a mutable default argument of {node.name} keeps state across calls")
        self.generic_visit(node)
        self.local_stack.pop()
        self.def_stack.pop()
        self.tensor_names = outer
        self.func_stack.pop()

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.generic_visit(node)

    def visit_Try(self, node: ast.Try) -> None:
        self.add("try-fallback", node, "try/except is not allowed: a kernel must not fall back to torch on failure")
        self.generic_visit(node)

    visit_TryStar = visit_Try  # type: ignore[assignment]

    def visit_Global(self, node: ast.Global) -> None:
        if self.func_stack:
            self.add("output-cache", node, f"`global {', '.join(node.names)}` inside a function keeps state across calls")

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        self.add("output-cache", node, "`nonlocal` keeps state across calls")

    # assignments --------------------------------------------------------------------------------
    def _check_target(self, target: ast.AST, value: ast.AST | None) -> None:
        if isinstance(target, ast.Attribute):
            base = _dotted(target.value)
            full = self.resolve(target.value) or ""
            root = (base or "").split(".")[0]
            if base in self.class_names and not self.in_forward():
                self.add("forward-outside-class", target, f"assigns {base}.{target.attr} outside the class body; "
                                                          "define methods with def inside the class")
            elif self.in_forward() and root and root != "self" and root in self.top_names and not self.is_local(root):
                self.add("output-cache", target, f"forward assigns {base}.{target.attr}: module-level state kept across calls")
            if base == "self":
                if self.in_forward():
                    self.add("output-cache", target, f"forward assigns self.{target.attr}: state kept across calls can replay outputs")
                elif value is not None and self.in_setup() and self._stores_function(value):
                    self.add("torch-op", target, f"self.{target.attr} holds a function for forward to call; "
                                                 "write the work in forward with the custom kernel")
                elif value is not None:
                    vname = self.resolve(value.func) if isinstance(value, ast.Call) else self.resolve(value)
                    if vname and vname in self.ext_names:
                        self.self_ext.add(target.attr)
                    elif vname and vname.startswith(NN_LAYER_PREFIX) and not vname.startswith(
                        ("torch.nn.Parameter", "torch.nn.ParameterList")
                    ):
                        self.self_layers[target.attr] = vname
            elif full.split(".")[0] in PATCHABLE_ROOTS or (base or "").split(".")[0] in PATCHABLE_ROOTS:
                self.add("monkey-patch", target, f"assigns {base}.{target.attr}: patching modules is not allowed")
            elif base and base in self.aliases:
                self.add("monkey-patch", target, f"assigns {base}.{target.attr}: patching imported modules is not allowed")
        elif isinstance(target, ast.Subscript):
            base = _dotted(target.value) or ""
            if self.in_forward() and base and not base.startswith("self"):
                self.add("output-cache", target, f"forward writes into {base}[...]: state kept across calls")
            if base.startswith("self") and self.in_forward():
                self.add("output-cache", target, f"forward writes into {base}[...]: state kept across calls")
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self._check_target(elt, None)
        elif isinstance(target, ast.Name) and not self.func_stack and value is not None and isinstance(value, ast.Call):
            fname = self.resolve(value.func) or ""
            if fname.endswith(("load_inline", "cpp_extension.load")) or fname in {"load_inline", "load"}:
                self.ext_names.add(target.id)
        if isinstance(target, ast.Name) and target.id in {"Model"}:
            self.add("reference-model", target, "rebinding the name Model is not allowed")

    def _stores_function(self, value: ast.AST) -> bool:
        """A lambda, a function defined in __init__, or a torch function (not a call) stored on self."""
        if isinstance(value, ast.Lambda):
            return True
        if isinstance(value, ast.Name) and self.def_stack and value.id in self.def_stack[-1]:
            return True
        name = self.resolve(value) if isinstance(value, ast.Attribute | ast.Name) else None
        if not name or not name.startswith("torch."):
            return False
        parts = name.split(".")
        if name.startswith(ALLOWED_TORCH_PREFIXES) or (len(parts) == 2 and parts[1] in ALLOWED_TORCH):
            return False
        return not (name.startswith(NN_LAYER_PREFIX) and parts[-1][:1].isupper())

    def _alias(self, target: ast.AST, value: ast.AST) -> None:
        """`_T = torch`, `F = torch.nn.functional`, `relu = torch.relu`: later uses resolve through the alias."""
        if isinstance(target, ast.Tuple | ast.List) and isinstance(value, ast.Tuple | ast.List) and \
                len(target.elts) == len(value.elts):
            for t, v in zip(target.elts, value.elts, strict=True):
                self._alias(t, v)
            return
        if not isinstance(target, ast.Name) or not isinstance(value, ast.Name | ast.Attribute):
            return
        head = (_dotted(value) or "").split(".")[0]
        if head in self.aliases:
            full = self.resolve(value) or ""
            self.aliases[target.id] = full
            if isinstance(value, ast.Name) and value.id in self.module_aliases or full in KNOWN_MODULES:
                self.module_aliases.add(target.id)

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self._check_target(t, node.value)
            self._track_tensor(t, node.value)
            self._alias(t, node.value)
        self.generic_visit(node)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self._alias(node.target, node.value)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_target(node.target, None)
        if self.in_forward() and (self._is_tensor(node.target) or self._is_tensor(node.value)):
            self.add("tensor-arithmetic", node, "in-place arithmetic on a tensor in forward runs a torch operator")
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_target(node.target, node.value)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            if isinstance(t, ast.Attribute) and (self.resolve(t.value) or "").split(".")[0] in PATCHABLE_ROOTS:
                self.add("monkey-patch", t, "deleting module attributes is not allowed")
        self.generic_visit(node)

    # expressions --------------------------------------------------------------------------------
    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "Model" and isinstance(node.ctx, ast.Load):
            self.add("reference-model", node, "the reference Model is referenced")
        if node.id in {"__builtins__", "__loader__", "__spec__"}:
            self.add("introspection", node, f"{node.id} is not allowed")
        if node.id in TENSOR_SUBCLASS_NAMES:
            self.add("tensor-subclass", node, f"{node.id}: outputs must be plain tensors")
        if isinstance(node.ctx, ast.Load):
            self._check_module_value(node)
            if self.in_forward() and node.id in self.global_mutable and not self.is_local(node.id):
                self.add("output-cache", node, f"forward uses module-level {node.id}, which can keep state across calls")
        self.generic_visit(node)

    def _check_module_value(self, node: ast.Name) -> None:
        """A module used as a value (passed, stored, returned) hides which of its functions get called."""
        if node.id not in self.module_aliases:
            return
        parent = self.parents.get(id(node))
        if isinstance(parent, ast.Attribute) and parent.value is node:
            return
        if isinstance(parent, ast.Assign | ast.NamedExpr | ast.AnnAssign) and getattr(parent, "value", None) is node:
            return  # an alias: `_T = torch`; later uses resolve through it
        if isinstance(parent, ast.Tuple | ast.List) and isinstance(self.parents.get(id(parent)), ast.Assign):
            return  # `a, b = torch, os`, resolved pairwise
        if isinstance(parent, ast.Call) and _dotted(parent.func) in {"getattr", "hasattr", "isinstance"} and \
                parent.args and parent.args[0] is node:
            return  # getattr(torch, "name") is checked by name
        if isinstance(parent, ast.Import | ast.ImportFrom | ast.alias):
            return
        self.add("indirection", node, f"the module {self.aliases.get(node.id, node.id)} is used as a value; "
                                      "call its functions by name")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        full = self.resolve(node) or ""
        self._check_name_chain(node, full, node.attr, _dotted(node.value) == "self")
        if not full and not isinstance(self.parents.get(id(node)), ast.Attribute):
            # `[torch.utils][0].cpp_extension.importlib`, `(lambda: torch)().os`: the chain passes through
            # a subscript, a call or an expression; every name it may stand for is checked like a dotted one
            for chain in self._loose_chains(node):
                if "." in chain and chain != full:
                    self._check_name_chain(node, chain, chain.rsplit(".", 1)[1])
                    self._check_torch_name(node, chain)
        self.generic_visit(node)

    def _loose_chains(self, node: ast.AST, depth: int = 0) -> list[str]:
        """The dotted names an expression may evaluate to, looking through container literals and their
        subscripts, calls (their callee, getattr/vars by their object), conditionals, walrus and lambdas."""
        if depth > 12:
            return []
        sub = lambda n: self._loose_chains(n, depth + 1)  # noqa: E731
        if isinstance(node, ast.Name):
            return [self.resolve(node) or node.id]
        if isinstance(node, ast.Attribute):
            return [f"{c}.{node.attr}" for c in sub(node.value)]
        if isinstance(node, ast.Subscript):
            return sub(node.value)
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            return [c for e in node.elts for c in sub(e)]
        if isinstance(node, ast.Dict):
            return [c for e in node.values if e is not None for c in sub(e)]
        if isinstance(node, ast.Starred | ast.NamedExpr):
            return sub(node.value)
        if isinstance(node, ast.IfExp):
            return sub(node.body) + sub(node.orelse)
        if isinstance(node, ast.BoolOp):
            return [c for v in node.values for c in sub(v)]
        if isinstance(node, ast.Lambda):
            return sub(node.body)
        if isinstance(node, ast.Call):
            fname = _dotted(node.func)
            if fname in {"getattr", "vars", "dict", "list", "tuple", "next", "iter", "type"} and node.args:
                inner = sub(node.args[0])
                if fname == "getattr" and len(node.args) > 1 and isinstance(node.args[1], ast.Constant):
                    return [f"{c}.{node.args[1].value}" for c in inner]
                return inner
            return sub(node.func)
        if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp):
            return sub(node.elt) + [c for g in node.generators for c in sub(g.iter)]
        return []

    def _check_name_chain(self, node: ast.AST, full: str, attr: str, on_self: bool = False) -> None:
        """Rules on a dotted name (`os.path.os.system`, `sys.modules`, `torch._C`), reached by attribute access
        or by getattr with a constant name."""
        parts = full.split(".")
        if parts[0] == "os" and len(parts) > 1 and parts[1] not in OS_ALLOWED:
            self.add("os-escape", node, f"os.{parts[1]} is not allowed: only os.environ and os.path may be used")
        for i, part in enumerate(parts[1:], 1):
            if part in REACHABLE_MODULES and not (i == 1 and parts[0] == "os" and part == "path") and \
                    (parts[0] in self.module_aliases or parts[0] in KNOWN_MODULES or parts[0] in self.aliases):
                rule = "os-escape" if part == "os" else "indirection"
                self.add(rule, node, f"{'.'.join(parts[:i + 1])} reaches the {part} module through another module")
                break
        self._check_deserialization(node, full, attr)
        if attr in INTROSPECTION_ATTRS and not (on_self and attr == "modules"):
            self.add("introspection", node, f".{attr} is not allowed in a candidate")
        if attr in TENSOR_SUBCLASS_NAMES or full.startswith(TENSOR_SUBCLASS_TORCH):
            self.add("tensor-subclass", node, f"{full or attr}: outputs must be plain tensors, without "
                                              "__torch_function__ or subclass wrappers")
        if attr in MODULE_HOOKS:
            self.add("forward-outside-class", node, f".{attr}() runs code around forward; do the work in forward")
        if self._check_gpu_name(node, full):
            pass
        elif full.startswith(COMPILER_TORCH):
            self.add("compiler-standin", node, f"{full}: compilers and torch internals cannot stand in for the kernel")

    def _check_deserialization(self, node: ast.AST, full: str, attr: str) -> None:
        name = full.replace("np.", "numpy.", 1) if full.startswith("np.") and "np" not in self.aliases else full
        if any(name == p or name.startswith(p + ".") for p in DESERIALIZATION_NAMES) or attr in DESERIALIZATION_ATTRS:
            self.add("deserialization", node, f"{full or attr}: loading pickles or files is not allowed in a candidate "
                                              "(it can run code and forge what the verifier records); compute with "
                                              "the inputs and weights forward receives")

    def _is_tensor(self, node: ast.AST) -> bool:
        """A name bound in forward to an input, a custom-kernel result or a view of one."""
        return isinstance(node, ast.Name) and node.id in self.tensor_names

    def _track_tensor(self, target: ast.AST, value: ast.AST | None) -> None:
        if not self.in_forward() or not isinstance(target, ast.Name) or value is None:
            return
        tensor = self._is_tensor(value)
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
            base = _dotted(value.func.value) or ""
            ext = base in self.ext_names or (base.startswith("self.") and base[5:] in self.self_ext)
            view = self._is_tensor(value.func.value) and value.func.attr in TENSOR_VIEWS
            alloc = (self.resolve(value.func) or "").split(".")[-1] in {"empty", "empty_like", "zeros", "zeros_like"}
            tensor = ext or view or alloc
        (self.tensor_names.add if tensor else self.tensor_names.discard)(target.id)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult) and not self.in_setup():
            self.add("torch-op", node, "the @ operator runs torch's matmul")
        elif self.in_forward() and (self._is_tensor(node.left) or self._is_tensor(node.right)):
            self.add("tensor-arithmetic", node, "arithmetic on a tensor in forward runs a torch operator; "
                                                "do it in the custom kernel")
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        if self.in_forward() and any(self._is_tensor(n) for n in [node.left, *node.comparators]):
            self.add("tensor-arithmetic", node, "comparing tensors in forward runs a torch operator; do it in the kernel")
        self.generic_visit(node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        if self.in_forward() and not isinstance(node.op, ast.Not) and self._is_tensor(node.operand):
            self.add("tensor-arithmetic", node, "arithmetic on a tensor in forward runs a torch operator")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = self.resolve(func)
        for kw in node.keywords:
            if kw.arg and isinstance(kw.value, ast.Constant) and (kw.arg, kw.value.value) in DESERIALIZATION_KEYWORDS:
                self.add("deserialization", node, f"{kw.arg}={kw.value.value!r} unpickles or maps data from a file; "
                                                  "not allowed in a candidate")
        if isinstance(func, ast.Name) and func.id in {"load", "loads", "from_file", "fromfile"} and \
                (self.aliases.get(func.id) or "").rpartition(".")[0]:
            self._check_deserialization(node, self.aliases[func.id], func.id)
        if isinstance(func, ast.Name):
            if func.id in INDIRECTION_CALLS:
                self.add("indirection", node, f"{func.id}() is not allowed in a candidate")
            if func.id == "getattr" and (len(node.args) < 2 or not isinstance(node.args[1], ast.Constant)):
                self.add("indirection", node, "getattr with a computed name can hide torch calls")
            if func.id == "getattr" and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
                target = self.resolve(node.args[0]) or ""
                attr = str(node.args[1].value)
                self._check_name_chain(node, f"{target}.{attr}", attr, _dotted(node.args[0]) == "self")
                self._check_torch_name(node, f"{target}.{attr}")
            if func.id == "Model":
                self.add("reference-model", node, "instantiates the reference Model")
        if name:
            self._check_torch_name(node, name)
            head, _, leaf = name.rpartition(".")
            if head == "sys" and leaf in {"exit", "settrace", "setprofile", "_getframe", "addaudithook"}:
                self.add("introspection", node, f"sys.{leaf}() is not allowed in a candidate")
        if isinstance(func, ast.Attribute) and self.in_forward() and isinstance(func.value, ast.Name) and \
                func.value.id in self.top_names and not self.is_local(func.value.id) and func.attr in CONTAINER_MUTATORS:
            self.add("output-cache", node, f"forward changes module-level {func.value.id} with .{func.attr}(): "
                                           "state kept across calls")
        if isinstance(func, ast.Attribute) and self.in_forward() and func.attr in ARITHMETIC_DUNDERS:
            self.add("tensor-arithmetic", node, f".{func.attr}() is tensor arithmetic; do it in the custom kernel")
        if isinstance(func, ast.Attribute) and self.in_forward():
            base = _dotted(func.value) or ""
            ext_call = base in self.ext_names or (base.startswith("self.") and base[5:] in self.self_ext)
            if base.startswith("self.") and base[5:] in self.self_ext:
                ext_call = True
            if not ext_call and func.attr in COMPUTE_METHODS and not (name or "").startswith(("math.", "triton", "tl.")):
                self.add("torch-op", node, f".{func.attr}() runs a torch operator; compute it in the custom kernel")
            elif self._is_tensor(func.value) and func.attr not in TENSOR_METHODS_OK | ARITHMETIC_DUNDERS:
                self.add("torch-op", node, f".{func.attr}() on a tensor runs a torch operator; only views, metadata "
                                           "and allocation may be called on tensors in forward")
        if isinstance(func, ast.Attribute) and _dotted(func.value) == "self" and self.in_forward():
            layer = self.self_layers.get(func.attr)
            if layer:
                self.add("torch-op", node, f"calling self.{func.attr} ({layer}) runs torch's kernel, not a custom one")
        self.generic_visit(node)

    def _check_gpu_name(self, node: ast.AST, name: str) -> bool:
        """Streams, events and CUDA graphs: ways to hide work from the timed stream or replay outputs."""
        if name.startswith(TORCH_CUDA_GRAPHS):
            self.add("cuda-graph", node, f"{name}: CUDA graph replay can return captured outputs; launch the kernel")
            return True
        if name.startswith(TORCH_CUDA_STREAMS):
            self.add("gpu-stream", node, f"{name}: launch on the current stream; side streams and events are not allowed")
            return True
        return False

    def _check_torch_name(self, node: ast.AST, name: str) -> None:
        if not name.startswith("torch") or self._check_gpu_name(node, name):
            return
        if name.startswith(COMPILER_TORCH):
            self.add("compiler-standin", node, f"{name}: compilers cannot stand in for the kernel")
            return
        if name.startswith(ALLOWED_TORCH_PREFIXES) or name.startswith(TENSOR_SUBCLASS_TORCH):
            return
        if self.in_setup():
            return  # __init__ is set-up (parameters, masks, weight layouts), not the work
        parts = name.split(".")
        if len(parts) == 2 and parts[1] in ALLOWED_TORCH:
            return
        if name.startswith(NN_LAYER_PREFIX) and len(parts) == 3 and parts[2][:1].isupper():
            if self.in_forward():
                self.add("torch-op", node, f"{name} built inside forward runs torch's kernel")
            return
        if name.startswith("torch.cuda.") and parts[2] in {"current_stream", "default_stream", "synchronize"}:
            return
        self.add("torch-op", node, f"{name} does the work in torch; compute it in the custom kernel")


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


def scan(source: str, backend: str = "cpu") -> list[Violation]:
    """All static violations, sorted by line; an empty list means the gate's static part passes."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return [Violation("syntax", exc.lineno or 0, f"{exc.msg}")]
    scanner = _Scanner(backend)
    scanner.prepare(tree)
    scanner.visit(tree)
    violations = list(scanner.violations)
    if not scanner.has_modelnew:
        violations.append(Violation("no-modelnew", 1, "define class ModelNew(nn.Module) with the same __init__ arguments as Model"))
    for line, code in _embedded_sources(tree):
        violations.extend(scan_cpp(line, code))
    violations.extend(_vendor_ldflags(tree))
    unique: dict[tuple[str, int], Violation] = {}
    for v in violations:
        unique.setdefault((v.rule, v.line), v)
    return sorted(unique.values(), key=lambda v: (v.line, v.rule))
