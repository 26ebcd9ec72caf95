"""CPU C++ backend: KernelBench-style `load_inline` candidates, built by the cached split builder."""

from __future__ import annotations

import shutil
from dataclasses import dataclass

from verifier.backends.base import Backend


@dataclass
class CpuBackend(Backend):
    name: str = "cpu"
    device: str = "cpu"
    installer: str = "verifier.backends.cpu:install"

    def availability(self) -> str | None:
        if not (shutil.which("c++") or shutil.which("g++")):
            return "no C++ compiler found: install g++ (e.g. apt-get install g++) to use --backend cpu"
        return None


def install(job: dict, counter: dict, report: dict) -> None:
    """Inside the sandbox: route `load_inline` through our builder and count kernel calls."""
    from torch.utils import cpp_extension

    from verifier.build import InlineBuilder
    from verifier.harness import CountingModule

    builder = InlineBuilder(job["build_root"], timeout_s=job.get("build_timeout_s", 180))
    report["builds"] = []

    def load_inline(*args, **kwargs):
        mod = builder.load_inline(*args, **kwargs)
        report["builds"] = [vars(r) for r in builder.records]
        return CountingModule(mod, counter)

    def load(*args, **kwargs):
        raise RuntimeError("cpp_extension.load from files is not supported; pass the sources to load_inline")

    cpp_extension.load_inline = load_inline
    cpp_extension.load = load
