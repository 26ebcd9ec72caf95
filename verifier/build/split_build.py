"""Fast, cached builds of `load_inline` C++ extensions for the CPU backend.

Plain `load_inline` compiles the person's kernel together with pybind11 and the whole torch C++ API
in one translation unit: about 15-40 s on two cores. We split it:

* the kernel TU sees the tiny Tensor first (`verifier.build.tiny_tensor`: a torch-shaped header with no torch
  header behind it, precompiled; about 0.4 s), and when the kernel uses more of torch than it declares,
  a light `torch/extension.h` shim (ATen only, precompiled; about 2 s);
* the pybind TU (bindings for the declared functions) depends only on the module name and the
  function signatures, so it is cached across versions of a kernel;
* every artefact lives under a directory keyed by a hash of sources, flags, compiler and torch version,
  so an unchanged source is a cache hit.

If the shim cannot serve a kernel (it uses `py::`, full `torch::` API, defines its own module...),
the build falls back to the standard single-TU layout, still cached by hash.

The declarations and binding sources are `verifier.build.bindings` (text only); which compiler runs, with
which torch paths, and its identity in artefact keys are `verifier.build.toolchain`; the shared artefacts the
trusted side builds on request or ahead of time are `verifier.build.shared_artefacts`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from verifier.build.bindings import (  # noqa: F401 - re-exported: what other code imports from verifier.build.split_build
    Signature,
    _bindings,
    _shared_bindings,
    _strip_comments,
    _trampolines,
    extract_declarations,
    signature_of,
)
from verifier.build.diagnostics import first_error, parse_diagnostics
from verifier.build.locks import locked, try_lock, unlock, wait_for_lock
from verifier.build.tiny_tensor import BRIDGE_SOURCE, TINY_HEADER, TINY_SHADOWED, syntax_errors_only
from verifier.build.toolchain import (  # noqa: F401 - re-exported: what other code imports from verifier.build.split_build
    SANDBOX_PATH,
    _compiler,
    _compiler_id,
    _kill_compiler,
    _torch_paths,
    _with_sandbox_compiler,
    sandbox_compiler,
)
from verifier.keys import content_key
from verifier.sandbox import lifetime

# torch:: spellings kernels use, over ATen (shared by the CPU shim and the light CUDA shim).
TORCH_NAMESPACE = """namespace torch {
using namespace at;
using std::nullopt;
using std::optional;
using Dtype = at::ScalarType;
constexpr auto kUInt8 = at::kByte;
constexpr auto kInt8 = at::kChar;
constexpr auto kInt16 = at::kShort;
constexpr auto kInt32 = at::kInt;
constexpr auto kInt64 = at::kLong;
constexpr auto kFloat16 = at::kHalf;
constexpr auto kFloat32 = at::kFloat;
constexpr auto kFloat64 = at::kDouble;
constexpr auto kF16 = kFloat16;
constexpr auto kF32 = kFloat32;
constexpr auto kF64 = kFloat64;
constexpr auto kI32 = kInt32;
constexpr auto kI64 = kInt64;
}
"""

SHIM_HEADER = """#pragma once
// EvoKernel light shim: kernels see ATen through torch:: without pybind11 or the torch C++ API.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <cmath>
#include <vector>
#include <algorithm>
""" + TORCH_NAMESPACE

FULL_PCH_HEADER = "#pragma once\n#include <torch/extension.h>\n"

# The tiny Tensor (verifier.build.tiny_tensor) as the CPU kernel TU's torch/extension.h, tried before the ATen
# shim: no torch header at all, so a changed kernel compiles in about 0.4 s behind its precompiled
# header instead of 1.8-2 s (GCC instantiates the ATen shim's pending templates in every TU). The
# include guard, not `#pragma once`, makes the precompiled copy and the shadowed headers one header.
TINY_CPU_HEADER = ("#ifndef EVK_TINY_TENSOR_H\n#define EVK_TINY_TENSOR_H\n" + TINY_HEADER + TORCH_NAMESPACE
                   + "#endif  // EVK_TINY_TENSOR_H\n")

# What the verifier compiles into or beside every kernel (the tiny Tensor, its bridge, the shims): part of every
# kernel's key, so a verifier whose headers changed never links a kernel object built behind the old ones (a
# cached kernel kept the tiny Tensor's old bridge, reference counts and all, after it was fixed: session 25).
KERNEL_TEXTS_KEY = content_key("the texts compiled with every kernel", TINY_HEADER, BRIDGE_SOURCE, SHIM_HEADER, TORCH_NAMESPACE)

_FALLBACK_MARKERS = ("py::", "pybind11", "PYBIND11_MODULE", "torch::autograd", "torch::nn", "torch::jit", "torch/torch.h")


class BuildError(Exception):
    """A compiler or linker failure, with parsed diagnostics."""

    def __init__(self, message: str, diagnostics: list[str], log: str, source: str = ""):
        super().__init__(message)
        self.diagnostics = diagnostics
        self.log = log
        self.source = source


@dataclass
class BuildRecord:
    """What one build did: for the compile gate's detail and for the speed benchmark."""

    name: str
    key: str
    cache_hit: bool
    layout: str
    seconds: float
    steps: list[str] = field(default_factory=list)


def _as_list(sources: str | list[str] | None) -> list[str]:
    if sources is None:
        return []
    return [sources] if isinstance(sources, str) else list(sources)


def _run(cmd: list[str], cwd: Path, timeout: float) -> tuple[int, str]:
    try:
        proc = lifetime.run(cmd, cwd=cwd, text=True, timeout=timeout, own_group=False)
    except subprocess.TimeoutExpired as exc:
        raise BuildError(f"the build timed out after {timeout:.0f} s", [], str(exc)) from exc
    except OSError as exc:
        raise BuildError(f"the compiler could not be started ({exc}); install g++", [], str(exc)) from exc
    log = proc.stdout + proc.stderr
    if proc.returncode != 0 and "No space left on device" in log:
        # A full disk reads as a broken header or a person's error otherwise (a CI run lost two tests to it).
        raise BuildError(f"no space left on the disk holding {cwd}: free some, or set EVOKERNEL_BUILD_DIR "
                         "to a folder on a disk with room", parse_diagnostics(log), log)
    return proc.returncode, log


def _put_text(path: Path, text: str) -> None:
    """Write `path` whole or not at all, from any thread: the temp name carries the process and the
    thread (threads of one process filling a fresh build root renamed each other's temp file away, and
    the loser's build failed with FileNotFoundError)."""
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}.{threading.get_native_id()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def _ask(request, kind: str, spec: dict) -> bool:
    """Send a request without waiting for its answer; False when the requester cannot do that."""
    try:
        request(kind, spec, wait=False)
    except TypeError:
        return False
    except Exception:  # noqa: BLE001 - a parent that went away: build locally instead
        return False
    return True


class InlineBuilder:
    """Builds `load_inline` extensions under `root`, keyed by content hash."""

    def __init__(self, root: str | Path, timeout_s: float = 180.0, shared: str | Path | None = None,
                 request=None, tiny_headers: bool = True):
        """`root` is where this builder writes; `shared`, when given, holds precompiled headers and
        bindings that only the trusted side builds (read-only inside a sandbox). A missing one is asked
        for through `request(kind, spec)` and built locally if it still does not appear."""
        self.root = Path(root)
        self.shared = Path(shared) if shared else None
        self.request = request
        self.timeout_s = timeout_s
        self.tiny_headers = tiny_headers
        self.records: list[BuildRecord] = []
        self._steps: list[str] = []  # how the build in progress went, for its record
        self._includes, self._libdirs = _torch_paths()
        import torch

        self._env_key = (_compiler_id(), torch.__version__, sys.version_info[:2])

    # flags -------------------------------------------------------------------------------------
    def _base_flags(self, torch_headers: bool = True) -> list[str]:
        """Flags of every C++ compile here; without `torch_headers` no torch include path, so a kernel
        behind the tiny Tensor that includes a torch header it does not shadow fails (and is retried)."""
        flags = ["-fPIC", "-std=c++20", "-DTORCH_API_INCLUDE_EXTENSION_H"]
        for inc in self._includes if torch_headers else ():
            flags += ["-isystem", inc]
        return flags

    def _ldflags(self, extra: list[str]) -> list[str]:
        flags = ["-shared"]
        for d in self._libdirs:
            flags += [f"-L{d}", f"-Wl,-rpath,{d}"]
        return flags + ["-lc10", "-ltorch_cpu", "-ltorch", "-ltorch_python"] + extra

    # precompiled headers -----------------------------------------------------------------------
    def _pch(self, kind: str, header: str, cflags: list[str], deadline: float) -> Path:
        """A directory holding `<kind>.h` and its .gch for exactly these flags (built once, shared)."""
        torch_headers = kind != "evk_tiny"
        key = content_key(kind, header, cflags, self._env_key)
        shared = self._from_shared(Path("pch") / f"{kind}-{key}", f"{kind}.h.gch", "pch",
                                   {"kind": kind, "cflags": cflags})
        if shared is not None:
            return shared
        d = self.root / "pch" / f"{kind}-{key}"
        gch = d / f"{kind}.h.gch"
        if gch.exists():
            return d
        with locked(self.root / "pch" / f"{kind}-{key}.lock"):
            if gch.exists():
                return d
            d.mkdir(parents=True, exist_ok=True)
            hdr = d / f"{kind}.h"
            hdr.write_text(header)
            tmp = d / f"{kind}.h.gch.tmp{os.getpid()}"
            code, log = _run(
                [_compiler(), *self._base_flags(torch_headers), *cflags, "-x", "c++-header", str(hdr), "-o", str(tmp)],
                d,
                max(5.0, deadline - time.monotonic()),
            )
            if code != 0:
                with contextlib.suppress(OSError):
                    tmp.unlink()
                diags = parse_diagnostics(log)
                raise BuildError(f"the precompiled header {kind} failed to build: {first_error(diags, log)}",
                                 diags, log)
            os.replace(tmp, gch)
        return d

    def _from_shared(self, rel: Path, artefact: str, kind: str, spec: dict) -> Path | None:
        """The trusted copy of an artefact, asking the trusted side to build it when it is missing."""
        if self.shared is None:
            return None
        d = self.shared / rel
        if (d / artefact).exists():
            return d
        if self.request is not None:
            with contextlib.suppress(Exception):
                self.request(kind, spec)
            if (d / artefact).exists():
                return d
        return None

    # public ------------------------------------------------------------------------------------
    def kernel_key(self, name: str, source: str, fns: list[str], cflags: list[str], ldflags: list[str]) -> str:
        """A kernel's build folder: its source, functions and flags, the toolchain, and the verifier's own
        texts compiled with it (`KERNEL_TEXTS_KEY`)."""
        return content_key(name, source, fns, cflags, ldflags, self._env_key, KERNEL_TEXTS_KEY)

    def load_inline(
        self,
        name: str,
        cpp_sources: str | list[str],
        functions: str | list[str] | None = None,
        extra_cflags: list[str] | None = None,
        extra_ldflags: list[str] | None = None,
        extra_include_paths: list[str] | None = None,
        **_ignored: object,
    ):
        """Drop-in for `torch.utils.cpp_extension.load_inline` (CPU sources)."""
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name or ""):
            raise BuildError(f"extension name {name!r} is not a valid identifier", [], "")
        source = "\n".join(_as_list(cpp_sources))
        fns = [functions] if isinstance(functions, str) else list(functions or [])
        cflags = list(extra_cflags or [])
        for inc in extra_include_paths or []:
            cflags += ["-I", inc]
        ldflags = list(extra_ldflags or [])
        key = self.kernel_key(name, source, fns, cflags, ldflags)
        out_dir = self.root / "ext" / key
        so_path = out_dir / f"{name}.so"
        start = time.monotonic()
        deadline = start + self.timeout_s
        if so_path.exists():
            self.records.append(BuildRecord(name, key, True, "cached", time.monotonic() - start))
            return _import_so(name, so_path)
        with locked(self.root / "ext" / f"{key}.lock"):
            if not so_path.exists():
                out_dir.mkdir(parents=True, exist_ok=True)
                self._steps = []
                layout = self._build(name, source, fns, cflags, ldflags, out_dir, so_path, deadline)
                self.records.append(BuildRecord(name, key, False, layout, time.monotonic() - start, self._steps))
            else:
                self.records.append(BuildRecord(name, key, True, "cached", time.monotonic() - start))
        return _import_so(name, so_path)

    def _build(self, name, source, fns, cflags, ldflags, out_dir: Path, so_path: Path, deadline: float) -> str:
        decls = extract_declarations(source, fns) if fns else None
        sigs = [signature_of(d, fn) for d, fn in zip(decls, fns, strict=True)] if decls else None
        use_shim = sigs is not None and all(sigs) and not any(m in source for m in _FALLBACK_MARKERS)
        if use_shim:
            try:
                self._build_split(name, source, fns, sigs, cflags, ldflags, out_dir, so_path, deadline)
                return "split"
            except BuildError as exc:
                if not any(tok in exc.log for tok in ("torch::", "py::", "pybind11", "‘torch’", "'torch'")):
                    raise
        self._build_single(name, source, fns, cflags, ldflags, out_dir, so_path, deadline)
        return "single"

    def _build_split(self, name, source, fns, sigs, cflags, ldflags, out_dir, so_path, deadline) -> None:
        shim_dir = self.root / "shim"
        (shim_dir / "torch").mkdir(parents=True, exist_ok=True)
        shim = shim_dir / "torch" / "extension.h"
        if not shim.exists() or shim.read_text() != SHIM_HEADER:
            _put_text(shim, SHIM_HEADER)
        # The bindings compile in the background while the kernel (and, once, its PCH) compiles: two cores.
        with self._binding_object(sigs, deadline) as (bobj, module):
            kobj = out_dir / "kernel.o"
            if not self._compile_tiny(source, fns, sigs, cflags, out_dir, kobj, deadline):
                pch_dir = self._pch("evk_shim", SHIM_HEADER, cflags, deadline)
                code, log, took = self._compile_kernel_tu("evk_shim", pch_dir, shim_dir, True, source, fns, sigs,
                                                          cflags, kobj, deadline)
                if code != 0:
                    diags = parse_diagnostics(log, line_offset=1)
                    raise BuildError(first_error(diags, log), diags, log, source)
                self._steps.append(f"kernel (ATen shim) {took:.2f} s")
        self._link([kobj, bobj], ldflags + _omp_ld(cflags), so_path, deadline)
        (out_dir / "module.txt").write_text(module)

    def _tiny_dir(self) -> Path:
        """`root/shim-tiny`: the tiny Tensor as torch/extension.h and the torch headers it shadows."""
        tiny_dir = self.root / "shim-tiny"
        forward = "#pragma once\n#include <torch/extension.h>\n"
        for rel in TINY_SHADOWED:
            path = tiny_dir / rel
            text = TINY_CPU_HEADER if rel == "torch/extension.h" else forward
            if not path.exists() or path.read_text() != text:
                path.parent.mkdir(parents=True, exist_ok=True)
                _put_text(path, text)
        return tiny_dir

    def _compile_tiny(self, source, fns, sigs, cflags, out_dir: Path, kobj: Path, deadline: float) -> bool:
        """Compile the kernel TU behind the tiny Tensor: True when it built, False when the ATen shim
        should try (the tiny Tensor may lack what the kernel uses); a kernel whose only errors are syntax
        errors is reported from here, before the slower compile. Off with `tiny_headers=False`."""
        if not self.tiny_headers or os.environ.get("EVOKERNEL_TINY_CPU") == "0":
            return False
        try:
            pch_dir = self._pch("evk_tiny", TINY_CPU_HEADER, cflags, deadline)
        except BuildError:
            return False
        code, log, took = self._compile_kernel_tu("evk_tiny", pch_dir, self._tiny_dir(), False, source, fns, sigs,
                                                  cflags, kobj, deadline)
        if code == 0:
            self._steps.append(f"kernel (tiny headers) {took:.2f} s")
            return True
        (out_dir / "tiny.log").write_text(log)
        first = next((ln for ln in log.splitlines() if "error" in ln), "").strip()
        self._steps.append(f"tiny headers failed {took:.2f} s ({first[:160]}): ATen shim")
        if syntax_errors_only(log):
            diags = parse_diagnostics(log, line_offset=1)
            raise BuildError(first_error(diags, log), diags, log, source)
        return False

    def _compile_kernel_tu(self, header: str, pch_dir: Path, include_dir: Path, torch_headers: bool, source: str,
                           fns, sigs, cflags, kobj: Path, deadline: float) -> tuple[int, str, float]:
        """Compile `kernel.cpp` (the name the person's diagnostics carry: `kernel.cpp:N:`, one line below
        theirs) behind the precompiled `header` in `pch_dir`, with `include_dir` standing in for torch's
        headers: (exit code, compiler output, seconds)."""
        kernel = kobj.parent / "kernel.cpp"
        kernel.write_text(f'#include "{header}.h"\n' + source + "\n" + _trampolines(fns, sigs))
        cmd = [_compiler(), "-I", str(pch_dir), "-I", str(include_dir), *self._base_flags(torch_headers), *cflags,
               "-c", str(kernel), "-o", str(kobj)]
        t0 = time.monotonic()
        code, log = _run(cmd, kobj.parent, max(1.0, deadline - time.monotonic()))
        return code, log, time.monotonic() - t0

    @contextlib.contextmanager
    def _binding_object(self, sigs: list[Signature], deadline: float):
        """The pybind11 TU, keyed by the functions' types only: kernels that rename their extension or
        functions reuse it. Built concurrently with the kernel; yields (object path, module name) and, on
        leaving the block, waits for the compiler and checks it."""
        bflags = list(BIND_FLAGS)
        key = content_key("bind-v4", [(sig.ret, sig.params) for sig in sigs], bflags, self._env_key, BRIDGE_SOURCE)
        module = f"evk_bind_{key[:16]}"
        d = self.root / "bind" / key
        obj = d / "bind.o"
        if self.shared is not None:
            trusted = self.shared / "bind" / key / "bind.o"
            if not trusted.exists() and self.request is not None and not obj.exists():
                # asked for now, awaited after the kernel compiled: a kernel error never waits for bindings
                spec = {"signatures": [[sig.ret, list(sig.params)] for sig in sigs]}
                asked = _ask(self.request, "bind", spec)
                yield obj, module
                if asked:
                    with contextlib.suppress(Exception):
                        self.request("bind", spec, wait="only")
                if binding_object_ok(trusted, module):
                    d.mkdir(parents=True, exist_ok=True)
                    tmp = d / f"bind.o.tmp{os.getpid()}.{threading.get_native_id()}"
                    shutil.copyfile(trusted, tmp)
                    _install_binding_object(tmp, obj, module)
                    return
                self._compile_bindings(d, obj, module, sigs, bflags, deadline)
                return
            if binding_object_ok(trusted, module):
                yield trusted, module
                return
        if binding_object_ok(obj, module):
            yield obj, module
            return
        lock_path = d / "bind.lock"
        held = try_lock(lock_path)
        if held is None:
            # Another builder (the prewarm, the starter's prebuild, a second verification) is compiling this
            # very object: five of them at once made each five times slower on two cores. The kernel
            # compiles meanwhile; then this waits for that build and uses it, or builds it if that failed.
            yield obj, module
            if not wait_for_lock(lock_path, deadline):
                raise BuildError("the Python bindings timed out while another build of them ran", [], "")
            self._compile_bindings(d, obj, module, sigs, bflags, deadline)  # nothing to do when that build worked
            return
        try:
            if binding_object_ok(obj, module):  # finished between the check above and the lock
                yield obj, module
                return
            yield from self._compile_bindings_beside(d, obj, module, sigs, bflags, deadline)
        finally:
            unlock(held)

    def _compile_bindings_beside(self, d: Path, obj: Path, module: str, sigs: list[Signature], bflags: list[str],
                                 deadline: float):
        """Compile the bindings in the background while the caller's block (the kernel's compile) runs:
        yields once, then waits for the compiler and installs the object."""
        pch = self._bind_pch()
        src, tmp, log_path = _binding_scratch(d, module, sigs, pch)
        cmd = [_compiler(), *_pch_include(pch), *self._base_flags(), *bflags, f"-DTORCH_EXTENSION_NAME={module}", "-c",
               str(src), "-o", str(tmp)]
        try:
            # the log goes to a file, not a pipe: nothing left behind can keep a reader waiting
            with open(log_path, "w") as log_file:
                proc = lifetime.spawn(cmd, cwd=d, stdout=log_file, stderr=subprocess.STDOUT, own_group=False)
        except OSError as exc:
            raise BuildError(f"the compiler could not be started ({exc}); install g++", [], str(exc)) from exc
        try:
            yield obj, module
        except BaseException:
            _kill_compiler(proc)
            raise
        try:
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired as exc:
            _kill_compiler(proc)
            raise BuildError("the Python bindings timed out while building", [], "") from exc
        log = log_path.read_text(errors="replace")
        for scratch in (log_path, src):
            scratch.unlink(missing_ok=True)
        if proc.returncode != 0:
            diags = parse_diagnostics(log)
            raise BuildError("the Python bindings failed to build: " + first_error(diags, log), diags, log)
        _install_binding_object(tmp, obj, module)

    def _bind_pch(self) -> Path | None:
        """The precompiled `torch/extension.h` for the bindings' flags, where it is already built (the app's
        prewarm builds it once, about 50 s): a bindings TU then compiles in about 9 s instead of 24 s on
        two cores. Never built here on demand: a first verdict does not wait 50 s for a header."""
        key = content_key("evk_full", FULL_PCH_HEADER, list(BIND_FLAGS), self._env_key)
        for base in (self.shared, self.root):
            if base is not None and (base / "pch" / f"evk_full-{key}" / "evk_full.h.gch").is_file():
                return base / "pch" / f"evk_full-{key}"
        return None

    def _compile_bindings(self, d: Path, obj: Path, module: str, sigs: list[Signature], bflags: list[str],
                          deadline: float) -> None:
        """The bindings object built here and now (when the trusted side could not provide it, or another
        builder's build of it failed), one builder at a time: their scratch names are per process."""
        with locked(d / "bind.lock"):
            if not binding_object_ok(obj, module):
                self._compile_bindings_now(d, obj, module, sigs, bflags, deadline)

    def _compile_bindings_now(self, d: Path, obj: Path, module: str, sigs: list[Signature], bflags: list[str],
                              deadline: float) -> None:
        pch = self._bind_pch()
        src, tmp, _log = _binding_scratch(d, module, sigs, pch)
        code, log = _run([_compiler(), *_pch_include(pch), *self._base_flags(), *bflags, f"-DTORCH_EXTENSION_NAME={module}", "-c", str(src),
                          "-o", str(tmp)], d, max(1.0, deadline - time.monotonic()))
        src.unlink(missing_ok=True)
        if code != 0:
            diags = parse_diagnostics(log)
            raise BuildError("the Python bindings failed to build: " + first_error(diags, log), diags, log)
        _install_binding_object(tmp, obj, module)

    def _build_single(self, name, source, fns, cflags, ldflags, out_dir, so_path, deadline) -> None:
        pch_dir = self._pch("evk_full", FULL_PCH_HEADER, cflags, deadline)
        main = out_dir / "main.cpp"
        body = '#include "evk_full.h"\n#include <torch/extension.h>\n' + source + "\n"
        if fns:
            body += _bindings(name, fns)
        main.write_text(body)
        obj = out_dir / "main.o"
        code, log = _run(
            [_compiler(), "-I", str(pch_dir), *self._base_flags(), *cflags, f"-DTORCH_EXTENSION_NAME={name}",
             "-c", str(main), "-o", str(obj)],
            out_dir,
            max(1.0, deadline - time.monotonic()),
        )
        if code != 0:
            diags = parse_diagnostics(log, line_offset=2)
            raise BuildError(first_error(diags, log), diags, log, source)
        self._link([obj], ldflags + _omp_ld(cflags), so_path, deadline)

    def _link(self, objs: list[Path], ldflags: list[str], so_path: Path, deadline: float) -> None:
        tmp = so_path.with_suffix(f".tmp{os.getpid()}.so")
        cmd = [_compiler(), *map(str, objs), *self._ldflags(ldflags), "-o", str(tmp)]
        code, log, tried_gold = 1, "", False
        if _GOLD["usable"] and (fast := _fast_linker()):
            tried_gold = True
            code, log = _run(cmd[:1] + fast + cmd[1:], so_path.parent, max(1.0, deadline - time.monotonic()))
        if code != 0:
            code, log = _run(cmd, so_path.parent, max(1.0, deadline - time.monotonic()))
            if code == 0 and tried_gold:
                # gold failed where the default linker did not: it cannot read this toolchain's files (a GCC
                # under /opt whose libstdc++.so it could not open, on a lent H100 host). Not again here.
                _GOLD["usable"] = False
        if code != 0:
            diags = parse_diagnostics(log)
            raise BuildError("linking failed: " + first_error(diags, log), diags, log)
        os.replace(tmp, so_path)


def _pch_include(pch: Path | None) -> list[str]:
    return ["-I", str(pch)] if pch is not None else []


def _binding_scratch(d: Path, module: str, sigs: list[Signature], pch: Path | None = None) -> tuple[Path, Path, Path]:
    """This process's own source, object and log names for one bindings build. Builders of the same
    signatures run at once (the trusted side, the sandbox's fallback, several verifications): one shared
    `bind.cpp` rewritten by one while another's compiler reads it compiled to an empty object, which was
    then cached and linked into every later kernel of those signatures (no `PyInit_<module>`)."""
    pid = os.getpid()
    src = d / f"bind.tmp{pid}.cpp"
    src.write_text(('#include "evk_full.h"\n' if pch is not None else "") + _shared_bindings(module, sigs))
    return src, d / f"bind.o.tmp{pid}", d / f"bind.log.tmp{pid}"


def binding_object_ok(obj: Path, module: str) -> bool:
    """Whether `obj` is a bindings object for `module`: it exists and defines `PyInit_<module>`. A cached
    object that does not (truncated, empty, another module's) is never linked; it is built again."""
    try:
        with open(obj, "rb") as f:
            return (b"PyInit_" + module.encode()) in f.read(64 << 20)
    except OSError:
        return False


def _install_binding_object(tmp: Path, obj: Path, module: str) -> None:
    """Rename a finished bindings object into place, only if it really is one."""
    if not binding_object_ok(tmp, module):
        tmp.unlink(missing_ok=True)
        raise BuildError(f"the Python bindings compiled to an object without PyInit_{module}; try again", [], "")
    os.replace(tmp, obj)


_GOLD = {"usable": os.environ.get("EVOKERNEL_GOLD") != "0"}


def _fast_linker() -> list[str]:
    """gold where it is installed: linking a kernel against libtorch's big symbol tables took 0.57 s with
    the default linker and 0.21 s with gold (a third of a changed source's build after the compile)."""
    return ["-fuse-ld=gold"] if shutil.which("ld.gold") else []


def _omp_ld(cflags: list[str]) -> list[str]:
    return ["-fopenmp"] if any("fopenmp" in f for f in cflags) else []


def _import_so(name: str, so_path: Path):
    """Load a built extension. Split builds share their bindings' module name (module.txt) across .so
    files; CPython caches extension modules by full name, so each is loaded under a unique parent
    package while `PyInit_<module>` is still found from the last name component."""
    marker = so_path.parent / "module.txt"
    if marker.exists():
        name = f"evk_{so_path.parent.name}.{marker.read_text().strip()}"
    spec = importlib.util.spec_from_file_location(name, str(so_path))
    if spec is None or spec.loader is None:
        raise BuildError(f"could not load the built extension {so_path}", [], "")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BIND_FLAGS = ("-O1",)  # the bindings TU's flags (and its precompiled header's)
