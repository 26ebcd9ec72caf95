"""Which device a kernel was measured on, as data for the memory (issue 35: memories that know where they
were learnt).

`device_record(backend, measured)` is {"backend", "kind" ("gpu" or "cpu"), "name", "capability", "class"}:
a GPU's name and compute capability (from `nvidia-smi`, never importing torch here), or the CPU's model
from /proc/cpuinfo. `class` is what "the same device" means when memories are compared: the GPU's name and
capability ("NVIDIA H100 80GB HBM3 (sm_90)"), or "cpu: <model>". `measured` is the verdict's own device
name (where the kernel really ran, which may be another machine's GPU under a remote executor); it wins
over this machine's GPU name when they differ.
"""

from __future__ import annotations

import functools
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

GPU_BACKENDS = ("cuda", "triton")


@functools.lru_cache(maxsize=4)
def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's model name (/proc/cpuinfo's `model name`, or `Hardware`/`Processor` on ARM), else the platform's."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and value.strip():
            fields.setdefault(key.strip().lower(), value.strip())
    for key in ("model name", "hardware", "processor", "cpu model"):
        value = fields.get(key, "")
        if value and not value.isdigit():
            return " ".join(value.split())
    return platform.processor() or platform.machine() or "unknown cpu"


@functools.lru_cache(maxsize=1)
def gpu_info() -> tuple[str, str]:
    """(name, compute capability) of the first GPU nvidia-smi lists; ("", "") when there is none."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return "", ""
    try:
        out = subprocess.run([exe, "--query-gpu=name,compute_cap", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return "", ""
    first = out.strip().splitlines()[0] if out.strip() else ""
    name, _, cap = first.rpartition(",")
    return (name.strip(), cap.strip()) if name else (first.strip(), "")


def gpu_free_bytes() -> tuple[str, int] | None:
    """(name, free bytes) of the first GPU nvidia-smi lists, read now (free memory changes); None without one."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=name,memory.free", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10, check=False).stdout
        name, _, free = out.strip().splitlines()[0].rpartition(",")
        return name.strip(), int(float(free)) * 1024**2
    except (OSError, subprocess.SubprocessError, IndexError, ValueError):
        return None


def gpu_total_bytes() -> tuple[str, int] | None:
    """(name, total bytes) of the smallest GPU nvidia-smi lists (what any card of this machine could hold
    with nothing else on it: `bench` spreads tasks over them); None without one."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10, check=False).stdout
        cards = [(name.strip(), int(float(total)) * 1024**2)
                 for name, _, total in (line.rpartition(",") for line in out.strip().splitlines() if line.strip())]
        return min(cards, key=lambda c: c[1]) if cards else None
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def gpu_class(name: str, capability: str) -> str:
    return f"{name} (sm_{capability.replace('.', '')})" if capability else name


def device_record(backend: str, measured: str = "", *, gpu: tuple[str, str] | None = None,
                  cpu: str | None = None) -> dict[str, Any]:
    """Where a kernel of `backend` was measured (see the module docstring). `gpu` and `cpu` stand in for
    this machine's (tests)."""
    name, cap = gpu if gpu is not None else (gpu_info() if backend in GPU_BACKENDS else ("", ""))
    measured = (measured or "").strip()
    if backend in GPU_BACKENDS and measured and not measured.lower().startswith("cpu") and measured != name:
        name, cap = measured, ""
    if backend in GPU_BACKENDS and name:
        return {"backend": backend, "kind": "gpu", "name": name, "capability": cap, "class": gpu_class(name, cap)}
    model = cpu if cpu is not None else cpu_model()
    return {"backend": backend, "kind": "cpu", "name": model, "capability": "", "class": f"cpu: {model}"}
