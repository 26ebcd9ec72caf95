"""CPU C++ backend: KernelBench-style `load_inline` candidates, built by the cached split builder."""

from __future__ import annotations

import shutil
from dataclasses import dataclass

from verifier.backends.base import Backend
from verifier.inline_hook import install_inline_builder


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
    """Inside the sandbox: `load_inline` goes through the cached split builder."""
    from verifier.build import InlineBuilder
    from verifier.inline_hook import request_artefact

    builder = InlineBuilder(job["build_root"], timeout_s=job.get("build_timeout_s", 180),
                            shared=job.get("shared_build_root"), request=request_artefact)
    install_inline_builder(builder, counter, report)
