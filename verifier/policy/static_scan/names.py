"""The Python-side name tables the scanner judges by: what a kernel wrapper may call (allocation, metadata,
building) and the modules, attributes and calls that compute, hide code, introspect, patch or escape."""

from __future__ import annotations

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
