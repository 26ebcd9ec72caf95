"""Audit what a built extension imports, not what its source text says.

Macros, aliases (`#define OPEN fopen`, `__asm__("system")` labels), spliced sources and compiler wrappers
change the text a scanner reads; they do not change the symbols the linked object asks the dynamic
linker for. This module reads those with pyelftools (`verifier.policy.elf_read`) and reports the families that
mean someone else does the kernel's work or the kernel reaches outside its job:

* ``blas``            BLAS/LAPACK/MKL/oneDNN/fbgemm/XNNPACK and GPU vendor libraries, in any case
                      (MKL exports upper-case ``SGEMM``; Fortran ``sgemm_``; ``cblas_*``; ``LAPACKE_*``)
* ``aten-op``         ATen operator entry points: ``at::_ops::<op>::call/redispatch`` for compute ops,
                      ``at::native``, ``at::cpu``, ``at::composite*``, out-of-line compute methods of
                      ``at::Tensor``, the dispatcher, TorchScript, ``torch::nn``
* ``dynamic-loading`` ``dlopen``/``dlsym``/``dl_iterate_phdr``..., unexpected ``DT_NEEDED`` libraries,
                      run paths outside the trusted directories, ``DT_AUDIT``/filter libraries
* ``python``          Python module import and code execution from C++ (``PyImport_*``, ``PyRun_*``,
                      ``Py_CompileString``, ``PyEval_Eval*``...); in the ``kernel`` profile any Python C API
* ``process``         process and thread creation, signals, timers, scheduling of other processes
                      (OpenMP's runtime, ``GOMP_*``/``omp_*``, is fine)
* ``file-io``         files, directories, IPC objects, ``std::ifstream``/``ofstream``/``filesystem``,
                      file-backed ATen allocators
* ``socket``          network
* ``syscall``         raw ``syscall()``

What stays allowed, because honest kernels need it: allocation, views and metadata (``at::empty``,
``at::zeros``, ``empty_like``, ``contiguous``, ``view``/``reshape``, ``to``, ``clone``/``copy_``,
``TensorBase::data_ptr`` and friends), everything in ``c10`` except the dispatcher and thread pools,
``at::vec``, ``at::parallel_for``/OpenMP, libm, ``malloc``/``new``, stdio on the standard streams, and
the Python C API that pybind11 bindings themselves import (measured on a real ``torch/extension.h``
build; ``pybind11::module_::import`` adds ``PyImport_ImportModule``, which is reported).

Two profiles:

* ``extension`` (default): a whole Python extension (kernel + pybind11 bindings in one .so).
* ``kernel``: the kernel's own object (``kernel.o`` of a split build): no Python at all. Prefer it where
  the kernel object exists: an extension-profile audit cannot tell a pybind11 binding from a kernel that
  reaches ``__import__`` through ``PyEval_GetBuiltins`` + ``PyObject_Call*``, which bindings also import.

Symbols the object *defines* and exports with default visibility are checked too (C names and the
std:: file/thread classes only): the dynamic linker searches the global scope first, so a kernel that
defines its own ``system`` and calls it gets the C library's.

Not seen by this audit (say so where it matters): code reached without a symbol (inline ``syscall``
instructions, pointer arithmetic from an allowed function's address, reading the GOT), statically linked
and stripped libraries, header-only libraries (Eigen, CUTLASS), and what a *trusted* library does on the
kernel's behalf through an allowed entry point (``copy_``/``contiguous`` do real work).
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from verifier.policy.elf_read import (  # noqa: F401 - re-exported: what other code imports from verifier.policy.binary_audit
    AuditError,
    ElfInfo,
    _strip_version,
    exported_symbols,
    imported_symbols,
    needed_libraries,
    read_elf,
)

BLAS = "blas"
ATEN_OP = "aten-op"
DYNAMIC_LOADING = "dynamic-loading"
PYTHON = "python"
PROCESS = "process"
FILE_IO = "file-io"
SOCKET = "socket"
SYSCALL = "syscall"
FAMILIES = (BLAS, ATEN_OP, DYNAMIC_LOADING, PYTHON, PROCESS, FILE_IO, SOCKET, SYSCALL)

EXTENSION = "extension"
KERNEL = "kernel"
PROFILES = (EXTENSION, KERNEL)


@dataclass(frozen=True, order=True)
class Finding:
    symbol: str
    family: str
    reason: str

    def __str__(self) -> str:
        return f"{self.symbol}: {self.reason}"


# ----------------------------------------------------------------------------------------------------
# reading ELF
# ----------------------------------------------------------------------------------------------------


# ----------------------------------------------------------------------------------------------------
# C names
# ----------------------------------------------------------------------------------------------------

_DL = {"dlopen", "dlmopen", "dlsym", "dlvsym", "dladdr", "dladdr1", "dlinfo", "dl_iterate_phdr",
       "libc_dlopen_mode", "libc_dlsym", "libc_dlvsym", "dl_sym", "dl_vsym", "dl_open", "r_debug",
       "dl_debug_state"}
_PROCESS = {
    "fork", "vfork", "_fork", "Fork", "clone", "clone3", "execve", "execveat", "fexecve", "execv", "execvp", "execvpe",
    "execl", "execlp", "execle", "posix_spawn", "posix_spawnp", "system", "popen", "daemon", "pthread_create",
    "thrd_create", "ptrace", "kill", "killpg", "tgkill", "tkill", "sigqueue", "process_vm_readv",
    "process_vm_writev", "prctl", "unshare", "setns", "pidfd_open", "pidfd_getfd", "pidfd_send_signal",
    "setsid", "setpgid", "signal", "sigaction", "sigset", "bsd_signal", "sysv_signal", "alarm", "ualarm",
    "setitimer", "timer_create", "setpriority", "nice", "sched_setaffinity", "sched_setscheduler",
    "sched_setparam", "pthread_setaffinity_np", "setrlimit", "prlimit", "setenv", "putenv", "unsetenv",
    "clearenv",
}
_FILE_IO = {
    "open", "openat", "openat2", "creat", "fopen", "freopen", "fdopen", "read", "pread", "preadv", "preadv2",
    "readv", "write", "pwrite", "pwritev", "pwritev2", "writev", "unlink", "unlinkat", "rename", "renameat",
    "renameat2", "remove", "mkdir", "mkdirat", "rmdir", "link", "linkat", "symlink", "symlinkat", "readlink",
    "readlinkat", "truncate", "ftruncate", "chmod", "fchmod", "fchmodat", "chown", "fchown", "lchown",
    "fchownat", "utime", "utimes", "futimes", "lutimes", "futimens", "utimensat", "futimesat", "glob",
    "opendir", "fdopendir", "readdir", "readdir_r", "scandir", "scandirat", "nftw", "ftw", "fts_open",
    "dup", "dup2", "dup3", "sendfile", "splice", "tee", "vmsplice", "copy_file_range", "mkstemp", "mkstemps",
    "mkostemp", "mkostemps", "mkdtemp", "tmpfile", "tmpnam", "tmpnam_r", "tempnam", "memfd_create",
    "shm_open", "shm_unlink", "shmget", "shmat", "shmctl", "msgget", "msgsnd", "msgrcv", "semget", "semop",
    "mq_open", "mq_send", "mq_receive", "mq_unlink", "mknod", "mknodat", "mkfifo", "mkfifoat", "ioctl",
    "fcntl", "inotify_init", "inotify_init1", "inotify_add_watch", "fanotify_init", "mount", "umount",
    "umount2", "chdir", "fchdir", "chroot", "name_to_handle_at", "open_by_handle_at", "io_uring_setup",
    "io_setup", "io_submit", "aio_read", "aio_write", "lio_listio", "realpath", "canonicalize_file_name",
    "dprintf", "vdprintf",  # formatted writes to any descriptor (the harness's progress pipe included)
}
_SOCKET = {
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4", "send", "sendto", "sendmsg",
    "sendmmsg", "recv", "recvfrom", "recvmsg", "recvmmsg", "getaddrinfo", "gethostbyname", "gethostbyname2",
    "gethostbyname_r", "gethostbyname2_r", "gethostbyaddr", "getsockopt", "setsockopt", "shutdown",
    "getpeername", "getsockname",
}

# BLAS level 2/3 routines: a short type prefix (s, d, c, z, sb, bf16...) then the routine
_BLAS_L3 = re.compile(
    r"^(cblas_|blas_)?[a-z0-9]{0,5}?(gemm|gemv|trsm|trmm|syrk|herk|symm|hemm|syr2k|her2k|gemmt)"
    r"(3m|_batch\w*|_pack\w*|_compute\w*|_alloc|_free|_get_size|_64)?_*$")
_BLAS_L1 = re.compile(
    r"^(cblas_|blas_)?([sdcz]|dz|sc|ds|sds|zd|cs)(dot|dotu|dotc|dsdot|axpy|axpby|scal|copy|swap|nrm2|asum|rot|"
    r"rotg|rotm|rotmg|ger|geru|gerc|syr|syr2|her|her2|spr|spr2|gbmv|sbmv|spmv|symv|hemv|hbmv|hpmv|tbmv|tbsv|"
    r"tpmv|tpsv|trmv|trsv)(_sub|_64)?_*$|^(cblas_)?i[sdcz]am(ax|in)(_64)?_*$")
_LAPACK = re.compile(
    r"^(lapacke_|lapack_)?[sdcz](getrf|getrs|getri|getf2|potrf|potrs|potri|potf2|geqrf|geqp3|gelqf|orgqr|ungqr|"
    r"ormqr|unmqr|orglq|unglq|gesvd|gesdd|gesvj|syev|syevd|syevr|syevx|heev|heevd|heevr|heevx|geev|ggev|gels|"
    r"gelsd|gelss|gelsy|gesv|posv|sysv|hesv|trtrs|trtri|sytrf|hetrf|sytrs|hetrs|gebrd|gehrd|orghr|unghr|hseqr|"
    r"stedc|steqr|sterf|lange|lacpy|laswp|larfg|larft|larfb|gtsv|pbtrf|pttrf|geqrt|tpqrt)(_work)?(_64)?_*$")
_LAPACK_ROOTS = re.compile(r"getrf|potrf|geqrf|gesvd|gesdd|syevd|heevd|getrs|potrs|getri")
_BLAS_PREFIXES = ("cblas_", "lapacke_", "mkl_", "mkl", "openblas", "goto_", "gotoblas", "bli_", "flexiblas",
                  "dnnl_", "mkldnn_", "xnn_", "nnp_", "pytorch_qnnp_", "qnnp_", "cublas", "cudnn", "cusparse",
                  "cusolver", "cufft", "nvblas", "rocblas", "hipblas", "miopen", "armpl", "xerbla", "fbgemm")

# the Python C API pybind11 bindings need (measured on a real torch/extension.h build) may stay;
# these import or run Python code
_PY_BANNED_PREFIXES = ("PyImport_", "PyRun_", "Py_Compile", "PyMarshal_", "PySys_", "Py_Initialize",
                       "Py_NewInterpreter", "Py_EndInterpreter", "Py_Main", "Py_BytesMain", "Py_RunMain",
                       "PyCode_New", "PyFunction_New", "PyFrame_New", "PyParser_", "PyAST_", "Py_SetPath",
                       "Py_SetPythonHome", "PyCodec_")
_PY_EVAL_OK = {"PyEval_AcquireThread", "PyEval_ReleaseThread", "PyEval_SaveThread", "PyEval_RestoreThread",
               "PyEval_GetBuiltins", "PyEval_InitThreads", "PyEval_ThreadsInitialized", "PyEval_AcquireLock",
               "PyEval_ReleaseLock", "PyEval_GetFrame"}


def _c_bases(name: str) -> set[str]:
    """`__open_2`, `__read_chk`, `open64`, `_dl_sym`: the names a C symbol may stand for."""
    n = name.lstrip("_")
    out = {name, n}
    for suffix in ("_chk", "_2", "_time64", "_unlocked"):
        if n.endswith(suffix):
            out.add(n[: -len(suffix)])
    for v in list(out):
        if v.endswith("64") and len(v) > 2:
            out.add(v[:-2].rstrip("_"))
    return out


def _classify_c(name: str, profile: str) -> Finding | None:
    bare = name.lstrip("_")
    if bare.startswith("Py") or name.startswith("THP"):
        if profile == KERNEL:
            return Finding(name, PYTHON, "the kernel object calls the Python C API (only the bindings may)")
        if bare.startswith(_PY_BANNED_PREFIXES) or (bare.startswith("PyEval_") and bare not in _PY_EVAL_OK):
            return Finding(name, PYTHON, "imports or runs Python code from C++")
        return None
    bases = _c_bases(name)
    if bases & _DL:
        return Finding(name, DYNAMIC_LOADING, "loads libraries or looks up symbols at run time")
    if bases & _PROCESS:
        return Finding(name, PROCESS, "creates or controls processes, threads, signals or the environment")
    if bases & _FILE_IO:
        return Finding(name, FILE_IO, "file, directory or IPC access")
    if bases & _SOCKET:
        return Finding(name, SOCKET, "network access")
    if "syscall" in bases:
        return Finding(name, SYSCALL, "raw system calls bypass every name-based rule")
    low = name.lower().lstrip("_")
    if (low.startswith(_BLAS_PREFIXES) or _BLAS_L3.match(low) or _BLAS_L1.match(low) or _LAPACK.match(low)
            or _LAPACK_ROOTS.search(low)):
        return Finding(name, BLAS, "a BLAS/LAPACK/MKL/oneDNN routine does the work")
    return None


# ----------------------------------------------------------------------------------------------------
# C++ (Itanium-mangled) names
# ----------------------------------------------------------------------------------------------------

_STD_ABBREV = {"St": "std", "Sa": "std::allocator", "Sb": "std::basic_string", "Ss": "std::string"}


def scope(mangled: str) -> list[str]:
    """The leading qualified-name components of an Itanium-mangled symbol, without demangling:
    `_ZN2at4_ops2mm4callE...` -> ['at', '_ops', 'mm', 'call']; `_ZNKSt14basic_ifstream...` ->
    ['std', 'basic_ifstream']; `_ZTVSt6thread` -> ['std', 'thread']. Stops at templates, constructors,
    substitutions and anything else it does not need to understand."""
    s = mangled
    if not s.startswith("_Z"):
        return []
    i = 2
    if s.startswith(("TV", "TI", "TS", "TT", "Th", "Tv", "GV", "TW", "TH"), i):
        i += 2
    out: list[str] = []
    nested = s.startswith("N", i)
    if nested:
        i += 1
        while i < len(s) and s[i] in "rVKRO":
            i += 1
    while i < len(s):
        if s.startswith("St", i):
            out.append("std")
            i += 2
            continue
        if s.startswith("L", i):  # internal linkage marker before a source name
            i += 1
            continue
        m = re.match(r"\d+", s[i:])
        if not m:
            break
        n = int(m.group(0))
        start = i + len(m.group(0))
        if n <= 0 or start + n > len(s):
            break
        out.append(s[start:start + n])
        i = start + n
        if not nested:
            break
    return out


# at::_ops entries an honest kernel calls: allocation, views, metadata, dtype/device conversion, copies
ALLOWED_OPS = frozenset({
    "empty_memory_format", "empty_names", "empty_out", "empty_like", "empty_strided", "empty_permuted",
    "zeros", "zeros_out", "zeros_names", "zeros_like", "ones", "ones_out", "ones_like", "full", "full_out",
    "full_like", "new_empty", "new_empty_strided", "new_zeros", "new_ones", "new_full", "scalar_tensor",
    "arange", "arange_start", "arange_start_step", "arange_out", "arange_start_out",
    "contiguous", "view", "view_dtype", "view_as", "reshape", "reshape_as", "as_strided", "as_strided_",
    "alias", "detach", "detach_", "flatten_using_ints", "unflatten_int", "unsqueeze", "unsqueeze_", "squeeze",
    "squeeze_", "squeeze_dim", "squeeze_dims", "squeeze__dim", "squeeze__dims", "expand", "expand_as",
    "permute", "transpose_int", "transpose_", "t", "t_", "narrow", "narrow_Tensor", "select_int",
    "slice_Tensor", "movedim_int", "movedim_intlist", "unfold", "split_Tensor", "split_with_sizes", "chunk",
    "unbind_int", "type_as", "to_device", "to_dtype", "to_dtype_layout", "to_other", "_to_copy", "clone",
    "copy_", "fill__Scalar", "fill__Tensor", "zero_", "resize_", "lift_fresh", "item", "_local_scalar_dense",
    "size_int", "stride_int", "numel", "sym_size_int", "sym_stride_int", "sym_numel", "sym_storage_offset",
    "is_contiguous", "is_contiguous_memory_format", "is_same_size", "_has_compatible_shallow_copy_type",
    "result_type_Tensor", "result_type_Scalar", "requires_grad_", "set_data", "data", "_version",
    "is_leaf", "output_nr", "retain_grad", "retains_grad",
})
# methods of at::Tensor / at::TensorBase that may be imported (most are inline; these are exported)
TENSOR_METHODS_OK = frozenset({
    "data_ptr", "const_data_ptr", "mutable_data_ptr", "item", "__dispatch_contiguous", "contiguous",
    "expect_contiguous", "to", "narrow", "select", "as_strided", "as_strided_symint", "new_empty",
    "new_empty_strided", "new_full", "new_zeros", "new_zeros_symint", "new_ones", "fill_", "zero_", "print",
    "toString", "name", "_version", "requires_grad_", "requires_grad", "set_requires_grad", "is_leaf",
    "output_nr", "data", "tensor_data", "variable_data", "enforce_invariants", "grad_fn", "is_view", "_base",
    "quantizer", "retain_grad", "retains_grad", "set_data", "grad_dtype", "set_grad_dtype", "_register_hook",
    "remove_hook", "sizes", "strides", "size", "stride", "sym_sizes", "sym_strides", "sym_size", "sym_stride",
    "numel", "sym_numel", "dim", "ndimension", "options", "dtype", "scalar_type", "device", "layout",
    "is_contiguous", "storage_offset", "element_size", "itemsize", "nbytes", "defined", "reset", "is_cuda",
    "is_cpu", "storage", "has_storage", "unsafeGetTensorImpl", "unsafeReleaseTensorImpl", "getIntrusivePtr",
    "use_count", "weak_use_count", "accessor", "packed_accessor32", "packed_accessor64",
    "generic_packed_accessor", "view", "reshape", "view_as", "reshape_as", "permute", "transpose", "t",
    "unsqueeze", "squeeze", "expand", "expand_as", "flatten", "unflatten", "detach", "alias", "clone",
    "copy_", "type_as", "cpu", "cuda", "toType", "is_floating_point", "is_complex", "get_device",
    "is_alias_of", "key_set", "suggest_memory_format", "is_non_overlapping_and_dense", "grad", "mutable_grad",
    "resize_", "slice", "unbind", "split", "chunk", "is_same", "is_sparse", "is_mkldnn",
    "is_quantized", "is_meta", "is_inference", "_is_zerotensor", "is_conj", "is_neg", "has_names",
})
# ATen namespaces whose functions compute (generated per-backend entry points and kernels)
_AT_COMPUTE_NS = {"native", "cpu", "meta", "compositeexplicitautograd", "compositeimplicitautograd",
                  "compositeexplicitautogradnonfunctional", "compositeimplicitautogradnestedtensor",
                  "functionalization", "functorch", "mps", "xpu", "hip", "sparse", "sparse_csr", "quantized",
                  "mkldnn", "mkl", "linalg", "fft", "special", "nested"}
_AT_CPU_OK = re.compile(r"^(is_\w+|get_cpu_capability|L1d_cache_size|L2_cache_size|init_cpuinfo)$")
_AT_CUDA_OK = {"getCurrentCUDAStream", "getDefaultCUDAStream", "getStreamFromPool", "getCurrentDeviceProperties",
               "getDeviceProperties", "device_count", "current_device", "set_device", "warp_size", "is_available",
               "detail", "CUDAStream", "getCUDADeviceAllocator", "stream_synchronize", "memcpy_and_sync",
               "check_device", "OptionalCUDAGuard", "CUDAGuard", "getNumGPUs"}
_AT_DIRECT_COMPUTE = re.compile(
    r"^(mm|bmm|matmul|addmm|addmv|addr|mv|dot|vdot|inner|outer|baddbmm|addbmm|chain_matmul|conv\w*|linear|"
    r"bilinear|softmax|log_softmax|einsum|tensordot|kron|cdist|\w*_norm|lstm\w*|gru\w*|rnn\w*|linalg_\w+|"
    r"fft_\w+|scaled_dot_product_attention|_\w+)$")
_AT_FILE = {"MapAllocator", "RefcountedMapAllocator", "new_shm_fd_storage", "share_memory_", "from_file"}
_AT_THREADS = {"launch", "intraop_launch", "intraop_launch_future", "TaskThreadPool", "PTThreadPool",
               "set_num_interop_threads"}
_BLAS_CXX_NS = {"dnnl", "mkldnn", "fbgemm", "ideep", "xnnpack", "mkl", "oneapi", "cublas", "cudnn_frontend",
                "Eigen_blas", "cutlass_library"}


def _classify_std(comps: list[str], name: str) -> Finding | None:
    rest = comps[2:] if len(comps) > 2 and comps[1] in ("__1", "__cxx11", "__fs") else comps[1:]
    if len(comps) > 2 and comps[1] == "__1" and comps[2] == "__fs":
        return Finding(name, FILE_IO, "std::filesystem")
    head = rest[0] if rest else ""
    if head in ("basic_ifstream", "basic_ofstream", "basic_fstream", "basic_filebuf", "__basic_file"):
        return Finding(name, FILE_IO, f"std::{head} opens files")
    if head == "filesystem":
        return Finding(name, FILE_IO, "std::filesystem")
    if head in ("thread", "jthread") and rest[1:2] != ["hardware_concurrency"]:
        return Finding(name, PROCESS, "std::thread creates threads")
    return None


def _classify_cxx(name: str, profile: str, imported: bool = True) -> Finding | None:
    comps = scope(name)
    if not comps:
        return None
    top = comps[0]
    if top == "std":
        return _classify_std(comps, name)
    if not imported:
        return None
    sub = comps[1] if len(comps) > 1 else ""
    third = comps[2] if len(comps) > 2 else ""
    if top in _BLAS_CXX_NS:
        return Finding(name, BLAS, f"calls into {top} (a BLAS/DNN library)")
    if top == "pybind11" or (top == "torch" and sub in ("python", "utils")):
        if profile == KERNEL:
            return Finding(name, PYTHON, "the kernel object calls Python bindings (only the bindings may)")
        return None
    if top == "torch":
        if sub == "jit":
            return Finding(name, ATEN_OP, "runs TorchScript or JIT operators")
        if sub == "nn":
            return Finding(name, ATEN_OP, "calls torch::nn modules")
        if sub == "autograd" and third in ("VariableType", "generated", "Engine", "impl_"):
            return Finding(name, ATEN_OP, "calls autograd operator entry points")
        if sub == "Library" or (sub == "detail" and third == "TorchLibraryInit"):
            return Finding(name, ATEN_OP, "registers operators")
        if sub == "serialize" or sub == "pickle_load" or sub == "pickle_save":
            return Finding(name, FILE_IO, "torch serialization reads or writes files")
        return None
    if top == "caffe2" and sub == "serialize":
        return Finding(name, FILE_IO, "reads model archives")
    if top == "c10":
        if sub in ("Dispatcher", "OperatorHandle", "TypedOperatorHandle", "KernelFunction") or (
                sub == "impl" and third in ("OperatorEntry", "BoxedKernelWrapper")):
            return Finding(name, ATEN_OP, "calls operators through the dispatcher")
        if sub in ("ThreadPool", "TaskThreadPoolBase", "TaskThreadPool"):
            return Finding(name, PROCESS, "runs work on a thread pool")
        return None
    if top != "at":
        return None
    if sub == "_ops":
        if third in ALLOWED_OPS:
            return None
        return Finding(name, ATEN_OP, f"calls the ATen operator {third or '?'}")
    if sub in ("Tensor", "TensorBase"):
        if not third or third in TENSOR_METHODS_OK:  # no name: constructor, destructor, operator
            return None
        return Finding(name, ATEN_OP, f"calls Tensor::{third}, an ATen operator")
    if sub == "cpu" and _AT_CPU_OK.match(third):
        return None
    if sub in _AT_COMPUTE_NS:
        return Finding(name, ATEN_OP, f"calls at::{sub}::{third or '?'}")
    if sub == "cuda":
        if third in _AT_CUDA_OK:
            return None
        return Finding(name, ATEN_OP, f"calls at::cuda::{third or '?'}")
    if sub in _AT_FILE:
        return Finding(name, FILE_IO, f"at::{sub} maps files or shared memory")
    if sub in _AT_THREADS:
        return Finding(name, PROCESS, f"at::{sub} runs work on another thread")
    if len(comps) == 2 and _AT_DIRECT_COMPUTE.match(sub) and name.startswith("_ZN2at"):
        return Finding(name, ATEN_OP, f"calls at::{sub}, an ATen operator")
    return None


def classify(symbol: str, profile: str = EXTENSION) -> Finding | None:
    """The finding for one *imported* symbol, or None when it is allowed."""
    _check_profile(profile)
    name = _strip_version(symbol)
    if name.startswith("_Z"):
        return _classify_cxx(name, profile)
    return _classify_c(name, profile)


def classify_export(symbol: str, profile: str = EXTENSION) -> Finding | None:
    """The finding for one *defined, exported* symbol: a kernel that defines `system` or `SGEMM` itself
    and calls it can be bound to the real one (the dynamic linker searches the global scope first)."""
    _check_profile(profile)
    name = _strip_version(symbol)
    if name.startswith("_Z"):
        found = _classify_cxx(name, profile, imported=False)
    else:
        if name.startswith("PyInit_") and profile == EXTENSION:
            return None
        found = _classify_c(name, profile)
    if found is None:
        return None
    return Finding(name, found.family, f"defines it, so calls can bind to the real one: {found.reason}")


# ----------------------------------------------------------------------------------------------------
# libraries and search paths
# ----------------------------------------------------------------------------------------------------

_NEEDED_OK = re.compile(
    r"^(libc|libm|libmvec|libstdc\+\+|libgcc_s|libpthread|librt|libdl|libatomic|libquadmath|libgomp|libiomp5|"
    r"libomp|libc10|libc10_cuda|libc10_hip|libtorch|libtorch_cpu|libtorch_cuda|libtorch_hip|libtorch_python|"
    r"libtorch_global_deps|libcudart|libcuda|ld-linux[\w.-]*|ld64)(-[0-9a-f]{8})?\.so(\.[\w.]+)?$")
_NEEDED_BLAS = re.compile(r"^lib(mkl|openblas|blas|cblas|lapack|lapacke|dnnl|mkldnn|cublas|cublasLt|cudnn|"
                          r"cusparse|cusolver|cufft|nvblas|flexiblas|blis|rocblas|hipblas|miopen|armpl|fbgemm)",
                          re.IGNORECASE)


def default_trusted_dirs() -> list[str]:
    """Where an honest build's run path may point: torch's library directory (found without importing
    torch)."""
    dirs: list[str] = []
    spec = importlib.util.find_spec("torch")
    for loc in (spec.submodule_search_locations or []) if spec else []:
        lib = Path(loc) / "lib"
        if lib.is_dir():
            dirs.append(str(lib.resolve()))
    return dirs


def _library_findings(info: ElfInfo, profile: str, trusted_dirs: Iterable[str] | None) -> list[Finding]:
    out: list[Finding] = []
    for lib in info.needed:
        base = os.path.basename(lib)
        if "/" in lib:
            out.append(Finding(lib, DYNAMIC_LOADING, "links a library by path"))
        elif _NEEDED_BLAS.match(base):
            out.append(Finding(lib, BLAS, "links a BLAS/LAPACK/DNN library"))
        elif base.startswith("libpython"):
            out.append(Finding(lib, PYTHON, "links the Python interpreter"))
        elif not _NEEDED_OK.match(base):
            out.append(Finding(lib, DYNAMIC_LOADING,
                               "links an unexpected library (only the C/C++ runtime, OpenMP, torch and the "
                               "CUDA runtime may be linked)"))
    trusted = {str(Path(d).resolve()) for d in (default_trusted_dirs() if trusted_dirs is None else trusted_dirs)}
    for entry in info.run_paths:
        resolved = None if "$" in entry else str(Path(entry).resolve())
        if resolved not in trusted:
            out.append(Finding(entry, DYNAMIC_LOADING, "searches libraries in an untrusted directory"))
    for tag in info.loader_tags:
        out.append(Finding(tag, DYNAMIC_LOADING, "asks the dynamic linker to load extra code (audit/filter)"))
    return out


# ----------------------------------------------------------------------------------------------------
# public
# ----------------------------------------------------------------------------------------------------


def _check_profile(profile: str) -> None:
    if profile not in PROFILES:
        raise ValueError(f"unknown audit profile {profile!r}: use one of {', '.join(PROFILES)}")


def audit(path: str | os.PathLike, profile: str = EXTENSION,
          trusted_dirs: Iterable[str] | None = None) -> list[Finding]:
    """Every banned import (and interposing export, linked library, run path) of the ELF file at `path`,
    sorted, one finding per symbol. Empty means the binary passes. Raises AuditError if unreadable."""
    _check_profile(profile)
    info = read_elf(path)
    found: dict[str, Finding] = {}
    for sym in info.imported:
        f = classify(sym, profile)
        if f is not None:
            found.setdefault(f.symbol, f)
    for sym in info.exported:
        f = classify_export(sym, profile)
        if f is not None:
            found.setdefault(f.symbol, f)
    for f in _library_findings(info, profile, trusted_dirs):
        found.setdefault(f.symbol, f)
    return sorted(found.values(), key=lambda f: (FAMILIES.index(f.family), f.symbol))


def audit_many(paths: Iterable[str | os.PathLike], profile: str = EXTENSION,
               trusted_dirs: Iterable[str] | None = None) -> dict[str | os.PathLike, list[Finding]]:
    """{path: findings} for each path, keyed by the objects passed in. Raises AuditError on the first
    file that cannot be read (a file that cannot be audited must not pass)."""
    dirs = None if trusted_dirs is None else list(trusted_dirs)
    return {p: audit(p, profile, dirs) for p in paths}


def summary(findings: list[Finding], limit: int = 3) -> str:
    """One line for a verdict: 'imports banned symbols: cblas_sgemm (blas), ... (+2 more)'."""
    if not findings:
        return "binary audit: nothing banned"
    shown = ", ".join(f"{f.symbol} ({f.family})" for f in findings[:limit])
    more = f" (+{len(findings) - limit} more)" if len(findings) > limit else ""
    return f"binary audit: banned symbols {shown}{more}"
