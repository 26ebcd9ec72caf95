"""Parse compiler output into short `file:line: message` diagnostics for people and models."""

from __future__ import annotations

import re

_GCC = re.compile(
    r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?:(?P<col>\d+):)?\s*(?P<kind>fatal error|error|warning)\s*:\s*(?P<msg>.*)$"
)
_NVCC = re.compile(r"^(?P<file>[^\s(][^(]*)\((?P<line>\d+)\):\s*(?P<kind>error|warning)\s*:?\s*(?P<msg>.*)$")
_LINKER = re.compile(r"(undefined reference to .*|cannot find -l\S+|multiple definition of .*)")


def parse_diagnostics(output: str, line_offset: int = 0, limit: int = 30) -> list[str]:
    """Errors first, then warnings; `line_offset` maps generated-file lines back to the person's source."""
    errors: list[str] = []
    warnings: list[str] = []
    for raw in output.splitlines():
        line = raw.strip()
        m = _GCC.match(line) or _NVCC.match(line)
        if m:
            file = m.group("file").rsplit("/", 1)[-1]
            lineno = max(1, int(m.group("line")) - line_offset)
            text = f"{file}:{lineno}: {m.group('kind')}: {m.group('msg').strip()}"
            (warnings if m.group("kind") == "warning" else errors).append(text)
            continue
        lm = _LINKER.search(line)
        if lm:
            errors.append(f"link: error: {lm.group(1).strip()}")
    seen: set[str] = set()
    unique = [d for d in errors + warnings if not (d in seen or seen.add(d))]  # type: ignore[func-returns-value]  # add() is None: first sightings kept
    return unique[:limit]


def first_error(diagnostics: list[str], output: str) -> str:
    """The one line to show when a build fails."""
    for d in diagnostics:
        if ": error:" in d or ": fatal error:" in d:
            return d
    lines = [ln.strip() for ln in output.strip().splitlines() if ln.strip()]
    # "cc1plus: fatal error: ..." carries no line number, and gcc ends with "compilation terminated."
    said = [ln for ln in lines if "error:" in ln]
    if said:
        return said[0][:300]
    return lines[-1][:300] if lines else "the compiler failed without output"


_KERNEL_LINE = re.compile(r"^(kernel\.cpp|main\.cpp):(\d+): ")


def locate_in_file(diagnostics: list[str], source: str, file_text: str) -> list[str]:
    """Add `[file line M]` to `kernel.cpp:N:` diagnostics: where line N of the embedded C++ `source`
    sits in the Python file the person edits. Lines that cannot be placed are left as they are."""
    start = file_text.find(source) if source else -1
    offset = file_text.count("\n", 0, start) if start >= 0 else None
    src_lines = source.splitlines()
    file_lines = file_text.splitlines()
    out = []
    for diag in diagnostics:
        m = _KERNEL_LINE.match(diag)
        line = None
        if m:
            n = int(m.group(2))
            if offset is not None:
                line = offset + n
            elif 0 < n <= len(src_lines) and src_lines[n - 1].strip():
                hits = [i + 1 for i, text in enumerate(file_lines) if text == src_lines[n - 1]]
                line = hits[0] if len(hits) == 1 else None
        out.append(f"{diag} [file line {line}]" if line else diag)
    return out
