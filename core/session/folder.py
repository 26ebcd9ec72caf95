"""The session folder on disk: `session.json`, finding a session, the writer's lock, atomic writes."""

from __future__ import annotations

import json
import platform
from pathlib import Path

from core.fsutil import FolderLock, LockHeld, atomic_write_text, os_error_text
from core.session.records import FORMAT_VERSION, SessionError, SessionMeta


def load_meta(path: Path) -> SessionMeta:
    meta_path = Path(path) / "session.json"
    if not meta_path.exists():
        raise SessionError(f"{path} is not a session folder (no session.json)")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise SessionError(f"cannot read {meta_path}: {exc}") from None
    if not isinstance(meta, dict):
        raise SessionError(f"{meta_path} is not a session record; the session folder is damaged")
    if meta.get("format", 0) > FORMAT_VERSION:
        raise SessionError(f"{meta_path} was written by a newer evokernel (format {meta['format']}); upgrade to open it")
    return SessionMeta.from_dict(meta)


def check_not_open(path: Path) -> None:
    """SessionError naming the process that has the session at `path` open for writing, if another has.

    For callers that start something long before opening the session (the app); `Session.open` checks too.
    """
    lock = FolderLock(Path(path))
    try:
        lock.acquire()
    except LockHeld as exc:
        raise SessionError(f"session {Path(path).name} is open in {exc.holder}; close it there first "
                           f"(or wait for it to finish)") from None
    except OSError:
        return  # cannot lock here (read-only folder): opening it will say why
    lock.release()


def find_session(ref: str | Path, root: Path) -> Path:
    """A session folder from a path, an id under `root`, or a unique part of an id (prefix first)."""
    p = Path(ref)
    if (p / "session.json").exists():
        return p
    if (root / str(ref) / "session.json").exists():
        return root / str(ref)
    matches = [d for d in root.glob(f"{ref}*") if (d / "session.json").exists()] if root.is_dir() else []
    if not matches and root.is_dir():
        matches = [d for d in root.iterdir() if str(ref) in d.name and (d / "session.json").exists()]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise SessionError(f"'{ref}' matches {len(matches)} sessions under {root}; give more of the id")
    raise SessionError(f"no session '{ref}' (looked in {root}); see `evokernel sessions`")


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version(), "platform": platform.platform()}
    for pkg in ("evokernel-tui", "torch", "litellm"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def _atomic_write(path: Path, text: str) -> None:
    try:
        atomic_write_text(path, text)
    except OSError as exc:
        raise SessionError(f"cannot write {path}: {os_error_text(exc)}") from None


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in name)[:40] or "task"
