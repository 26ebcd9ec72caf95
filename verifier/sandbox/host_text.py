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


def host_paths(extra: Iterable[Path | str] = ()) -> list[tuple[str, str]]:
    """(path, placeholder) pairs, longest first, so that a path inside another keeps its own name."""
    pairs = {str(Path(__file__).resolve().parents[2]): "<project>"}
    for home in (*_account_homes(), str(Path.home())):
        pairs.setdefault(home, "<home>")
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
