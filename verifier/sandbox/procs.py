"""Processes, read from /proc with the standard library only (the sandbox's supervisor imports this too):
whether a pid is alive, and the live descendants of a process. One place, so every caller agrees on
what a zombie or an unreadable entry means."""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """Whether `pid` names a live process: not gone and not a zombie (one we may not signal still counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False  # gone between the signal and the read
    except IndexError:
        return True


def children_map() -> dict[int, list[int]]:
    """parent pid -> its children's pids, over every process we can read."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                ppid = int(fh.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    return children


def descendants(root: int) -> list[int]:
    """Every live descendant of `root` (not `root` itself), parents before their children."""
    children = children_map()
    out, stack = [], [root]
    while stack:
        for child in children.get(stack.pop(), []):
            out.append(child)
            stack.append(child)
    return out
