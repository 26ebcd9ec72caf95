"""C++ declarations read from a kernel's source and the pybind11 bindings written for them.

The split build (`verifier.build.split_build`) compiles a kernel apart from its bindings: the bindings TU is keyed
by the declared functions' signatures only, so it is cached across versions of a kernel and can be
built once by the trusted side. This module is that text work: forward declarations found in the
source, each parsed into a `Signature`, and the binding sources (per module name, or shared by
signature through hidden trampolines). No compiler runs here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


def _strip_comments(src: str) -> str:
    src = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), src, flags=re.S)
    return re.sub(r"//[^\n]*", "", src)


def extract_declarations(source: str, functions: list[str]) -> list[str] | None:
    """Forward declarations for `functions`, read from their definitions; None when one can't be found."""
    clean = _strip_comments(source)
    decls = []
    for fn in functions:
        pattern = re.compile(
            r"(?:^|[;}\n])\s*((?:template\s*<[^>]*>\s*)?(?:static\s+|inline\s+)*[\w:<>,\s\*&]+?[\s\*&])"
            + re.escape(fn)
            + r"\s*\(([^()]*(?:\([^()]*\)[^()]*)*)\)\s*(?:const\s*)?\{",
            re.S,
        )
        m = pattern.search(clean)
        if not m or "template" in m.group(1) or "static" in m.group(1):
            return None
        ret = " ".join(m.group(1).split()).replace("inline ", "")
        params = re.sub(r"=\s*[^,]+", "", " ".join(m.group(2).split()))
        decls.append(f"{ret} {fn}({params});")
    return decls


@dataclass(frozen=True)
class Signature:
    """A bound function's C++ return type and parameter types (names dropped)."""

    ret: str
    params: tuple[str, ...]


_PARAM_NAME = re.compile(r"^(?P<type>.*?[\w>\*&\s])\s*\b(?P<name>[A-Za-z_]\w*)\s*$")


def signature_of(decl: str, fn: str) -> Signature | None:
    """`torch::Tensor f(const torch::Tensor& x, int64_t n);` -> Signature("torch::Tensor", ("const torch::Tensor&", "int64_t"))."""
    m = re.fullmatch(r"\s*(?P<ret>.+?)\s+" + re.escape(fn) + r"\((?P<params>.*)\);\s*", decl, re.S)
    if not m:
        return None
    params = []
    raw = m.group("params").strip()
    for part in ([] if raw in ("", "void") else _split_params(raw)):
        pm = _PARAM_NAME.match(part.strip())
        if not pm or "[" in part or "(" in part:
            return None
        ptype = " ".join(pm.group("type").split())
        if not ptype or ptype in ("const", "unsigned", "signed", "long", "short"):
            return None
        params.append(ptype)
    return Signature(" ".join(m.group("ret").split()), tuple(params))


def _split_params(raw: str) -> list[str]:
    """Split on top-level commas (not those inside template brackets)."""
    parts, depth, cur = [], 0, ""
    for ch in raw:
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return parts


_HIDDEN = '__attribute__((visibility("hidden")))'


def _trampolines(fns: list[str], sigs: list[Signature]) -> str:
    """Appended to the kernel TU: a pointer and a name per bound function, read by the shared bindings."""
    lines = ["// EvoKernel: entry points for the signature-keyed Python bindings (hidden: never interposed",
             "// by another loaded extension's symbols of the same name)"]
    for i, (fn, sig) in enumerate(zip(fns, sigs, strict=True)):
        lines.append(f"{_HIDDEN} {sig.ret} (*evk_fn{i})({', '.join(sig.params)}) = &{fn};")
        lines.append(f'{_HIDDEN} const char* evk_name{i} = "{fn}";')
    return "\n".join(lines) + "\n"


def _shared_bindings(module: str, sigs: list[Signature]) -> str:
    """A pybind11 module that binds `evk_fn<i>` under the names `evk_name<i>` chosen at load time, with the
    operations of the tiny Tensor (`verifier.build.tiny_tensor`) that CUDA kernel TUs may call."""
    externs, defs = [], []
    for i, sig in enumerate(sigs):
        externs.append(f"extern {_HIDDEN} {sig.ret} (*evk_fn{i})({', '.join(sig.params)});")
        externs.append(f"extern {_HIDDEN} const char* evk_name{i};")
        args = ", ".join(f"{t} a{j}" for j, t in enumerate(sig.params))
        call = ", ".join(f"a{j}" for j in range(len(sig.params)))
        defs.append(f"  m.def(evk_name{i}, []({args}) {{ return evk_fn{i}({call}); }});")
    from verifier.build.tiny_tensor import BRIDGE_SOURCE

    return ("#include <torch/extension.h>\n" + "\n".join(externs) + BRIDGE_SOURCE + f"\nPYBIND11_MODULE({module}, m) {{\n"
            + "\n".join(defs) + "\n}\n")


def _bindings(name: str, functions: list[str]) -> str:
    defs = "\n".join(f'  m.def("{fn}", &{fn}, "{fn}");' for fn in functions)
    return f"PYBIND11_MODULE({name}, m) {{\n{defs}\n}}\n"
