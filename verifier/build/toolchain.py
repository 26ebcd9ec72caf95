"""The C++ toolchain a build uses, and which one: torch's include and library paths, the compiler
(`CXX`, or the sandbox's `c++` for the trusted side's shared artefacts, so their keys agree), the
compiler's identity as it goes into artefact keys, and killing a compiler with everything it started.
Shared by the CPU split build (`verifier.build.split_build`) and the CUDA backend.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

from verifier.sandbox.procs import descendants


def _torch_paths() -> tuple[list[str], list[str]]:
    import torch

    root = Path(torch.__file__).parent
    includes = [str(root / "include"), str(root / "include" / "torch" / "csrc" / "api" / "include")]
    py_include = sysconfig.get_paths()["include"]
    return includes + [py_include], [str(root / "lib")]


def _compiler() -> str:
    return os.environ.get("CXX", "c++")


# The PATH a sandboxed build runs with (verifier.workers.pools._clean_env, which passes no CXX): its `c++` is the
# compiler the shared artefacts must be built with, whatever CXX the trusted side has (the H100 machine
# sets CXX=/opt/gcc/bin/g++, a wrapper outside the sandbox's view, around another gcc than /usr/bin/c++).
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"


def sandbox_compiler() -> str:
    """The compiler a sandboxed build calls: `c++` on the sandbox's PATH."""
    return shutil.which("c++", path=SANDBOX_PATH) or "c++"


@contextlib.contextmanager
def _with_sandbox_compiler():
    """Build the trusted side's shared artefacts with the sandbox's compiler, so their keys (and objects)
    are the ones a sandboxed build looks for."""
    old = os.environ.get("CXX")
    os.environ["CXX"] = sandbox_compiler()
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("CXX", None)
        else:
            os.environ["CXX"] = old


def _compiler_id() -> str:
    """The compiler's version line without the name it was called by: "c++ (Ubuntu 13.3.0) 13.3.0" and
    "g++-real (Ubuntu 13.3.0) 13.3.0" are one compiler. The trusted side (the person's CXX, say a
    wrapper in /opt) and the sandbox (its short PATH, no CXX) reach one compiler by different names,
    and the shared artefacts' keys must agree (an H100 machine with CXX=/opt/gcc/bin/g++ never used
    the trusted bindings before this)."""
    try:
        out = subprocess.run([_compiler(), "--version"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    first = out.splitlines()[0].strip() if out.strip() else ""
    if not first:
        return "unknown"
    return first.split(None, 1)[1] if " " in first else first


def _kill_compiler(proc: subprocess.Popen) -> None:
    """Kill the g++ driver and its children: killing the driver alone leaves cc1plus running on."""
    tree = descendants(proc.pid)
    proc.kill()
    for pid in tree:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, 9)
    proc.wait()
    if isinstance(proc.args, list) and "-o" in proc.args:
        with contextlib.suppress(OSError):
            Path(proc.args[proc.args.index("-o") + 1]).unlink(missing_ok=True)
