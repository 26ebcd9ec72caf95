"""What the dynamic linker will see of an ELF object, read with pyelftools: the symbols it imports and
exports, its DT_NEEDED libraries, run paths and loader tags (DT_AUDIT, filters). The reading half of
`verifier.policy.binary_audit`, which classifies what is read here; kept apart so the audit's rules are not
mixed with ELF's structures. A file that cannot be read raises `AuditError` (one line), never a
traceback.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elftools.common.utils import parse_cstring_from_stream, struct_parse
from elftools.elf.dynamic import DynamicSegment
from elftools.elf.elffile import ELFFile
from elftools.elf.relocation import RelrRelocationTable
from elftools.elf.sections import SymbolTableSection


class AuditError(Exception):
    """The file cannot be audited (missing, unreadable, not ELF, malformed). The message is one line."""


@dataclass(frozen=True)
class ElfInfo:
    """What the dynamic linker will see: imports, exports, libraries and search paths."""

    kind: str  # "shared object", "object file", "executable"
    imported: frozenset[str]
    exported: frozenset[str]
    needed: tuple[str, ...]
    run_paths: tuple[str, ...]
    loader_tags: tuple[str, ...]  # DT_AUDIT, DT_DEPAUDIT, DT_AUXILIARY, DT_FILTER entries ("TAG=value")


_LOADER_TAGS = {"DT_AUDIT", "DT_DEPAUDIT", "DT_AUXILIARY", "DT_FILTER"}
_LOADER_TAG_VALUES = {0x6FFFFEFC: "DT_AUDIT", 0x6FFFFEFB: "DT_DEPAUDIT", 0x7FFFFFFD: "DT_AUXILIARY",
                      0x7FFFFFFF: "DT_FILTER"}


def _strip_version(name: str) -> str:
    return name.split("@", 1)[0]


def _symbol_sets(symbols: Iterable[tuple[str, Any]], imported: set[str], exported: set[str]) -> None:
    """Sort (name, Elf_Sym entry) pairs into imported (undefined) and exported (defined, default
    visibility) global names."""
    for raw, sym in symbols:
        name = _strip_version(raw or "")
        if not name:
            continue
        bind = sym["st_info"]["bind"]
        if bind not in ("STB_GLOBAL", "STB_WEAK", "STB_GNU_UNIQUE"):
            continue
        if sym["st_shndx"] == "SHN_UNDEF":
            imported.add(name)
        elif sym["st_other"]["visibility"] == "STV_DEFAULT" and sym["st_info"]["type"] != "STT_SECTION":
            exported.add(name)


def _section_symbols(sec: SymbolTableSection):
    return ((sym.name, sym.entry) for sym in sec.iter_symbols())


def _dynamic_string(elf: ELFFile, seg: DynamicSegment, offset: int) -> str:
    _, strtab = seg.get_table_offset("DT_STRTAB")
    if strtab is None:
        return str(offset)
    raw = parse_cstring_from_stream(elf.stream, strtab + offset) or b""
    return raw.decode("utf-8", errors="replace")


def _segment_symbols(elf: ELFFile, seg: DynamicSegment, indices: Iterable[int]):
    """Symbols as the loader finds them: DT_SYMTAB entries named through DT_STRTAB (read directly:
    pyelftools' per-symbol lookup rescans the dynamic tags every time)."""
    _, symtab = seg.get_table_offset("DT_SYMTAB")
    _, strtab = seg.get_table_offset("DT_STRTAB")
    if symtab is None or strtab is None:
        return
    sym_struct = elf.structs.Elf_Sym
    size = sym_struct.sizeof()
    for i in indices:
        entry = struct_parse(sym_struct, elf.stream, symtab + i * size)
        name = parse_cstring_from_stream(elf.stream, strtab + entry["st_name"]) or b""
        yield name.decode("utf-8", errors="replace"), entry


def read_elf(path: str | os.PathLike) -> ElfInfo:
    """Parse `path` (a shared object, object file or executable). Raises AuditError, never a traceback."""
    p = Path(path)
    try:
        with open(p, "rb") as fh:
            if fh.read(4) != b"\x7fELF":
                raise AuditError(f"{p} is not an ELF shared object or object file: audit the built .so or .o")
            fh.seek(0)
            return _parse(ELFFile(fh), p)
    except AuditError:
        raise
    except OSError as exc:
        raise AuditError(f"cannot read {p}: {exc.strerror or exc}; build the extension again") from exc
    except Exception as exc:  # pyelftools raises ELFError and many other types on corrupt input: fail closed
        detail = " ".join(str(exc).split())[:120] or type(exc).__name__
        raise AuditError(f"{p} is a malformed ELF file ({detail}): rebuild it; it cannot be audited") from exc


def _parse(elf: ELFFile, p: Path) -> ElfInfo:
    etype = elf["e_type"]
    imported: set[str] = set()
    exported: set[str] = set()
    needed: list[str] = []
    run_paths: list[str] = []
    loader_tags: list[str] = []
    if etype == "ET_REL":
        for sec in elf.iter_sections():
            if isinstance(sec, SymbolTableSection) and sec["sh_type"] == "SHT_SYMTAB":
                _symbol_sets(_section_symbols(sec), imported, exported)
        return ElfInfo("object file", frozenset(imported), frozenset(exported), (), (), ())
    if etype not in ("ET_DYN", "ET_EXEC"):
        raise AuditError(f"{p} is an ELF file of type {etype}, not a shared object or object file")
    # The section headers are what tools read; the loader reads the dynamic segment. A post-processed
    # file can make them disagree, so both are read and the union is audited.
    for sec in elf.iter_sections():
        if isinstance(sec, SymbolTableSection) and sec["sh_type"] == "SHT_DYNSYM":
            _symbol_sets(_section_symbols(sec), imported, exported)
    for seg in elf.iter_segments():
        if not isinstance(seg, DynamicSegment):
            continue
        # relocations may name symbols past the count the hash table gives: read those as well
        count = seg.num_symbols()
        wanted = set(range(count))
        for table in seg.get_relocation_tables().values():
            if isinstance(table, RelrRelocationTable):
                # packed relative relocations (`-z pack-relative-relocs`, DT_RELR): addresses only, no symbol
                # (reading one for `r_info_sym` refused every such honest build as malformed)
                continue
            wanted.update(rel["r_info_sym"] for rel in table.iter_relocations())  # type: ignore[attr-defined]  # TypedDict values() is object
        _symbol_sets(_segment_symbols(elf, seg, sorted(wanted)), imported, exported)
        for tag in seg.iter_tags():
            name = tag.entry.d_tag
            if isinstance(name, int):
                name = _LOADER_TAG_VALUES.get(name, str(name))
            if name == "DT_NEEDED":
                needed.append(tag.needed)  # type: ignore[attr-defined]  # set by setattr for DT_NEEDED
            elif name == "DT_RPATH":
                run_paths.extend(x for x in tag.rpath.split(":") if x)  # type: ignore[attr-defined]  # ditto
            elif name == "DT_RUNPATH":
                run_paths.extend(x for x in tag.runpath.split(":") if x)  # type: ignore[attr-defined]  # ditto
            elif name in _LOADER_TAGS:
                loader_tags.append(f"{name}={_dynamic_string(elf, seg, tag.entry.d_val)}")
    kind = "shared object" if etype == "ET_DYN" else "executable"
    return ElfInfo(kind, frozenset(imported), frozenset(exported), tuple(dict.fromkeys(needed)),
                   tuple(dict.fromkeys(run_paths)), tuple(loader_tags))


def imported_symbols(path: str | os.PathLike) -> set[str]:
    """Undefined (imported) symbols, version suffixes stripped: `.dynsym` for a shared object,
    `.symtab` for an object file."""
    return set(read_elf(path).imported)


def exported_symbols(path: str | os.PathLike) -> set[str]:
    """Defined global symbols with default visibility (what the object offers to, or takes over from,
    the dynamic linker)."""
    return set(read_elf(path).exported)


def needed_libraries(path: str | os.PathLike) -> list[str]:
    """DT_NEEDED entries in order (empty for an object file)."""
    return list(read_elf(path).needed)
