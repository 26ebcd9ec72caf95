"""The `evokernel` command as the person's shell can run it, for every message that prints a command.

After `scripts/setup.sh` the command lives in `.venv/bin/evokernel`, which is not on PATH until the venv
is activated: a message saying `evokernel tui --session ID` then answers "command not found". Messages
are written with plain `evokernel …` (readable in the source and the docs); `runnable` rewrites them, at
the points where they reach the person, to the command that runs from where they stand.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

NAME = "evokernel"
SUBCOMMANDS = ("verify", "compare", "tasks", "memory", "draft", "resume", "replay", "sessions", "tui", "bench")
# a command as messages write one: `evokernel SUBCOMMAND` in backticks, or after "with: " / a line's start;
# never prose ("not an evokernel bench file"), a path part (`~/.cache/evokernel/builds`) or `evokernel:`
_COMMAND = re.compile(rf"(?:(?<=`)|(?<=: )|^)evokernel(?= (?:{'|'.join(SUBCOMMANDS)})\b)", re.M)


def _script() -> Path | None:
    """The `evokernel` script this process was started from, else the one beside this Python (the venv's)."""
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is not None and argv0.name == NAME and argv0.is_file():
        return argv0
    beside = Path(sys.executable).parent / NAME
    return beside if beside.is_file() else None


def evokernel_command(cwd: Path | None = None) -> str:
    """`evokernel` when that name on PATH is this installation; else the script's path, relative to the
    working directory when it lies under it (`.venv/bin/evokernel`), absolute otherwise."""
    script = _script()
    if script is None:
        return NAME
    found = shutil.which(NAME)
    try:
        if found and Path(found).resolve() == script.resolve():
            return NAME
        absolute = Path(os.path.abspath(script))
        here = Path(os.path.abspath(cwd or Path.cwd()))
        relative = str(absolute.relative_to(here))
        return relative if "/" in relative else f"./{relative}"
    except ValueError:
        return str(absolute)
    except OSError:
        return NAME


def runnable(text: str, command: str | None = None) -> str:
    """`text` with every `evokernel SUBCOMMAND` written as the command that runs here (`evokernel_command`)."""
    command = command or evokernel_command()
    if command == NAME or NAME not in text:
        return text
    return _COMMAND.sub(lambda _m: command, text)
