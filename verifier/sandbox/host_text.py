"""Host facts out of the text a candidate controls (its error messages, tracebacks, build logs) before
that text reaches a verdict, the app and the next prompt (issue 37): the person's home, this project's
path, the build and cache roots and the private scratch become placeholders, and so do the host's
account names (accounts of people: uid 1000 and above, and whoever runs the verifier) and its host name.
The sandbox already shows synthetic `/etc/passwd`, `/etc/group` and `/etc/hosts`; this is the second line,
for what a candidate learns from paths it can see (its own job directory lies in the scratch, the
project's code is bound at its host path)."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable
from pathlib import Path

_MIN_NAME = 3  # shorter account names would match ordinary words


@functools.cache
def _accounts() -> tuple[str, ...]:
    names: set[str] = set()
    try:
        import pwd

        for entry in pwd.getpwall():
            if 1000 <= entry.pw_uid < 65534 or entry.pw_uid == os.getuid():
                names.add(entry.pw_name)
    except (ImportError, OSError):
        pass
    for var in ("USER", "LOGNAME"):
        if os.environ.get(var):
            names.add(os.environ[var])
    try:
        import socket

        names.add(socket.gethostname())
    except OSError:
        pass
    return tuple(sorted((n for n in names if len(n) >= _MIN_NAME and n not in ("root", "localhost")),
                        key=len, reverse=True))


@functools.cache
def _account_homes() -> tuple[str, ...]:
    homes: set[str] = set()
    try:
        import pwd

        for entry in pwd.getpwall():
            if (1000 <= entry.pw_uid < 65534 or entry.pw_uid == os.getuid()) and entry.pw_dir not in ("", "/"):
                homes.add(entry.pw_dir)
    except (ImportError, OSError):
        pass
    return tuple(homes)


_PSEUDO_FS = {"proc", "sysfs", "devtmpfs", "devpts", "cgroup", "cgroup2", "mqueue", "securityfs", "debugfs",
              "tracefs", "pstore", "bpf", "hugetlbfs", "configfs", "fusectl", "binfmt_misc", "autofs", "nsfs"}


def mount_table_paths(mountinfo: Path | str = "/proc/self/mountinfo") -> list[str]:
    """The host paths the sandbox's mount table can show that the sandbox does not otherwise see, read
    from the trusted side's own table (the sandbox's mounts are binds of these): a bind mount's source
    within its filesystem where it differs from where it is mounted (a container's volume shows its host
    directory there), and overlay layers (`lowerdir=`, `upperdir=`, `workdir=`). bubblewrap cannot hide
    `/proc/self/mountinfo` from a candidate (issue 37), so text that quotes it is scrubbed of these."""
    try:
        lines = Path(mountinfo).read_text().splitlines()
    except OSError:
        return []
    out: set[str] = set()

    def unescape(p: str) -> str:
        return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), p)

    for line in lines:
        fields = line.split(" ")
        if len(fields) < 10 or "-" not in fields:
            continue
        dash = fields.index("-")
        root, point, fstype = unescape(fields[3]), unescape(fields[4]), fields[dash + 1]
        if fstype not in _PSEUDO_FS and root not in ("/", point) and len(Path(root).parts) >= 3:
            out.update((root.rstrip("/"), fields[3].rstrip("/")))  # as read, and with \040 escapes as written
        for opt in (fields[dash + 3] if len(fields) > dash + 3 else "").split(","):
            key, _, value = opt.partition("=")
            if key in ("lowerdir", "upperdir", "workdir", "lowerdir+", "datadir+"):
                out.update(unescape(v).rstrip("/") for v in value.split(":") if len(Path(v).parts) >= 3)
    return sorted(out)


def host_paths(extra: Iterable[Path | str] = ()) -> list[tuple[str, str]]:
    """(path, placeholder) pairs, longest first, so that a path inside another keeps its own name."""
    pairs = {str(Path(__file__).resolve().parents[2]): "<project>"}
    for home in (*_account_homes(), str(Path.home())):
        pairs.setdefault(home, "<home>")
    for path in mount_table_paths():
        pairs.setdefault(path, "<host-path>")
    for p in extra:
        if p:
            pairs.setdefault(str(p), "<host-path>")
            with_real = str(Path(p).resolve()) if Path(p).exists() else str(p)
            pairs.setdefault(with_real, "<host-path>")
    return sorted(((k.rstrip("/"), v) for k, v in pairs.items() if len(k.rstrip("/")) > 1),
                  key=lambda kv: len(kv[0]), reverse=True)


def scrub(text: str, extra_paths: Iterable[Path | str] = ()) -> str:
    """`text` with the host's paths and account names replaced by placeholders."""
    if not text:
        return text
    for path, label in host_paths(extra_paths):
        text = text.replace(path, label)
    for name in _accounts():
        text = re.sub(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", "<user>", text)
    return text
