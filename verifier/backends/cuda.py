"""CUDA C++ backend: KernelBench-style `load_inline(cpp_sources=..., cuda_sources=...)` candidates.

Builds follow the split plan of `verifier.backends.cuda_plan` (the kernel TU through nvcc behind a light
ATen shim, bindings keyed by the functions' types and built by the trusted side, one link), and fall
back to torch's own `load_inline` (nvcc + ninja) in a child process with a deadline where the shim
cannot serve the sources. Every build lands in a directory keyed by a hash of the sources, flags, GPU
architecture and toolchain: an unchanged kernel is a cache hit and is imported without starting nvcc. Compiler output is parsed into `file:line: message`
diagnostics whose lines count from the start of the person's own `cuda_sources` / `cpp_sources` text.
"""

from __future__ import annotations

import contextlib
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

from verifier.backends.base import Backend
from verifier.build.inline_hook import install_inline_builder
from verifier.sandbox import lifetime

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
        from verifier.clock.gpu_timing import GPU_MAX_REPS, GPU_MIN_REPS, L2_FLUSH_BYTES

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
    from verifier.build.diagnostics import first_error, parse_diagnostics

    diags = map_cuda_diagnostics(parse_diagnostics(log))
    undefined = re.search(r"undefined symbol: (\S+)", log)
    if undefined and not diags:
        diags = [f"link: error: undefined symbol {undefined.group(1)} (declared but not defined?)"]
    return first_error(diags, log), diags


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


def toolchain_here(arch: str, env_key: tuple):
    """This machine's CUDA toolchain as the build plan needs it (nvcc, g++, torch's and CUDA's dirs)."""
    from torch.utils.cpp_extension import CUDA_HOME

    from verifier.backends.cuda_plan import Toolchain
    from verifier.build.toolchain import _compiler, _torch_paths

    nvcc = nvcc_path() or "nvcc"
    home = Path(CUDA_HOME) if CUDA_HOME else Path(nvcc).resolve().parent.parent
    libdir = home / "lib64" if (home / "lib64").exists() else home / "lib"
    includes, libdirs = _torch_paths()
    return Toolchain(nvcc=nvcc, cxx=_compiler(), arch=arch, torch_includes=tuple(includes),
                     torch_libdirs=tuple(libdirs), cuda_include=str(home / "include"), cuda_libdir=str(libdir),
                     env_key=env_key)


def _shim_insufficient(log: str) -> bool:
    """The split build failed on something the light shim lacks (not the person's own error): judged on
    the compiler's error lines only (nvcc echoes the offending source line, which may name torch::)."""
    errors = "\n".join(ln for ln in log.splitlines() if "error" in ln)
    return any(tok in errors for tok in ("torch::", "py::", "pybind11", "\u2018torch\u2019", "'torch'",
                                         'namespace "torch"', 'namespace "at"', 'namespace "c10"'))


class CudaBuilder:
    """`load_inline` with CUDA sources, cached under `root/cuda/<key>/`, built with a deadline.

    The split layout (`verifier.backends.cuda_plan`) compiles the person's kernel TU with nvcc behind
    the light ATen shim while the bindings object comes from the trusted side (`shared`, asked for
    with `request`, as the CPU backend does); what the shim cannot serve is built by torch's own
    `load_inline` (nvcc + ninja) in a child process."""

    def __init__(self, root: str | Path, timeout_s: float = 300.0, shared: str | Path | None = None,
                 request=None, toolchain=None, light_headers: bool = True):
        import torch

        self.root = Path(root)
        self.light_headers = light_headers
        self.timeout_s = timeout_s
        self.shared = shared
        self.request = request
        self.records: list = []
        if toolchain is not None:
            self.arch = toolchain.arch
        else:
            major, minor = torch.cuda.get_device_capability()
            self.arch = os.environ.get("TORCH_CUDA_ARCH_LIST") or f"{major}.{minor}"
        self._env_key = (torch.__version__, torch.version.cuda, _toolchain_id(), self.arch, sys.version_info[:2])
        self._toolchain = toolchain

    def toolchain(self):
        if self._toolchain is None:
            self._toolchain = toolchain_here(self.arch, self._env_key)
        return self._toolchain

    def load_inline(self, name, cpp_sources, cuda_sources=None, sycl_sources=None, functions=None,
                    extra_cflags=None, extra_cuda_cflags=None, extra_sycl_cflags=None, extra_ldflags=None,
                    extra_include_paths=None, build_directory=None, verbose=False, with_cuda=None, **_ignored):
        """Drop-in for `torch.utils.cpp_extension.load_inline`; `build_directory` and `verbose` are ours."""
        from verifier.backends.cuda_plan import content_key, fallback_chain, normalise_spec
        from verifier.build.locks import locked
        from verifier.build.split_build import BuildError, BuildRecord, _import_so

        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name or ""):
            raise BuildError(f"extension name {name!r} is not a valid identifier", [], "")
        if sycl_sources:
            raise BuildError("sycl_sources are not supported by the cuda backend", [], "")
        spec = normalise_spec(name, cpp_sources, cuda_sources, functions, extra_cflags, extra_cuda_cflags,
                              extra_ldflags, extra_include_paths, with_cuda)
        start = time.monotonic()
        shim_dirs = {"full": str(self.root / "shim")}
        if self.light_headers:
            shim_dirs.update(tiny=str(self.root / "shim-tiny"), light=str(self.root / "shim-light"))
        chain = fallback_chain(spec, self.toolchain(), shim_dirs)
        plan = chain[-1]
        steps: list[str] = []
        out_dir = self.root / "cuda" / plan.key
        so_path = out_dir / f"{name}.so"
        hit = so_path.exists()
        layout = plan.layout
        if not hit:
            with locked(self.root / "cuda" / f"{plan.key}.lock"):
                hit = so_path.exists()
                if not hit and plan.layout == "split":
                    try:
                        steps = self._build_split(chain, out_dir, so_path, start + self.timeout_s)
                    except BuildError as exc:
                        if not _shim_insufficient(exc.log):
                            raise
                        layout = "single"
                        steps = [f"split failed ({str(exc)[:200]}): torch's layout"]
                        key = content_key(spec, self.toolchain(), "single")
                        out_dir = self.root / "cuda" / key
                        so_path = out_dir / f"{name}.so"
                        hit = so_path.exists()
                if not hit and layout == "single":
                    self._build(spec, out_dir, so_path)
        self.records.append(BuildRecord(name, out_dir.name, hit, "cached" if hit else
                                        ("split" if layout == "split" else "torch-ninja"),
                                        time.monotonic() - start, steps))
        return _import_so(name, so_path)

    def _write_shims(self) -> None:
        """The ATen shim (`root/shim`), the light headers (`root/shim-light`) and the tiny Tensor
        (`root/shim-tiny`), rewritten when stale."""
        from verifier.backends.cuda_plan import light_shim_files
        from verifier.build.split_build import SHIM_HEADER, TORCH_NAMESPACE, _put_text
        from verifier.build.tiny_tensor import tiny_shim_files

        files = {self.root / "shim" / "torch" / "extension.h": SHIM_HEADER}
        if self.light_headers:
            def read(rel: str) -> str | None:
                for inc in self.toolchain().torch_includes:
                    path = Path(inc, rel)
                    if path.is_file():
                        return path.read_text(errors="replace")
                return None

            files.update({self.root / "shim-light" / rel: text for rel, text in light_shim_files(read).items()})
            files.update({self.root / "shim-tiny" / rel: text for rel, text in tiny_shim_files(TORCH_NAMESPACE).items()})
        for path, text in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists() or path.read_text() != text:
                _put_text(path, text)

    def _compile(self, plan, tmp_dir: Path, deadline: float, t0: float, procs: list) -> tuple[list[str], str | None]:
        """Start the plan's compile steps together and wait for them: (a line per step, None) or, on the
        first failure, (lines so far, the failed step's log). The others are stopped then."""
        from verifier.build.split_build import BuildError
        from verifier.build.toolchain import _kill_compiler

        for fname, text in plan.files.items():
            (tmp_dir / fname).write_text(text)
        mine = []
        for step in plan.compile_steps:
            log = open(tmp_dir / f"{step.name}.log", "w")  # noqa: SIM115 - closed below
            mine.append((step, log, lifetime.spawn(list(step.argv), cwd=tmp_dir, stdout=log, own_group=False,
                                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)))
            procs.append(mine[-1])
        timings: list[str] = []
        for step, log, proc in mine:
            try:
                proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise BuildError(f"the CUDA build timed out after {self.timeout_s:.0f} s ({step.name})",
                                 [], "") from None
            log.close()
            text = (tmp_dir / f"{step.name}.log").read_text(errors="replace")
            if proc.returncode != 0 or not (tmp_dir / step.output).exists():
                for _, other_log, other in mine:
                    if other.poll() is None:
                        _kill_compiler(other)
                    other_log.close()
                return timings, text
            label = f"{step.name} ({plan.headers} headers)" if step.name in ("kernel", "host") else step.name
            timings.append(f"{label} {time.monotonic() - t0:.1f} s")
        return timings, None

    def _build_split(self, chain: list, out_dir: Path, so_path: Path, deadline: float) -> list[str]:
        """Run the first plan of `chain` (`cuda_plan.fallback_chain`): the compile steps in parallel with
        the bindings (trusted copy, else a local one in this job), then the link. When a plan with lighter
        headers fails for want of a declaration (`light_fallback`), the next plan compiles instead, the
        bindings still building meanwhile. Returns a line per step with its seconds."""
        from verifier.backends.cuda_plan import BIND_OBJECT, light_fallback
        from verifier.build.split_build import BuildError, InlineBuilder
        from verifier.build.toolchain import _kill_compiler

        self._write_shims()
        tmp_dir = out_dir.with_name(f"{out_dir.name}.tmp{os.getpid()}")
        shutil.rmtree(tmp_dir, ignore_errors=True)
        tmp_dir.mkdir(parents=True)
        t0 = time.monotonic()
        procs: list = []
        try:
            binder = InlineBuilder(self.root, timeout_s=self.timeout_s, shared=self.shared, request=self.request)
            with binder._binding_object(chain[0].signatures, deadline) as (bind_obj, module):
                timings: list[str] = []
                for plan, after in zip(chain, [*chain[1:], None], strict=True):
                    more, failed = self._compile(plan, tmp_dir, deadline, t0, procs)
                    timings += more
                    if failed is None or after is None or not light_fallback(failed):
                        break
                    first = next((ln for ln in failed.splitlines() if "error" in ln), "")
                    timings.append(f"{plan.headers} headers failed {time.monotonic() - t0:.1f} s "
                                   f"({first.strip()[:160]}): {after.headers} headers")
                    (tmp_dir / f"{plan.headers}.log").write_text(failed)
                if failed is not None:
                    message, diags = build_failure(failed)
                    raise BuildError(message, diags, failed)
            trusted = Path(self.shared) / "bind" / bind_obj.parent.name / "bind.o" if self.shared else None
            same = trusted is not None and trusted.exists() and (
                trusted == bind_obj or trusted.read_bytes() == bind_obj.read_bytes())
            timings.append(f"bindings {'shared' if same else 'local'} {time.monotonic() - t0:.1f} s "
                           f"[{bind_obj.parent.name[:12]}]")
        except BaseException:
            for _, log, proc in procs:
                if proc.poll() is None:
                    _kill_compiler(proc)
                log.close()
            shutil.rmtree(tmp_dir, ignore_errors=True)
            raise
        link = plan.link
        argv = [str(bind_obj) if a == BIND_OBJECT else a for a in link.argv]
        t1 = time.monotonic()
        try:
            proc = lifetime.run(argv, cwd=tmp_dir, text=True, own_group=False,
                                timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            shutil.rmtree(tmp_dir, ignore_errors=True)
            raise BuildError(f"the CUDA link timed out after {self.timeout_s:.0f} s", [], "") from None
        if proc.returncode != 0 or not (tmp_dir / link.output).exists():
            log = proc.stdout + proc.stderr
            shutil.rmtree(tmp_dir, ignore_errors=True)
            message, diags = build_failure(log)
            raise BuildError("linking failed: " + message, diags, log)
        timings.append(f"link {time.monotonic() - t1:.1f} s")
        (tmp_dir / "module.txt").write_text(module)
        if out_dir.exists():
            shutil.rmtree(out_dir, ignore_errors=True)
        os.replace(tmp_dir, out_dir)
        return timings

    def _build(self, spec: dict, out_dir: Path, so_path: Path) -> None:
        from verifier.build.split_build import BuildError

        tmp_dir = out_dir.with_name(f"{out_dir.name}.tmp{os.getpid()}")
        shutil.rmtree(tmp_dir, ignore_errors=True)
        tmp_dir.mkdir(parents=True)
        spec_path = tmp_dir / "spec.json"
        spec_path.write_text(json.dumps({**spec, "build_directory": str(tmp_dir), "verbose": False}))
        # ninja and nvcc may live beside this Python (pip wheels), off the sandbox's short PATH
        tools = [str(Path(sys.executable).parent)] + ([str(Path(nvcc_path()).parent)] if nvcc_path() else [])  # type: ignore[arg-type]  # checked just before
        env = {**os.environ, "TORCH_CUDA_ARCH_LIST": self.arch,
               "PATH": os.pathsep.join([*tools, os.environ.get("PATH", "/usr/bin:/bin")]),
               "MAX_JOBS": os.environ.get("MAX_JOBS", str(max(1, min(8, os.cpu_count() or 1))))}
        proc = lifetime.spawn([sys.executable, "-c", _BUILD_SCRIPT, str(spec_path)], cwd=tmp_dir, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
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
    """Inside the sandbox: `load_inline` goes through the split CUDA builder; shared bindings come from
    the trusted side (`need` requests), never from another candidate's build."""
    from verifier.build.inline_hook import request_artefact

    builder = CudaBuilder(job["build_root"], timeout_s=job.get("build_timeout_s", 300),
                          shared=job.get("shared_build_root"), request=request_artefact)
    install_inline_builder(builder, counter, report)


# GPU memory -----------------------------------------------------------------------------------------
# A candidate cannot get an address-space limit (CUDA reserves terabytes of it at start-up), so its
# device memory is capped in the harness (`VerifyConfig.gpu_memory_fraction` ->
# torch.cuda.set_per_process_memory_fraction, which bounds torch's caching allocator) and checked from
# the trusted side, which asks the driver (nvidia-smi: no CUDA context in the parent) how much memory
# is in use before and after a candidate ran: memory still held once its sandbox is gone means a
# process outlived the verdict or the driver was left holding it.

MEMORY_SLACK_MB = 512


def device_memory_mb(index: int = 0, nvidia_smi: str | None = None) -> tuple[int, int] | None:
    """(used, total) MiB of GPU `index` as the driver reports it; None when nvidia-smi cannot say."""
    binary = nvidia_smi or shutil.which("nvidia-smi")
    if not binary:
        return None
    try:
        out = subprocess.run([binary, f"--id={index}", "--query-gpu=memory.used,memory.total",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_memory_query(out)


def parse_memory_query(out: str) -> tuple[int, int] | None:
    """`12345, 81559` -> (12345, 81559)."""
    first = next((ln for ln in out.strip().splitlines() if ln.strip()), "")
    parts = [p.strip() for p in first.split(",")]
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        return None
    return int(parts[0]), int(parts[1])


def memory_cap_mb(fraction: float | None, total_mb: int) -> int | None:
    """What torch's allocator lets a candidate hold under `fraction` of the device (None: no cap)."""
    if not fraction:
        return None
    if not 0.0 < float(fraction) <= 1.0:
        raise ValueError(f"gpu_memory_fraction must lie in (0, 1], not {fraction}")
    return int(float(fraction) * total_mb)


def memory_left_behind(before_mb: int, after_mb: int, slack_mb: int = MEMORY_SLACK_MB) -> str | None:
    """One line when more device memory is in use after a candidate's sandbox ended than before it
    started (beyond `slack_mb`), else None."""
    grown = after_mb - before_mb
    if grown <= slack_mb:
        return None
    return (f"{grown} MiB of GPU memory were still in use after the candidate's sandbox ended "
            f"({before_mb} MiB before, {after_mb} MiB after): something outlived the verification")
