"""CUDA C++ backend: KernelBench-style `load_inline(cpp_sources=..., cuda_sources=...)` candidates.

Builds go through torch's own `load_inline` (nvcc + ninja) in a child process with a deadline, into a
directory keyed by a hash of the sources, flags, GPU architecture and toolchain: an unchanged kernel is a
cache hit and is imported without starting nvcc. Compiler output is parsed into `file:line: message`
diagnostics whose lines count from the start of the person's own `cuda_sources` / `cpp_sources` text.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from verifier.backends.base import Backend, install_inline_builder

# load_inline prepends these many lines to what the person wrote (torch/extension.h; torch/types.h, cuda.h,
# cuda_runtime.h), so compiler line numbers are shifted back by them.
_PREPENDED = {"main.cpp": ("cpp_sources", 1), "cuda.cu": ("cuda_sources", 3)}
_DIAG_FILE = re.compile(r"^(main\.cpp|cuda\.cu):(\d+):(.*)$")

_BUILD_SCRIPT = """
import json, sys
spec = json.load(open(sys.argv[1]))
from torch.utils.cpp_extension import load_inline
try:
    load_inline(**spec)
except BaseException as exc:
    sys.stderr.write(str(exc))
    sys.exit(2)
"""


def cuda_unavailable_reason() -> str | None:
    """None when CUDA kernels can be built and run here; else one line saying what to do."""
    try:
        import torch
    except ImportError:
        return "torch is not installed: install a CUDA build of torch to use --backend cuda"
    if not torch.cuda.is_available():
        if torch.version.cuda is None:
            return (f"no GPU: torch {torch.__version__} is a CPU-only build; run on a machine with an NVIDIA GPU "
                    "and a CUDA build of torch, or use --backend cpu")
        return ("no CUDA GPU is visible (torch.cuda.is_available() is False): check nvidia-smi and "
                "CUDA_VISIBLE_DEVICES, or use --backend cpu")
    if not nvcc_path():
        return "nvcc (the CUDA compiler) was not found: install the CUDA toolkit and set CUDA_HOME, or use --backend triton"
    return None


def nvcc_path() -> str | None:
    from torch.utils.cpp_extension import CUDA_HOME

    if CUDA_HOME and Path(CUDA_HOME, "bin", "nvcc").exists():
        return str(Path(CUDA_HOME, "bin", "nvcc"))
    return shutil.which("nvcc")


@dataclass
class CudaBackend(Backend):
    name: str = "cuda"
    device: str = "cuda"
    installer: str = "verifier.backends.cuda:install"

    def availability(self) -> str | None:
        return cuda_unavailable_reason()

    def job_fields(self) -> dict:
        from verifier.gpu_timing import GPU_MAX_REPS, GPU_MIN_REPS, L2_FLUSH_BYTES

        return {"gpu_min_reps": GPU_MIN_REPS, "gpu_max_reps": GPU_MAX_REPS, "l2_flush_bytes": L2_FLUSH_BYTES}


def map_cuda_diagnostics(diagnostics: list[str]) -> list[str]:
    """`cuda.cu:15: error: ...` -> `cuda_sources:12: error: ...` (lines of the person's own text)."""
    out = []
    for d in diagnostics:
        m = _DIAG_FILE.match(d)
        if m:
            label, offset = _PREPENDED[m.group(1)]
            d = f"{label}:{max(1, int(m.group(2)) - offset)}:{m.group(3)}"
        out.append(d)
    return out


def build_failure(log: str) -> tuple[str, list[str]]:
    """The one-line message and the diagnostics for a failed nvcc/ninja build log."""
    from verifier.diagnostics import first_error, parse_diagnostics

    diags = map_cuda_diagnostics(parse_diagnostics(log))
    undefined = re.search(r"undefined symbol: (\S+)", log)
    if undefined and not diags:
        diags = [f"link: error: undefined symbol {undefined.group(1)} (declared but not defined?)"]
    return first_error(diags, log), diags


def _digest(*parts: object) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(json.dumps(p, sort_keys=True, default=str).encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


def _as_list(x) -> list[str]:
    if x is None:
        return []
    return [x] if isinstance(x, str) else list(x)


def _toolchain_id() -> str:
    nvcc = nvcc_path() or "nvcc"
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.strip().splitlines()[-1] if out.strip() else "unknown"


class CudaBuilder:
    """`load_inline` with CUDA sources, cached under `root/cuda/<key>/`, built with a deadline."""

    def __init__(self, root: str | Path, timeout_s: float = 300.0):
        import torch

        self.root = Path(root)
        self.timeout_s = timeout_s
        self.records: list = []
        major, minor = torch.cuda.get_device_capability()
        self.arch = os.environ.get("TORCH_CUDA_ARCH_LIST") or f"{major}.{minor}"
        self._env_key = (torch.__version__, torch.version.cuda, _toolchain_id(), self.arch, sys.version_info[:2])

    def load_inline(self, name, cpp_sources, cuda_sources=None, sycl_sources=None, functions=None,
                    extra_cflags=None, extra_cuda_cflags=None, extra_sycl_cflags=None, extra_ldflags=None,
                    extra_include_paths=None, build_directory=None, verbose=False, with_cuda=None, **_ignored):
        """Drop-in for `torch.utils.cpp_extension.load_inline`; `build_directory` and `verbose` are ours."""
        from verifier.build import BuildError, BuildRecord, _import_so, _locked

        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name or ""):
            raise BuildError(f"extension name {name!r} is not a valid identifier", [], "")
        if sycl_sources:
            raise BuildError("sycl_sources are not supported by the cuda backend", [], "")
        fns = [functions] if isinstance(functions, str) else functions
        spec = {"name": name, "cpp_sources": _as_list(cpp_sources), "cuda_sources": _as_list(cuda_sources),
                "functions": fns, "extra_cflags": _as_list(extra_cflags),
                "extra_cuda_cflags": _as_list(extra_cuda_cflags), "extra_ldflags": _as_list(extra_ldflags),
                "extra_include_paths": _as_list(extra_include_paths), "with_cuda": with_cuda}
        key = _digest("cuda-v1", spec, self._env_key)
        out_dir = self.root / "cuda" / key
        so_path = out_dir / f"{name}.so"
        start = time.monotonic()
        hit = so_path.exists()
        if not hit:
            with _locked(self.root / "cuda" / f"{key}.lock"):
                hit = so_path.exists()
                if not hit:
                    self._build(spec, out_dir, so_path)
        layout = "cached" if hit else "torch-ninja"
        self.records.append(BuildRecord(name, key, hit, layout, time.monotonic() - start))
        return _import_so(name, so_path)

    def _build(self, spec: dict, out_dir: Path, so_path: Path) -> None:
        from verifier.build import BuildError

        tmp_dir = out_dir.with_name(f"{out_dir.name}.tmp{os.getpid()}")
        shutil.rmtree(tmp_dir, ignore_errors=True)
        tmp_dir.mkdir(parents=True)
        spec_path = tmp_dir / "spec.json"
        spec_path.write_text(json.dumps({**spec, "build_directory": str(tmp_dir), "verbose": False}))
        env = {**os.environ, "TORCH_CUDA_ARCH_LIST": self.arch,
               "MAX_JOBS": os.environ.get("MAX_JOBS", str(max(1, min(8, os.cpu_count() or 1))))}
        proc = subprocess.Popen([sys.executable, "-c", _BUILD_SCRIPT, str(spec_path)], cwd=tmp_dir, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            log, _ = proc.communicate(timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise BuildError(f"the CUDA build timed out after {self.timeout_s:.0f} s", [], "") from None
        built = tmp_dir / so_path.name
        if proc.returncode != 0 or not built.exists():
            message, diags = build_failure(log or "")
            raise BuildError(message, diags, log or "")
        if out_dir.exists():
            shutil.rmtree(out_dir, ignore_errors=True)
        os.replace(tmp_dir, out_dir)


def install(job: dict, counter: dict, report: dict) -> None:
    """Inside the sandbox: `load_inline` goes through the cached CUDA builder."""
    install_inline_builder(CudaBuilder(job["build_root"], timeout_s=job.get("build_timeout_s", 300)), counter, report)
