"""Triton backend: `@triton.jit` kernels launched from `ModelNew.forward`.

On a GPU the candidate runs and is timed like a CUDA one. Without a GPU but with triton installed,
the whole verification runs on the CPU under Triton's interpreter (`TRITON_INTERPRET=1`, set for both
the reference worker and the candidate's sandbox): the anti-hacking, compile and correctness gates run
as on a GPU, no latency is measured, and the result carries "interpreted: no latency". In the
interpreter a kernel body is plain Python, so what nvcc-less Triton would reject at compile time (an
unknown `tl.` name, a wrong argument) surfaces as an `InterpreterError` at the first launch: it is
reported by the compile gate at the candidate file's line, as the GPU path reports a CompilationError.
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
        from verifier.clock.gpu_timing import GPU_MAX_REPS, GPU_MIN_REPS, L2_FLUSH_BYTES

        return {"gpu_min_reps": GPU_MIN_REPS, "gpu_max_reps": GPU_MAX_REPS, "l2_flush_bytes": L2_FLUSH_BYTES}

    def child_env(self) -> dict[str, str]:
        return {"TRITON_INTERPRET": "1"} if self.interpreted else {}


_AT = re.compile(r"at (\d+):(\d+):")
# What the Triton compiler would have rejected, when the interpreter meets it while running the body.
_COMPILE_LIKE = (AttributeError, NameError, TypeError, SyntaxError, ImportError)


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


def interpreter_diagnostics(exc: BaseException, path: str) -> list[str] | None:
    """`candidate.py:LINE: error: MESSAGE` for an interpreter error that the compiler would have caught
    (its cause is an AttributeError, NameError, ... raised in the candidate's own kernel body); None for
    a run-time failure, which stays a correctness failure."""
    import traceback

    cause = exc.__cause__
    if type(exc).__name__ != "InterpreterError" or not isinstance(cause, _COMPILE_LIKE):
        return None
    frames = [f for f in traceback.extract_tb(cause.__traceback__) if f.filename == path]
    message = f"{type(cause).__name__}: {cause}".splitlines()[0]
    file = Path(path).name
    return [f"{file}:{frames[-1].lineno}: error: {message}" if frames else f"{file}: error: {message}"]


def install(job: dict, counter: dict, report: dict) -> None:
    """Inside the sandbox: count launches of every JIT (or interpreted) function and record its first build."""
    os.environ.setdefault("TRITON_CACHE_DIR", str(Path(job["build_root"]) / "triton-cache"))
    import triton  # noqa: F401  (imported before the candidate so the wrapped classes are the ones it gets)

    from verifier.build.split_build import BuildError
    from verifier.correctness.decoy import through

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
                result = through(counter, original, (self, *args), kwargs)  # garbled in the decoy probe
            except Exception as exc:
                path = job.get("candidate_path") or "candidate.py"
                diags: list[str] | None
                if type(exc).__name__ == "CompilationError":
                    diags = compile_diagnostics(exc, path, getattr(self, "starting_line_number", None))
                else:
                    diags = interpreter_diagnostics(exc, path)
                    if diags is None:
                        raise
                report["phase"] = "build"
                raise BuildError(f"triton could not compile {name}: {diags[0]}", diags, str(exc)) from None
            if first:
                built.add(name)  # type: ignore[arg-type]  # the kernel's __name__ (mypy: Any | None)
                report["builds"].append({"name": name, "key": "", "cache_hit": False,
                                         "layout": "triton-interpret" if job.get("triton_interpret") else "triton-jit",
                                         "seconds": time.monotonic() - t0, "steps": []})
            return result

        cls.run = run

    for cls in classes:
        wrap(cls)
