"""The shared artefacts the trusted side builds: on a sandboxed build's request (`build_shared`, run as
`python -m verifier.build.shared_artefacts --shared ROOT KIND SPEC`) and ahead of time (`prewarm`, run as
`python -m verifier.build.shared_artefacts ROOT` at app start and by `scripts/setup.sh`).

A request comes from untrusted code, so nothing in it reaches a compiler's command line unchecked: flags
must be optimisation or ISA flags (`safe_cflags`), types known type words (`safe_type`), and headers are
chosen by name from this module's own table. Artefacts are built with the compiler the sandbox uses,
so their keys agree with the sandbox's.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

from verifier.build.bindings import Signature
from verifier.build.locks import keep_locks_outside
from verifier.build.split_build import (
    BIND_FLAGS,
    FULL_PCH_HEADER,
    SHIM_HEADER,
    TINY_CPU_HEADER,
    InlineBuilder,
)
from verifier.build.toolchain import _with_sandbox_compiler

COMMON_CFLAGS = (["-O3", "-fopenmp"], ["-O3"])
COMMON_SIGNATURES = ((("torch::Tensor", ("torch::Tensor",)),), (("torch::Tensor", ("torch::Tensor", "torch::Tensor")),))

_SAFE_FLAG = re.compile(
    r"-O[0-3sg]?|-Ofast|-fopenmp|-march=native|-mtune=native|-ffast-math|-funroll(-all)?-loops|-fno-[a-z0-9-]+"
    r"|-f(tree-vectorize|strict-aliasing|omit-frame-pointer|PIC)|-m(avx|avx2|avx512[a-z]*|fma|f16c|sse[0-9.]*|bmi2?)"
    r"|-std=(c|gnu)\+\+(14|17|20|23)|-D[A-Za-z_]\w*(=[\w.]+)?|-U[A-Za-z_]\w*|-Wno-[a-z0-9-]+|-w|-g0|-DNDEBUG")
_TYPE_WORDS = {"const", "torch", "at", "c10", "std", "Tensor", "Scalar", "ScalarType", "vector", "tuple", "optional",
               "int", "int64_t", "int32_t", "int16_t", "int8_t", "uint8_t", "uint32_t", "uint64_t", "size_t", "long",
               "unsigned", "signed", "short", "double", "float", "bool", "void", "IntArrayRef", "string"}


def safe_cflags(cflags: object) -> bool:
    """Flags the trusted side may compile a shared header with: optimisation and ISA flags, macros
    without paths; never includes, plugins, specs or output redirection."""
    return isinstance(cflags, list) and all(isinstance(f, str) and _SAFE_FLAG.fullmatch(f) for f in cflags)


def safe_type(text: str) -> bool:
    """A C++ parameter or return type made only of known type words and punctuation."""
    if not isinstance(text, str) or not re.fullmatch(r"[\w:<>,&\*\s]{1,200}", text):
        return False
    return all(word in _TYPE_WORDS for word in re.findall(r"[A-Za-z_]\w*", text))


_PCH_HEADERS = {"evk_tiny": TINY_CPU_HEADER, "evk_shim": SHIM_HEADER, "evk_full": FULL_PCH_HEADER}


def build_shared(root: str | Path, kind: str, spec: dict) -> bool:
    """Trusted side: build one requested artefact into `root` (the shared tree), after checking that
    everything taken from the request is harmless, with the compiler the sandbox uses. False when the
    request is refused."""
    with _with_sandbox_compiler():
        return _build_shared(root, kind, spec)


def _build_shared(root: str | Path, kind: str, spec: dict) -> bool:
    keep_locks_outside(root)
    builder = InlineBuilder(root)
    deadline = time.monotonic() + builder.timeout_s
    if kind == "pch" and spec.get("kind") in _PCH_HEADERS and safe_cflags(spec.get("cflags")):
        header = _PCH_HEADERS[spec["kind"]]
        builder._pch(spec["kind"], header, list(spec["cflags"]), deadline)
        return True
    if kind == "bind":
        raw = spec.get("signatures")
        if not isinstance(raw, list) or not raw or len(raw) > 32:
            return False
        sigs = []
        for item in raw:
            if not (isinstance(item, list) and len(item) == 2 and safe_type(item[0]) and isinstance(item[1], list)
                    and len(item[1]) <= 32 and all(safe_type(p) for p in item[1])):
                return False
            sigs.append(Signature(item[0], tuple(item[1])))
        with builder._binding_object(sigs, deadline):
            pass
        return True
    return False


def prewarm(root: str | Path, flag_sets=COMMON_CFLAGS, signatures=COMMON_SIGNATURES, bind_header: bool = True) -> None:
    """Build, as the trusted side, the light shim's precompiled header for the flag sets most kernels
    use and the bindings of the commonest signatures (with the sandbox's compiler)."""
    with _with_sandbox_compiler():
        _prewarm(root, flag_sets, signatures, bind_header)


def _prewarm(root: str | Path, flag_sets, signatures, bind_header: bool = True) -> None:
    keep_locks_outside(root)
    builder = InlineBuilder(root)
    # The commonest header and bindings first (those of the starter kernels), then the rest: a person's
    # first kernel does not wait behind artefacts it does not use.
    jobs = [(k, f) for f in flag_sets[:1] for k in ("evk_tiny", "evk_shim")] + [("bind", s) for s in signatures[:1]]
    jobs += [(k, f) for f in flag_sets[1:] for k in ("evk_tiny", "evk_shim")]
    if bind_header:
        jobs.append(("evk_full", list(BIND_FLAGS)))  # every later new signature's bindings: 9 s instead of 24 s
    jobs += [("bind", s) for s in signatures[1:]]
    for kind, what in jobs:
        deadline = time.monotonic() + builder.timeout_s  # each artefact its own time, as when asked for alone
        if kind in _PCH_HEADERS:
            builder._pch(kind, _PCH_HEADERS[kind], list(what), deadline)
            continue
        with builder._binding_object([Signature(r, tuple(p)) for r, p in what], deadline):
            pass


if __name__ == "__main__":
    import json

    if len(sys.argv) >= 4 and sys.argv[1] == "--shared":
        sys.exit(0 if build_shared(sys.argv[2], sys.argv[3], json.loads(sys.argv[4])) else 2)
    prewarm(sys.argv[1])
