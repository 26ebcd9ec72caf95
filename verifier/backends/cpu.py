"""CPU C++ backend: KernelBench-style `load_inline` candidates, built by the cached split builder."""

from __future__ import annotations

import shutil
from dataclasses import dataclass

from verifier.backends.base import Backend
from verifier.build.inline_hook import install_inline_builder

STABLE_MMAP_THRESHOLD = 32 << 20  # glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit: a larger value is ignored


@dataclass
class CpuBackend(Backend):
    name: str = "cpu"
    device: str = "cpu"
    installer: str = "verifier.backends.cpu:install"

    def child_env(self) -> dict[str, str]:
        """The same allocator settings for both sides of a paired measurement (the reference worker and
        the sandbox): glibc's dynamic mmap threshold otherwise makes a round's output allocations
        alternate between reused heap and fresh mmapped pages, so the same call's time flipped by 2x from
        one round to the next (measured: relu 0.85 / 0.37 ms on alternate rounds). Blocks up to 32 MiB
        (glibc's largest threshold) come from the heap and stay there between rounds."""
        return {"MALLOC_MMAP_THRESHOLD_": str(STABLE_MMAP_THRESHOLD), "MALLOC_TRIM_THRESHOLD_": str(1 << 30),
                "MALLOC_TOP_PAD_": str(64 << 20)}

    def availability(self) -> str | None:
        if not (shutil.which("c++") or shutil.which("g++")):
            return "no C++ compiler found: install g++ (e.g. apt-get install g++) to use --backend cpu"
        return None


def install(job: dict, counter: dict, report: dict) -> None:
    """Inside the sandbox: `load_inline` goes through the cached split builder."""
    from verifier.build.inline_hook import request_artefact
    from verifier.build.split_build import InlineBuilder

    builder = InlineBuilder(job["build_root"], timeout_s=job.get("build_timeout_s", 180),
                            shared=job.get("shared_build_root"), request=request_artefact)
    install_inline_builder(builder, counter, report)
