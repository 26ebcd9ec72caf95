"""The C++ a kernel compiles, found statically in its Python source, with numbered lines.

The verifier's diagnostics say `kernel.cpp:N` where N counts lines of the C++ text handed to
`load_inline` (its `cpp_sources` joined by newlines); the view numbers lines the same way and marks
the lines a diagnostic names, with the message under them. Nothing is imported or run: the text is
read from the AST (string literals, module-level names bound to them, lists and `+` of those).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from rich.console import Group
from rich.text import Text

_DIAG = re.compile(r"^(?:kernel\.cpp|C\+\+ line )[: ]?(\d+): (?:(error|fatal error|warning|note): )?(.*)$")

COMPILE_NOTE = (
    "compiled as kernel.cpp: line 1 is `#include \"evk_tiny.h\"` (the tiny Tensor: a torch-shaped "
    "header without torch, precompiled) or, when the kernel uses more of torch, `#include \"evk_shim.h\"` "
    "(a light torch/extension.h over ATen, precompiled), then the C++ below from line 2, then generated "
    "trampolines; the pybind11 bindings "
    "are a separate, cached object. A kernel that needs all of torch is built the plain load_inline way."
)


@dataclass
class EmbeddedCpp:
    """The C++ (and CUDA) text of one `load_inline` call, and the flags it passes."""

    name: str = ""
    cpp: str | None = None
    cuda: str | None = None
    functions: list[str] = field(default_factory=list)
    cflags: list[str] = field(default_factory=list)
    cuda_cflags: list[str] = field(default_factory=list)

    def command(self) -> str:
        """The compiler line(s) the CPU build runs for this kernel (include dirs elided)."""
        lines = [" ".join(["g++ -std=c++20 -fPIC -DTORCH_API_INCLUDE_EXTENSION_H -isystem <torch include dirs>",
                           *self.cflags, "-c kernel.cpp"])]
        if self.cuda is not None:
            lines.append(" ".join(["nvcc", *self.cuda_cflags, "-c cuda.cu"]))
        return "\n$ ".join(lines)


def _module_names(tree: ast.Module) -> dict[str, ast.AST]:
    names: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names[target.id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            names[node.target.id] = node.value
    return names


def _strings(node: ast.AST | None, names: dict[str, ast.AST], depth: int = 0) -> list[str] | None:
    """The string(s) an expression statically denotes, or None when it is built at run time."""
    if node is None or depth > 8:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Name) and node.id in names:
        return _strings(names[node.id], names, depth + 1)
    if isinstance(node, ast.List | ast.Tuple):
        out: list[str] = []
        for elt in node.elts:
            part = _strings(elt, names, depth + 1)
            if part is None:
                return None
            out += part
        return out
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _strings(node.left, names, depth + 1), _strings(node.right, names, depth + 1)
        if left is None or right is None:
            return None
        if len(left) == 1 and len(right) == 1:
            return [left[0] + right[0]]
        return left + right
    return None


def _is_load_inline(call: ast.Call) -> bool:
    func = call.func
    return (isinstance(func, ast.Attribute) and func.attr == "load_inline") or (
        isinstance(func, ast.Name) and func.id == "load_inline")


POSITIONAL = ("name", "cpp_sources", "cuda_sources", "functions", "extra_cflags", "extra_cuda_cflags")


def embedded_cpp(source: str) -> EmbeddedCpp | None:
    """The first `load_inline` call's sources and flags; None when the file has none or does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    names = _module_names(tree)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _is_load_inline(node)):
            continue
        args: dict[str, ast.AST] = dict(zip(POSITIONAL, node.args, strict=False))
        args.update({kw.arg: kw.value for kw in node.keywords if kw.arg})
        cpp = _strings(args.get("cpp_sources"), names)
        cuda = _strings(args.get("cuda_sources"), names)
        name = _strings(args.get("name"), names)
        return EmbeddedCpp(
            name=name[0] if name else "",
            cpp="\n".join(cpp) if cpp is not None else None,
            cuda="\n".join(cuda) if cuda is not None else None,
            functions=_strings(args.get("functions"), names) or [],
            cflags=_strings(args.get("extra_cflags"), names) or [],
            cuda_cflags=_strings(args.get("extra_cuda_cflags"), names) or [],
        )
    return None


def diagnostics_by_line(diagnostics: list[str]) -> dict[int, list[str]]:
    """`{12: ["error: expected ';'"]}` from `kernel.cpp:12: error: expected ';'` lines."""
    out: dict[int, list[str]] = {}
    for diag in diagnostics:
        m = _DIAG.match(diag.strip())
        if m:
            kind = m.group(2) or "error"
            out.setdefault(int(m.group(1)), []).append(f"{kind}: {m.group(3)}")
    return out


def numbered(text: str, marks: dict[int, list[str]] | None = None) -> Text:
    """Every line with its number; a marked line gets ▶ and its messages underneath."""
    marks = marks or {}
    lines = text.splitlines() or [""]
    width = len(str(len(lines)))
    out = Text(no_wrap=True, overflow="ellipsis")
    for n, line in enumerate(lines, start=1):
        bad = n in marks
        out.append(f"{n:>{width}} ", style="bold red" if bad else "dim")
        out.append("▶ " if bad else "  ", style="bold red")
        out.append(line + "\n", style="bold" if bad else "")
        for message in marks.get(n, []):
            style = "yellow" if message.startswith("warning") else "red"
            out.append(" " * (width + 3) + "└ " + message + "\n", style=style)
    missing = sorted(n for n in marks if n > len(lines))
    for n in missing:
        for message in marks[n]:
            out.append(f"line {n} (generated code after your C++): {message}\n", style="red")
    return out


def cpp_view(source: str, diagnostics: list[str] | None = None) -> Group:
    """The renderable the kernel pane shows when the C++ view is on."""
    found = embedded_cpp(source)
    if found is None:
        return Group(Text("No load_inline call found in this kernel: there is no C++ to show.", style="yellow"))
    marks = diagnostics_by_line(diagnostics or [])
    parts: list = [Text(f"$ {found.command()}", style="bold"), Text(COMPILE_NOTE, style="dim"), Text("")]
    if found.cpp is None:
        parts.append(Text("The C++ text is assembled at run time, so it cannot be shown before a build.",
                          style="yellow"))
    else:
        title = f"C++ ({found.name or 'extension'}: {', '.join(found.functions) or 'no functions listed'})"
        parts += [Text(title, style="bold underline"), numbered(found.cpp, marks)]
    if found.cuda is not None:
        parts += [Text(""), Text("CUDA sources", style="bold underline"), numbered(found.cuda)]
    if marks:
        parts.append(Text(f"{sum(len(v) for v in marks.values())} diagnostic(s) from the last verification",
                          style="dim"))
    return Group(*parts)
