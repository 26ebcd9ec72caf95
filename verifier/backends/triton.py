"""Triton backend: `@triton.jit` kernels launched from `ModelNew.forward`.

On a GPU the candidate runs and is timed like a CUDA one. Without a GPU but with triton installed,
correctness runs under `TRITON_INTERPRET=1` on the CPU, and the result carries "interpreted: no latency".
Launches are counted by wrapping the JIT function's `run` (what `kernel[grid](...)` calls), and a
Triton compile error is reported by the compile gate with the candidate file's line.
"""

from __future__ import annotations

import importlib.util
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from verifier.backends.base import Backend


def _gpu_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def triton_unavailable_reason() -> str | None:
    if importlib.util.find_spec("triton") is None:
        hint = "" if _gpu_available() else " (without a GPU, correctness then runs under TRITON_INTERPRET=1)"
        return f"triton is not installed: pip install triton to use --backend triton{hint}"
    return None


@dataclass
class TritonBackend(Backend):
    name: str = "triton"
    device: str = "cuda"
    installer: str = "verifier.backends.triton:install"

    def __post_init__(self) -> None:
        if not _gpu_available():
            self.device = "cpu"
            self.interpreted = True

    def availability(self) -> str | None:
        return triton_unavailable_reason()

    def job_fields(self) -> dict:
        if self.interpreted:
            return {"triton_interpret": True}
        from verifier.gpu_timing import GPU_MAX_REPS, GPU_MIN_REPS, L2_FLUSH_BYTES

        return {"gpu_min_reps": GPU_MIN_REPS, "gpu_max_reps": GPU_MAX_REPS, "l2_flush_bytes": L2_FLUSH_BYTES}

    def child_env(self) -> dict[str, str]:
        return {"TRITON_INTERPRET": "1"} if self.interpreted else {}


_AT = re.compile(r"at (\d+):(\d+):")


def compile_diagnostics(exc: BaseException, path: str, first_line: int | None) -> list[str]:
    """`candidate.py:LINE: error: MESSAGE` from a Triton CompilationError (its lines count from the def)."""
    text = str(exc)
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    message = lines[-1].strip() if lines else type(exc).__name__
    m = _AT.search(text)
    file = Path(path).name
    if m and first_line:
        return [f"{file}:{first_line + int(m.group(1)) - 1}: error: {message}"]
    return [f"{file}: error: {message}"]


def install(job: dict, counter: dict, report: dict) -> None:
    """Inside the sandbox: count launches of every JIT (or interpreted) function and record its first build."""
    os.environ.setdefault("TRITON_CACHE_DIR", str(Path(job["build_root"]) / "triton-cache"))
    import triton  # noqa: F401  (imported before the candidate so the wrapped classes are the ones it gets)

    from verifier.build import BuildError

    classes = []
    from triton.runtime.jit import JITFunction

    classes.append(JITFunction)
    if job.get("triton_interpret"):
        from triton.runtime.interpreter import InterpretedFunction

        classes.append(InterpretedFunction)
    report["builds"] = []
    built: set[str] = set()

    def wrap(cls):
        original = cls.run

        def run(self, *args, **kwargs):
            counter["calls"] += 1
            fn = getattr(self, "fn", None)
            name = getattr(fn, "__name__", None) or getattr(self, "__name__", "kernel")
            first = name not in built
            t0 = time.monotonic()
            try:
                result = original(self, *args, **kwargs)
            except Exception as exc:
                if type(exc).__name__ != "CompilationError":
                    raise
                report["phase"] = "build"
                diags = compile_diagnostics(exc, job.get("candidate_path") or "candidate.py",
                                            getattr(self, "starting_line_number", None))
                raise BuildError(f"triton could not compile {name}: {diags[0]}", diags, str(exc)) from None
            if first:
                built.add(name)
                report["builds"].append({"name": name, "key": "", "cache_hit": False,
                                         "layout": "triton-interpret" if job.get("triton_interpret") else "triton-jit",
                                         "seconds": time.monotonic() - t0, "steps": []})
            return result

        cls.run = run

    for cls in classes:
        wrap(cls)
