"""The binary audit reads what a built object imports: real g++ builds, honest and hostile."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from verifier.policy.binary_audit import (
    ATEN_OP,
    BLAS,
    DYNAMIC_LOADING,
    EXTENSION,
    FILE_IO,
    KERNEL,
    PROCESS,
    PYTHON,
    SOCKET,
    SYSCALL,
    AuditError,
    Finding,
    audit,
    audit_many,
    classify,
    exported_symbols,
    imported_symbols,
    needed_libraries,
    scope,
    summary,
)

GXX = shutil.which("g++")
needs_gxx = pytest.mark.skipif(GXX is None, reason="needs g++")


def build(tmp: Path, name: str, src: str, *flags: str, shared: bool = True) -> Path:
    cpp = tmp / f"{name}.cpp"
    cpp.write_text(src)
    out = tmp / (f"{name}.so" if shared else f"{name}.o")
    cmd = [GXX, "-fPIC", "-O2", *(["-shared"] if shared else ["-c"]), str(cpp), "-o", str(out), *flags]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return out


def families(findings: list[Finding]) -> dict[str, str]:
    return {f.symbol: f.family for f in findings}


HONEST = r"""
#include <vector>
#include <cstdlib>
#include <cmath>
extern "C" float kernel(const float* x, int n) {
  std::vector<float> tmp(x, x + n);
  float* buf = static_cast<float*>(std::malloc(sizeof(float) * n));
  float acc = 0.f;
  #pragma omp parallel for reduction(+:acc)
  for (int i = 0; i < n; ++i) { buf[i] = std::exp(tmp[i]) * 0.5f; acc += buf[i]; }
  std::free(buf);
  return acc;
}
"""

HOSTILE = {
    "cblas": ('extern "C" void cblas_sgemm(int, int, int, int, int, int, float, const float*, int, const float*, '
              'int, float, float*, int);\n'
              'extern "C" void k(float* a, float* c) { cblas_sgemm(101, 111, 111, 4, 4, 4, 1.f, a, 4, a, 4, 0.f, c, 4); }',
              "cblas_sgemm", BLAS),
    "mkl_upper": ('extern "C" void SGEMM(const char*, const char*, const int*, const int*, const int*, const float*,'
                  ' const float*, const int*, const float*, const int*, const float*, float*, const int*);\n'
                  'extern "C" void k(float* a, float* c, int* n, float* one) '
                  '{ SGEMM("N", "N", n, n, n, one, a, n, a, n, one, c, n); }',
                  "SGEMM", BLAS),
    "lapack": ('extern "C" void dgetrf_(int*, int*, double*, int*, int*, int*);\n'
               'extern "C" void k(double* a, int* n, int* piv, int* info) { dgetrf_(n, n, a, n, piv, info); }',
               "dgetrf_", BLAS),
    "dlopen": ('#include <dlfcn.h>\nextern "C" float k(float x) { void* h = dlopen("libm.so.6", RTLD_NOW); '
               'auto f = (float (*)(float))dlsym(h, "expf"); return f(x); }',
               "dlsym", DYNAMIC_LOADING),
    "fopen_macro": ('#include <cstdio>\n#define OPEN fopen\n#define GRAB(f) OPEN(f, "r")\n'
                    'extern "C" int k() { FILE* f = GRAB("/tmp/reference.pt"); return f ? fgetc(f) : -1; }',
                    "fopen", FILE_IO),
    "openat": ('#include <fcntl.h>\n#include <unistd.h>\n'
               'extern "C" long k(char* b) { int fd = openat(AT_FDCWD, "ref.bin", O_RDONLY); return read(fd, b, 8); }',
               "openat", FILE_IO),
    "pthread": ('#include <pthread.h>\nstatic void* run(void* p) { return p; }\n'
                'extern "C" int k() { pthread_t t; return pthread_create(&t, nullptr, run, nullptr); }',
                "pthread_create", PROCESS),
    "constructor_system": ('#include <cstdlib>\n__attribute__((constructor)) static void boot() '
                           '{ std::system("touch /tmp/pwned"); }\nextern "C" int k() { return 1; }',
                           "system", PROCESS),
    "ifstream": ('#include <fstream>\n#include <string>\n'
                 'extern "C" int k() { std::ifstream in("/tmp/ref.txt"); std::string s; in >> s; return (int)s.size(); }',
                 None, FILE_IO),
    "asm_label": ('extern "C" int run_it(const char*) __asm__("system");\n'
                  'extern "C" int k() { return run_it("id"); }',
                  "system", PROCESS),
    "socket": ('#include <sys/socket.h>\n#include <netinet/in.h>\n'
               'extern "C" int k() { int s = socket(AF_INET, SOCK_STREAM, 0); sockaddr_in a{}; '
               'return connect(s, (sockaddr*)&a, sizeof a); }',
               "connect", SOCKET),
    "syscall": ('#include <unistd.h>\n#include <sys/syscall.h>\n'
                'extern "C" long k() { return syscall(SYS_getpid); }',
                "syscall", SYSCALL),
    "fork_exec": ('#include <unistd.h>\nextern "C" int k() { if (fork() == 0) { char* a[] = {nullptr}; '
                  'execve("/bin/true", a, a); } return 0; }',
                  "fork", PROCESS),
    "std_thread": ('#include <thread>\nextern "C" void k() { std::thread t([] {}); t.detach(); }',
                   None, PROCESS),
    "py_import": ('extern "C" void* PyImport_ImportModule(const char*);\n'
                  'extern "C" void* k() { return PyImport_ImportModule("numpy"); }',
                  "PyImport_ImportModule", PYTHON),
    "interpose_system": ('extern "C" int system(const char* c) { return c != nullptr; }\n'
                         'extern "C" int k() { return system("id"); }',
                         "system", PROCESS),
}


@needs_gxx
def test_honest_object_passes_and_imports_what_it_uses(tmp_path):
    so = build(tmp_path, "honest", HONEST, "-fopenmp")
    imports = imported_symbols(so)
    assert {"malloc", "free"} <= imports
    assert any(s.startswith("GOMP_") for s in imports)  # OpenMP's runtime is allowed
    assert not any("@" in s for s in imports)  # version suffixes stripped
    assert audit(so) == []
    assert audit(so, KERNEL) == []
    assert "kernel" in exported_symbols(so)
    assert "libc.so.6" in needed_libraries(so)


@needs_gxx
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_each_banned_family_is_found_in_the_binary(tmp_path, case):
    src, symbol, family = HOSTILE[case]
    so = build(tmp_path, case, src)
    found = audit(so)
    assert found, f"{case}: nothing reported"
    fams = families(found)
    if symbol is not None:
        assert fams.get(symbol) == family, found
    else:
        assert family in fams.values(), found


@needs_gxx
def test_ifstream_and_thread_are_seen_through_their_mangled_names(tmp_path):
    so = build(tmp_path, "ifs", HOSTILE["ifstream"][0])
    syms = [f.symbol for f in audit(so) if f.family == FILE_IO]
    assert any(s.startswith(("_ZNSt14basic_ifstream", "_ZNSt13basic_filebuf", "_ZTVSt14basic_ifstream"))
               for s in syms), syms
    so = build(tmp_path, "thr", HOSTILE["std_thread"][0])
    assert any(f.symbol.startswith("_ZNSt6thread") for f in audit(so) if f.family == PROCESS)


@needs_gxx
def test_object_files_are_audited_from_their_symbol_table(tmp_path):
    honest = build(tmp_path, "honest_o", HONEST, "-fopenmp", shared=False)
    assert audit(honest, KERNEL) == []
    hostile = build(tmp_path, "dl_o", HOSTILE["dlopen"][0], shared=False)
    assert families(audit(hostile, KERNEL)) == {"dlopen": DYNAMIC_LOADING, "dlsym": DYNAMIC_LOADING}
    assert needed_libraries(hostile) == []


@needs_gxx
def test_python_c_api_is_banned_in_the_kernel_profile_only(tmp_path):
    src = ('extern "C" void* PyObject_GetAttrString(void*, const char*);\n'
           'extern "C" void* k(void* o) { return PyObject_GetAttrString(o, "x"); }')
    so = build(tmp_path, "pyattr", src)
    assert audit(so, EXTENSION) == []
    assert families(audit(so, KERNEL)) == {"PyObject_GetAttrString": PYTHON}


@needs_gxx
def test_hidden_definitions_do_not_interpose(tmp_path):
    src = ('extern "C" __attribute__((visibility("hidden"))) int system(const char* c) { return c != nullptr; }\n'
           'extern "C" int k() { return system("id"); }')
    so = build(tmp_path, "hidden", src)
    assert "system" not in imported_symbols(so) | exported_symbols(so)
    assert audit(so) == []


@needs_gxx
def test_linked_libraries_and_run_paths_are_checked(tmp_path):
    helper = build(tmp_path, "libhelper", 'extern "C" int helper() { return 3; }')
    src = 'extern "C" int helper();\nextern "C" int k() { return helper(); }'
    so = build(tmp_path, "user", src, f"-L{tmp_path}", "-lhelper", "-Wl,-rpath,$ORIGIN")
    assert helper.name in needed_libraries(so)
    fams = families(audit(so))
    assert fams == {"libhelper.so": DYNAMIC_LOADING, "$ORIGIN": DYNAMIC_LOADING}
    # a directory the caller trusts is fine; the unexpected library is still reported
    so2 = build(tmp_path, "user2", src, f"-L{tmp_path}", "-lhelper", f"-Wl,-rpath,{tmp_path}")
    assert str(tmp_path) in families(audit(so2))
    assert families(audit(so2, trusted_dirs=[str(tmp_path)])) == {"libhelper.so": DYNAMIC_LOADING}


@needs_gxx
def test_stripped_section_headers_do_not_hide_imports(tmp_path):
    so = build(tmp_path, "dl", HOSTILE["dlopen"][0])
    data = bytearray(so.read_bytes())
    data[0x28:0x30] = bytes(8)  # e_shoff = 0
    data[0x3C:0x40] = bytes(4)  # e_shnum = e_shstrndx = 0: only the loader's view (the dynamic segment) is left
    stripped = tmp_path / "dl_noshdr.so"
    stripped.write_bytes(bytes(data))
    assert {"dlopen", "dlsym"} <= {f.symbol for f in audit(stripped)}


def _packed_relocations(tmp_path, name: str, source: str) -> Path:
    """`source` linked with packed relative relocations (DT_RELR: binutils 2.38+, glibc 2.36+), or a skip."""
    from elftools.elf.dynamic import DynamicSegment
    from elftools.elf.elffile import ELFFile

    try:
        so = build(tmp_path, name, source, "-Wl,-z,pack-relative-relocs")
    except (subprocess.CalledProcessError, AssertionError):
        pytest.skip("this toolchain cannot link packed relative relocations")
    with open(so, "rb") as fh:
        tags = {str(t.entry.d_tag) for seg in ELFFile(fh).iter_segments() if isinstance(seg, DynamicSegment)
                for t in seg.iter_tags()}
    if not tags & {"DT_RELR", "36"}:
        pytest.skip("the linker took the flag but wrote no DT_RELR table")
    return so


@needs_gxx
def test_packed_relative_relocations_are_read_not_refused(tmp_path):
    """`-z pack-relative-relocs` (a distribution's default on some toolchains) puts a DT_RELR table in the
    dynamic segment; its entries are addresses with no symbol. Reading one for its symbol index refused an
    honest kernel as a malformed file; a hostile one must still be read through it, section headers or not."""
    honest = _packed_relocations(tmp_path, "honest_relr", HONEST + "\nstatic int v = 1; int* vp = &v; int* vq = &v;\n")
    assert audit(honest) == []
    assert "kernel" in exported_symbols(honest)
    hostile = _packed_relocations(tmp_path, "dl_relr", HOSTILE["dlopen"][0] + "\nstatic int w = 1; int* wp = &w;\n")
    assert {"dlopen", "dlsym"} <= {f.symbol for f in audit(hostile)}
    data = bytearray(hostile.read_bytes())
    data[0x28:0x30] = bytes(8)
    data[0x3C:0x40] = bytes(4)
    stripped = tmp_path / "dl_relr_noshdr.so"
    stripped.write_bytes(bytes(data))
    assert {"dlopen", "dlsym"} <= {f.symbol for f in audit(stripped)}


@needs_gxx
def test_unreadable_inputs_raise_one_line_audit_errors(tmp_path):
    so = build(tmp_path, "ok", HONEST)
    truncated = tmp_path / "trunc.so"
    truncated.write_bytes(so.read_bytes()[:100])
    text = tmp_path / "notes.txt"
    text.write_text("not a binary")
    for bad, words in ((truncated, "malformed"), (text, "not an ELF"), (tmp_path / "missing.so", "cannot read")):
        with pytest.raises(AuditError) as info:
            audit(bad)
        msg = str(info.value)
        assert words in msg and "\n" not in msg


@needs_gxx
def test_audit_many_keys_by_path(tmp_path):
    good = build(tmp_path, "good", HONEST)
    bad = build(tmp_path, "bad", HOSTILE["syscall"][0])
    result = audit_many([good, bad])
    assert list(result) == [good, bad]
    assert result[good] == [] and families(result[bad]) == {"syscall": SYSCALL}
    assert "syscall (syscall)" in summary(result[bad]) and summary([]) == "binary audit: nothing banned"


# --- pure classification (no compiler) ---------------------------------------------------------------

# what an honest pybind11 + torch/extension.h build imports from the Python C API (measured, torch 2.x)
PYBIND11_IMPORTS = [
    "PyEval_AcquireThread", "PyEval_GetBuiltins", "PyEval_SaveThread", "PyFrame_GetBack", "PyFrame_GetCode",
    "PyGILState_Ensure", "PyInterpreterState_GetDict", "PyModuleDef_Init", "PyModule_AddObject",
    "PyObject_CallFunctionObjArgs", "PyObject_GetAttrString", "PyType_Ready", "PyThread_tss_create",
    "_PyObject_GetDictPtr", "_PyType_Lookup", "_Py_Dealloc", "_PyThreadState_UncheckedGet", "Py_GetVersion",
]


@pytest.mark.parametrize("symbol", PYBIND11_IMPORTS)
def test_what_pybind11_bindings_import_passes_the_extension_profile(symbol):
    assert classify(symbol, EXTENSION) is None
    assert classify(symbol, KERNEL).family == PYTHON


@pytest.mark.parametrize("symbol", ["PyImport_ImportModule", "PyImport_Import", "PyRun_SimpleString",
                                    "Py_CompileString", "PyEval_EvalCode", "PySys_GetObject", "_PyImport_FindExtensionObject"])
def test_python_import_and_execution_are_banned_everywhere(symbol):
    assert classify(symbol, EXTENSION).family == PYTHON


ALLOWED = [
    # allocation, views and metadata an honest ATen kernel imports (measured on a real build)
    "_ZN2at4_ops10empty_like4callERKNS_6TensorESt8optionalIN3c1010ScalarTypeEES5_INS6_6LayoutEES5_INS6_6DeviceEES5_IbES5_INS6_12MemoryFormatEE",
    "_ZN2at4_ops19empty_memory_format4callEN3c108ArrayRefINS2_6SymIntEEESt8optionalINS2_10ScalarTypeEES6_INS2_6LayoutEES6_INS2_6DeviceEES6_IbES6_INS2_12MemoryFormatEE",
    "_ZN2at4_ops5zeros4callEN3c108ArrayRefINS2_6SymIntEEESt8optionalINS2_10ScalarTypeEES6_INS2_6LayoutEES6_INS2_6DeviceEES6_IbE",
    "_ZN2at4_ops4view4callERKNS_6TensorEN3c108ArrayRefINS5_6SymIntEEE",
    "_ZN2at4_ops7reshape4callERKNS_6TensorEN3c108ArrayRefINS5_6SymIntEEE",
    "_ZNK2at10TensorBase21__dispatch_contiguousEN3c1012MemoryFormatE",
    "_ZNK2at10TensorBase8data_ptrIfEEPT_v",
    "_ZN2at6TensorC1Ev",
    "_ZN3c1015SmallVectorBaseIjE8grow_podEPKvmm",
    "_ZN3c106detail14torchCheckFailEPKcS2_jS2_",
    "_ZN3c1019UndefinedTensorImpl10_singletonE",
    "_ZN2at13globalContextEv",
    "_ZN2at6detail9empty_cpuEN3c108ArrayRefIlEENS1_10ScalarTypeEbNS1_12MemoryFormatE",
    "_ZN2at4cuda20getCurrentCUDAStreamEa",
    "_ZN2at3cpu18is_avx2_supportedEv",
    "_ZNSt7__cxx1119basic_ostringstreamIcSt11char_traitsIcESaIcEEC1Ev",
    "GOMP_parallel", "omp_get_thread_num", "omp_get_num_threads", "expf", "memcpy", "Sleef_expf8_u10",
    "fprintf", "fputc", "fflush", "pthread_mutex_lock", "__cxa_atexit", "_Unwind_Resume", "strlen",
    "posix_memalign", "aligned_alloc", "getenv", "_ZNSt6thread20hardware_concurrencyEv",
]


@pytest.mark.parametrize("symbol", ALLOWED)
def test_allocation_metadata_and_runtime_stay_allowed(symbol):
    assert classify(symbol, KERNEL) is None


BANNED = {
    "_ZN2at4_ops6matmul4callERKNS_6TensorES4_": ATEN_OP,
    "_ZN2at4_ops2mm10redispatchEN3c1014DispatchKeySetERKNS_6TensorES6_": ATEN_OP,
    "_ZN2at4_ops10add_Tensor4callERKNS_6TensorES4_RKN3c106ScalarE": ATEN_OP,
    "_ZN2at6native2mmERKNS_6TensorES3_": ATEN_OP,
    "_ZN2at3cpu2mmERKNS_6TensorES3_": ATEN_OP,
    "_ZN2at25compositeimplicitautograd6matmulERKNS_6TensorES3_": ATEN_OP,
    "_ZN2at6matmulERKNS_6TensorES3_": ATEN_OP,
    "_ZN2at6Tensor5relu_Ev": ATEN_OP,
    "_ZNK2at6Tensor4triuEl": ATEN_OP,
    "_ZN2at4cuda4blas4gemmIfEEvcclllN3c1016opmath_type": ATEN_OP,
    "_ZN3c1010Dispatcher17findSchemaOrThrowEPKcS2_": ATEN_OP,
    "_ZN5torch3jit4loadERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE": ATEN_OP,
    "_ZN2at12MapAllocatorC1ESt17basic_string_viewIcSt11char_traitsIcEEim": FILE_IO,
    "_ZNSt10filesystem6removeERKNS_7__cxx114pathE": FILE_IO,
    "_ZNSt13basic_filebufIcSt11char_traitsIcEE4openEPKcSt13_Ios_Openmode": FILE_IO,
    "_ZNSt14basic_ofstreamIcSt11char_traitsIcEEC1EPKcSt13_Ios_Openmode": FILE_IO,
    "_ZN4dnnl6matmulC1ERKNS0_14primitive_descE": BLAS,
    "_ZN6fbgemm9fbgemmPacked": BLAS,
    "sgemm_": BLAS, "SGEMM": BLAS, "sgemm": BLAS, "cblas_dgemm": BLAS, "cblas_sdot": BLAS, "saxpy_": BLAS,
    "isamax_": BLAS, "SPOTRF": BLAS, "LAPACKE_sgetrf": BLAS, "mkl_serv_intel_cpu_true": BLAS,
    "MKL_Set_Num_Threads": BLAS, "dnnl_sgemm": BLAS, "xnn_create_convolution2d_nhwc_f32": BLAS,
    "cublasSgemm_v2": BLAS, "cudnnConvolutionForward": BLAS, "sbgemm_": BLAS, "cblas_gemm_bf16bf16f32": BLAS,
    "__open_2": FILE_IO, "__openat64_2": FILE_IO, "open64": FILE_IO, "__read_chk": FILE_IO, "pwrite64": FILE_IO,
    "glob64": FILE_IO, "futimens": FILE_IO, "utimensat": FILE_IO, "readdir64": FILE_IO, "creat": FILE_IO,
    "unlinkat": FILE_IO, "rename": FILE_IO, "shm_open": FILE_IO, "memfd_create": FILE_IO,
    "fopen@GLIBC_2.2.5": FILE_IO, "dprintf": FILE_IO, "__dprintf_chk": FILE_IO, "vdprintf": FILE_IO, "accept4": SOCKET, "recvfrom": SOCKET, "sendto": SOCKET,
    "vfork": PROCESS, "posix_spawnp": PROCESS, "execvp": PROCESS, "popen": PROCESS, "clone3": PROCESS,
    "_Fork": PROCESS, "setpriority": PROCESS, "process_vm_readv": PROCESS, "setenv": PROCESS,
    "dlmopen": DYNAMIC_LOADING, "dl_iterate_phdr": DYNAMIC_LOADING, "__libc_dlopen_mode": DYNAMIC_LOADING,
    "_r_debug": DYNAMIC_LOADING,
}


@pytest.mark.parametrize("symbol", sorted(BANNED))
def test_banned_names_are_classified(symbol):
    found = classify(symbol)
    assert found is not None and found.family == BANNED[symbol], found
    assert found.symbol == symbol.split("@")[0]


def test_scope_reads_mangled_prefixes_without_demangling():
    assert scope("_ZN2at4_ops2mm4callERKNS_6TensorES4_") == ["at", "_ops", "mm", "call"]
    assert scope("_ZNKSt14basic_ifstreamIcSt11char_traitsIcEE7is_openEv") == ["std", "basic_ifstream"]
    assert scope("_ZTVSt6thread") == ["std", "thread"]
    assert scope("_Z5sgemmv") == ["sgemm"]
    assert scope("memcpy") == [] and scope("_Z") == []


def test_unknown_profile_is_a_one_line_error():
    with pytest.raises(ValueError, match="unknown audit profile"):
        classify("memcpy", "strict")


# --- real ATen and pybind11 builds (slow: torch headers) ---------------------------------------------

def _torch_flags() -> list[str]:
    from torch.utils.cpp_extension import include_paths

    flags = ["-std=c++17", "-O0"]
    for inc in include_paths():
        flags += ["-isystem", inc]
    return flags


def _compile_all(jobs: list[tuple[Path, list[str]]]) -> None:
    """Compile in parallel (two cores): each job is (output, full g++ argv after the compiler)."""
    procs = [(out, subprocess.Popen([GXX, *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
             for out, argv in jobs]
    for out, proc in procs:
        log, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, log[-3000:]
        assert out.exists()


ATEN_HONEST = r"""
#include <ATen/ATen.h>
at::Tensor relu(const at::Tensor& x) {
  auto xc = x.contiguous();
  auto out = at::empty_like(xc);
  auto scratch = at::empty({xc.numel()}, xc.options());
  auto z = at::zeros({4}, xc.options());
  const float* in = xc.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t i = 0; i < xc.numel(); ++i) o[i] = in[i] > 0.0f ? in[i] : 0.0f;
  (void)scratch; (void)z; (void)xc.sizes(); (void)xc.stride(0);
  return out.view({-1}).reshape(xc.sizes());
}
"""
ATEN_MATMUL = r"""
#include <ATen/ATen.h>
at::Tensor mm(const at::Tensor& a, const at::Tensor& b) {
  auto out = at::empty({a.size(0), b.size(1)}, a.options());
  (void)out.data_ptr<float>();
  return at::matmul(a, b);
}
"""


@pytest.mark.slow
@needs_gxx
def test_real_aten_objects_honest_passes_matmul_is_found(tmp_path):
    pytest.importorskip("torch")
    flags = _torch_flags()
    jobs = []
    for name, src in (("honest", ATEN_HONEST), ("matmul", ATEN_MATMUL)):
        (tmp_path / f"{name}.cpp").write_text(src)
        out = tmp_path / f"{name}.o"
        jobs.append((out, [*flags, "-fPIC", "-c", str(tmp_path / f"{name}.cpp"), "-o", str(out)]))
    _compile_all(jobs)
    honest, matmul = (out for out, _ in jobs)
    imports = imported_symbols(honest)
    assert any(s.startswith("_ZN2at4_ops") for s in imports)  # allocation goes through at::_ops too
    assert any("data_ptr" in s for s in imports)
    assert audit(honest, KERNEL) == []
    found = audit(matmul, KERNEL)
    assert [(f.family, f.reason) for f in found] == [(ATEN_OP, "calls the ATen operator matmul")]


EXTENSION_SRC = r"""
#include <torch/extension.h>
torch::Tensor kernel_forward(torch::Tensor x) {
  auto xc = x.contiguous();
  auto out = torch::empty_like(xc);
  const float* in = xc.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t i = 0; i < xc.numel(); ++i) o[i] = in[i] > 0.0f ? in[i] : 0.0f;
#ifdef EVIL
  auto np = pybind11::module_::import("numpy");
#endif
  return out;
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("kernel_forward", &kernel_forward, "k"); }
"""


@pytest.mark.slow
@needs_gxx
def test_real_pybind11_extension_passes_and_module_import_is_found(tmp_path, build_root):
    """A real pybind11 extension, built the way the verifier builds a source with its own PYBIND11_MODULE
    (`InlineBuilder`'s single layout: `torch/extension.h` and pybind11 whole, linked against libtorch and
    libtorch_python), passes the extension profile; the same source calling `module_::import` does not.
    Built behind the precompiled `torch/extension.h` the suite's root was seeded with (about 10 s each on 2
    cores; two standalone -O0 builds of the header took 33-154 s), in a root of its own."""
    pytest.importorskip("torch")
    from verifier.build.split_build import BIND_FLAGS, InlineBuilder

    builder = InlineBuilder(tmp_path / "root", timeout_s=600.0, shared=build_root / "shared")
    for name, source in (("honest", EXTENSION_SRC), ("evil", "#define EVIL\n" + EXTENSION_SRC)):
        # -O1 (BIND_FLAGS) is what the seeded header was built with; `EVIL` is in the source, not a flag, so
        # both modules use that one header
        builder.load_inline(name=name, cpp_sources=source, extra_cflags=list(BIND_FLAGS))
    assert [r.layout for r in builder.records] == ["single", "single"]
    honest, evil = (next((tmp_path / "root" / "ext").glob(f"*/{name}.so")) for name in ("honest", "evil"))
    assert any(s.startswith("Py") for s in imported_symbols(honest))
    assert audit(honest, EXTENSION) == [], summary(audit(honest, EXTENSION))
    assert families(audit(evil, EXTENSION)) == {"PyImport_ImportModule": PYTHON}
    # the kernel profile is for the kernel's own object, not for bindings
    assert audit(honest, KERNEL)


@needs_gxx
def test_blas_library_and_loader_audit_entries_are_reported(tmp_path):
    # a stand-in libopenblas.so: the audit judges the link, not what the library really contains
    build(tmp_path, "libopenblas", 'extern "C" void cblas_sgemm() {}')
    src = 'extern "C" void cblas_sgemm();\nextern "C" void k() { cblas_sgemm(); }'
    so = build(tmp_path, "blas_user", src, f"-L{tmp_path}", "-lopenblas")
    assert families(audit(so)) == {"libopenblas.so": BLAS, "cblas_sgemm": BLAS}
    audited = build(tmp_path, "audited", 'extern "C" int k() { return 1; }', "-Wl,--audit=libspy.so")
    found = audit(audited)
    assert [f.family for f in found] == [DYNAMIC_LOADING] and found[0].symbol == "DT_AUDIT=libspy.so"
