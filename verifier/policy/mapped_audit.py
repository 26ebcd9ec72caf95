"""Audit what the sandbox has mapped, in every process of its PID namespace, not what a path holds now.

`binary_audit` reads an ELF file. Reading it *by path* after the candidate loaded it is a race the
candidate wins: it loads a kernel that calls `sgemm_`, then renames a clean build over the file (or
deletes it), and the audit reads the clean one. And auditing one pid is a decoy the candidate sets: it
forks, and the process that does the work is not the one audited. So:

* every process whose `/proc/P/ns/pid` is the harness's PID namespace is audited (without isolation,
  where the harness shares the verifier's namespace: the harness and its descendants);
* each executable file mapping from a place the candidate can write (the job directory, the private
  tmpfs mounts), every deleted or memfd mapping, and every mapping outside the read-only trusted trees
  is audited through the mapped object itself: `/proc/P/map_files/<range>` opens the very inode
  mapped, even when its path was replaced or deleted (needs CAP_SYS_ADMIN / CAP_CHECKPOINT_RESTORE in
  the initial user namespace, i.e. a verifier running as root);
* without that capability (an ordinary user: the sandbox's user namespace does not grant it), the file
  is opened through `/proc/P/root/<path>` and its (device, inode) compared with the ones
  `/proc/P/maps` records for the mapping: a file that is not the one mapped is a failure ("replaced
  after it was loaded"), as is a mapping that cannot be opened at all.

In-place rewrites of the same inode change the mapped pages too (text is shared with the page cache),
so what is audited is what runs, up to the private pages the loader relocated (the GOT).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from verifier.policy.rules import finding_rule

WRITABLE_PLACES = ("/tmp/", "/var/tmp/", "/dev/shm/", "/run/")
MAX_PROCESSES = 256  # a fork bomb in the namespace is audited up to this many processes, then fails


@dataclass(frozen=True)
class Mapping:
    pid: int
    start: int
    end: int
    perms: str
    dev: tuple[int, int]
    inode: int
    path: str  # " (deleted)" removed
    deleted: bool

    @property
    def range(self) -> str:
        return f"{self.start:x}-{self.end:x}"


def parse_maps(pid: int, text: str) -> list[Mapping]:
    """Executable file-backed mappings of one `/proc/PID/maps` text (pseudo mappings like [vdso] left out)."""
    out = []
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6 or "x" not in parts[1] or parts[5].startswith("["):
            continue
        try:
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            major, minor = (int(x, 16) for x in parts[3].split(":"))
            inode = int(parts[4])
        except ValueError:
            continue
        if inode == 0 and not parts[5].startswith("/"):
            continue
        path = parts[5]
        deleted = path.endswith(" (deleted)")
        out.append(Mapping(pid, lo, hi, parts[1], (major, minor), inode, path.removesuffix(" (deleted)"), deleted))
    return out


# pseudo mappings the kernel makes executable for every process: not code the process wrote
_KERNEL_MAPPINGS = ("[vdso]", "[vsyscall]", "[vvar]", "[uprobes]")


def anonymous_exec(text: str) -> list[tuple[str, str, int]]:
    """(range, permissions, bytes) of each executable mapping with no file behind it in one `/proc/PID/maps`
    text: anonymous memory made executable (mmap or mprotect with PROT_EXEC: a JIT, or code a candidate
    wrote at run time), an executable heap or stack. The binary audit reads files; these it never sees."""
    out = []
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 5 or "x" not in parts[1]:
            continue
        name = parts[5].strip() if len(parts) > 5 else ""
        if name and not name.startswith("["):
            continue  # a file (memfd and deleted files included): `audit_namespace` reads it
        if name in _KERNEL_MAPPINGS:
            continue
        try:
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
        except ValueError:
            continue
        out.append((parts[0], parts[1], hi - lo))
    return out


def anonymous_exec_in(pids: Iterable[int]) -> dict[tuple[int, str], tuple[str, int]]:
    """{(pid, range): (permissions, bytes)} of the anonymous executable mappings of `pids` now."""
    seen: dict[tuple[int, str], tuple[str, int]] = {}
    for p in pids:
        try:
            text = Path(f"/proc/{p}/maps").read_text()
        except OSError:
            continue
        for rng, perms, size in anonymous_exec(text):
            seen[(p, rng)] = (perms, size)
    return seen


def anonymous_exec_finding(seen: dict[tuple[int, str], tuple[str, int]]) -> tuple[str, str] | None:
    """The `anon-exec` finding for what `anonymous_exec_in` saw over a run (None when nothing)."""
    if not seen:
        return None
    total = sum(size for _perms, size in seen.values())
    writable = sum(1 for perms, _size in seen.values() if "w" in perms)
    return ("anon-exec", f"{len(seen)} executable memory region(s) with no file behind them ({total // 1024} KiB, "
                         f"{writable} writable and executable) in the sandbox's processes: code made at run time, "
                         "which the binary audit cannot read (torch's own oneDNN/MKL JIT for matmul or conv makes "
                         "such regions too)")


def _ns(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def _ppid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return int(fh.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def namespace_pids(pid: int) -> list[int]:
    """`pid` and every other process in its PID namespace (pid first). When that namespace is the
    verifier's own (no isolation), `pid` and its descendants instead."""
    ns = _ns(pid)
    if ns is None:
        return []
    own = ns == _ns(os.getpid())
    entries = [int(e) for e in os.listdir("/proc") if e.isdigit()]
    if own:
        parents = {e: _ppid(e) for e in entries}
        out, stack = [pid], [pid]
        while stack:
            cur = stack.pop()
            for child, parent in parents.items():
                if parent == cur and child not in out:
                    out.append(child)
                    stack.append(child)
        return out
    return [pid, *sorted(e for e in entries if e != pid and _ns(e) == ns)]


def is_candidate_writable(path: str, job_dir: Path | None, trusted: Iterable[Path]) -> bool:
    """A mapping the audit must read: from the job directory or a private tmpfs (minus read-only trees
    bound there), or from anywhere outside the trusted trees (memfd, /dev/shm objects, odd mounts)."""
    in_job = job_dir is not None and path.startswith(str(job_dir).rstrip("/") + "/")
    if in_job:
        return True
    protected = [str(p).rstrip("/") + "/" for p in trusted]
    place = next((w for w in WRITABLE_PLACES if path.startswith(w)), None)
    if place is not None:  # only a read-only tree bound *inside* the writable place protects it
        protected = [t for t in protected if t.startswith(place)]
    return not any(path.startswith(t) for t in protected)


def open_mapped(m: Mapping) -> int:
    """A read-only descriptor on the object `m` maps. Raises OSError with a one-line reason when the
    mapped object cannot be reached, or when the file at its path is not the one mapped."""
    try:
        fd = os.open(f"/proc/{m.pid}/map_files/{m.range}", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        fd = -1
    if fd >= 0:
        return fd
    if m.deleted or not m.path.startswith("/"):
        raise OSError(f"it was deleted after it was loaded ({m.path}), and the mapped object cannot be read")
    fd = os.open(f"/proc/{m.pid}/root{m.path}", os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    st = os.fstat(fd)
    if (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino) != (*m.dev, m.inode):
        os.close(fd)
        raise OSError("the file at its path was replaced after it was loaded (not the inode mapped)")
    return fd


@dataclass
class NamespaceAudit:
    findings: list[tuple[str, str]]
    processes: int
    job_objects: list[str]  # mapped executable objects from the job directory (the candidate's builds)
    anon_exec: dict  # (pid, range) -> (permissions, bytes): executable memory with no file (`anonymous_exec`)


def audit_namespace(pid: int, job_dir: Path | None, trusted: Iterable[Path],
                    audit_fn: Callable[[str], list], skip: Callable[[str, object], bool] | None = None
                    ) -> NamespaceAudit:
    """Audit every candidate-writable executable mapping of every process in `pid`'s namespace.
    `audit_fn(path)` returns `binary_audit.Finding`s (raises on unreadable ELF); `skip(path, finding)`
    drops findings that are expected (Triton's own launcher)."""
    from verifier.policy.binary_audit import AuditError

    trusted = list(trusted)
    findings: list[tuple[str, str]] = []
    seen: set[tuple[tuple[int, int], int, str]] = set()
    job_objects: list[str] = []

    def add(entry: tuple[str, str]) -> None:
        if entry not in findings:
            findings.append(entry)

    pids = namespace_pids(pid)
    if len(pids) > MAX_PROCESSES:
        add(("binary-import", f"{len(pids)} processes in the sandbox: too many to audit"))
        pids = pids[:MAX_PROCESSES]
    anon: dict[tuple[int, str], tuple[str, int]] = {}
    for p in pids:
        try:
            text = Path(f"/proc/{p}/maps").read_text()
        except OSError:
            continue  # exited meanwhile: its namespace dies with the harness
        for rng, perms, size in anonymous_exec(text):
            anon[(p, rng)] = (perms, size)
        for m in parse_maps(p, text):
            if not (m.deleted or not m.path.startswith("/") or is_candidate_writable(m.path, job_dir, trusted)):
                continue
            key = (m.dev, m.inode, m.path)
            if key in seen:
                continue
            seen.add(key)
            name = Path(m.path).name or m.path
            in_job = job_dir is not None and m.path.startswith(str(job_dir).rstrip("/") + "/")
            try:
                fd = open_mapped(m)
            except OSError as exc:
                add(("binary-import", f"{name} was loaded but cannot be audited: {exc.strerror or exc}"))
                continue
            try:
                found = audit_fn(f"/proc/self/fd/{fd}")
            except (AuditError, OSError) as exc:
                add(("binary-import", f"{name} was loaded but cannot be audited "
                                      f"({' '.join(str(exc).split())[:160]})"))
                continue
            finally:
                os.close(fd)
            if in_job and m.path not in job_objects:
                job_objects.append(m.path)
            for f in found:
                if skip is not None and skip(m.path, f):
                    continue
                add((finding_rule(f.family), f"{name} imports {f.symbol} ({f.family}): {f.reason}"))
    return NamespaceAudit(findings, len(pids), job_objects, anon)


def audit_objects(paths: Iterable[Path], audit_fn: Callable[[str], list]) -> list[tuple[str, str]]:
    """The kernel objects of a split build (`kernel.o`): one that cannot be parsed is a failure."""
    from verifier.policy.binary_audit import AuditError

    out: list[tuple[str, str]] = []
    for path in paths:
        try:
            with contextlib.ExitStack():
                found = audit_fn(str(path))
        except (AuditError, OSError) as exc:
            entry = ("binary-import", f"{path.name} cannot be audited ({' '.join(str(exc).split())[:160]})")
            if entry not in out:
                out.append(entry)
            continue
        for f in found:
            entry = (finding_rule(f.family), f"{path.name} imports {f.symbol} ({f.family}): {f.reason}")
            if entry not in out:
                out.append(entry)
    return out


def writable_mappings_in(maps: str, job_dir: Path | None, read_only: list[Path] | None = None) -> list[str]:
    """Paths of files mapped executable, in the text of a `/proc/PID/maps` file, from places a candidate
    can write (inside its view): the job directory and the private tmpfs mounts, minus the read-only
    trees bound over them (the project or a virtual environment may well live under /tmp)."""
    writable = ("/tmp/", "/var/tmp/", "/dev/shm/", "/run/", *([str(job_dir) + "/"] if job_dir else []))
    protected = tuple(str(p).rstrip("/") + "/" for p in (read_only or []))
    in_job = str(job_dir) + "/" if job_dir else None
    out = []
    for line in maps.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6 or "x" not in parts[1]:
            continue
        path = parts[5].replace(" (deleted)", "")
        if not path.startswith(writable) or path in out:
            continue
        if protected and path.startswith(protected) and not (in_job and path.startswith(in_job)):
            continue
        out.append(path)
    return out
