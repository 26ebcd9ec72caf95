"""The person's own edits of the kernel: the kernel pane (ctrl+s), $EDITOR, and saves picked up from disk.

`KernelEditor` is a collaborator `EvoKernelApp` (evokernel_tui/app.py) holds, not a mixin: every edit becomes
a `submit_human_edit` session call; a save made while a call runs waits for it (`take_deferred`). What it
uses of the app is named in `EditsHost`, so this file reads alone.
"""

from __future__ import annotations

import difflib
import os
import shlex
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from textual.app import SuspendNotSupported

from evokernel_tui.view import source_of
from evokernel_tui.watcher import KernelFileWatcher

if TYPE_CHECKING:
    from core.session.port import SessionPort


def change_summary(before: str, after: str) -> str:
    """`+3 −1 lines` between two versions of the kernel."""
    added = removed = 0
    for line in difflib.ndiff(before.splitlines(), after.splitlines()):
        added += line.startswith("+ ")
        removed += line.startswith("- ")
    return f"+{added} −{removed} lines"


class EditCalls(Protocol):
    """The session call an edit starts (`SessionCalls`, evokernel_tui/session_calls.py)."""

    def submit_human_edit(self, label: str, source: str) -> bool: ...


class EditsHost(Protocol):
    """What the kernel edits use of the app: the open session and its view, the panes, the session calls,
    Textual's suspend and messages."""

    session: SessionPort | None
    view: Any

    @property
    def KernelFileChanged(self) -> Any: ...  # the message type (a nested class of the app)

    @property
    def calls(self) -> EditCalls: ...
    @property
    def running(self) -> str | None: ...

    @property
    def activity(self) -> Any: ...

    def _report(self, text: str, severity: str = "error") -> None: ...

    def busy_with(self) -> str | None: ...

    def suspend(self) -> Any: ...

    def post_message(self, message: Any) -> bool: ...


class KernelEditor:
    """Takes the person's edits into the app's session and watches the kernel file: the session's copy
    (`watch_file`) and, with `tui --watch FILE`, the person's own (`watch_path`), each save debounced by
    `debounce` seconds."""

    def __init__(self, host: EditsHost, watch_file: bool = True, watch_path: Path | None = None,
                 debounce: float = 0.3) -> None:
        self._host = host
        self._watch_file = watch_file
        #: a kernel file of the person's own (`tui --watch FILE`), watched beside the session's copy
        self._watch_path = Path(watch_path) if watch_path is not None else None
        self._debounce = debounce
        self._watcher: KernelFileWatcher | None = None
        self._own_watcher: KernelFileWatcher | None = None
        self._deferred_edit: str | None = None
        self._deferred_name: str | None = None

    def submit(self, source: str, origin: str) -> bool:
        """Verify `source` as the person's edit; its own save of the file is not picked up again.

        The starter as written is verified the same way but recorded by core as the starter's ("seed"),
        crediting no memories; the activity line says so."""
        host = self._host
        if self._watcher is not None:
            self._watcher.note_own_write(source)
        if host.view.author == "starter" and source.strip() == (host.view.source or "").strip():
            started = host.calls.submit_human_edit("verify the starter", source)
            if started:
                host.activity.note("Verifying the starter kernel as written: recorded as the starter's, "
                                   "crediting no memories.")
            return started
        started = host.calls.submit_human_edit(f"verify your edit ({origin})", source)
        if started:
            host.activity.note(f"Verifying your edit from {origin} ({change_summary(host.view.source, source)}).")
        return started

    def edit_external(self) -> None:
        """$VISUAL or $EDITOR (vi) on the session's kernel file; a changed file is verified as an edit."""
        host = self._host
        if host.session is None or host.busy_with():
            host._report("Wait for the running call to finish before editing." if host.session else
                         "No session open: press o to open a task.", "warning")
            return
        path = Path(host.session.kernel_path)
        before = path.read_text() if path.exists() else ""
        command = shlex.split(os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi") + [str(path)]
        try:
            try:
                with host.suspend():
                    subprocess.run(command, check=False)
            except SuspendNotSupported:
                subprocess.run(command, check=False, stdin=subprocess.DEVNULL, capture_output=True)
        except OSError as exc:
            host._report(f"Could not start the editor {command[0]!r}: {exc}. Set $EDITOR to one that exists.")
            return
        after = path.read_text() if path.exists() else before
        if after == before or after == host.session.current_source:
            host._report("The editor closed without changing the kernel.", "information")
            return
        self.submit(after, "$EDITOR")

    def attach(self, session: SessionPort) -> None:
        """A session was attached: watch its kernel file (when `watch_file`) and the person's own."""
        host = self._host
        self.stop()
        if self._watch_file and getattr(session, "kernel_path", None):
            def saved(text: str) -> None:
                host.post_message(host.KernelFileChanged(text))

            self._watcher = KernelFileWatcher(Path(session.kernel_path), saved, self._debounce).start()
            self._watcher.note_own_write(session.current_source)
        self._watch_own_file()

    def note_own_write(self, text: str) -> None:
        """The session (not the person) wrote `text` to its kernel file: not an edit when it is seen."""
        if self._watcher is not None:
            self._watcher.note_own_write(text)

    def _watch_own_file(self) -> None:
        """`tui --watch FILE`: watch the person's own kernel file too. Its content, when it differs from the
        session's kernel, is taken at once as their edit; then every save of it, as a save of the session's
        copy is. The file is only read: the model's kernels go to the session's copy, never into it."""
        host = self._host
        path = self._watch_path
        if path is None or host.session is None:
            return
        def saved(text: str) -> None:
            host.post_message(host.KernelFileChanged(text, path))

        self._own_watcher = KernelFileWatcher(path, saved, self._debounce).start()
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            host._report(f"Cannot read the watched file {path}: {getattr(exc, 'strerror', None) or exc}.")
            return
        host.activity.note(f"Watching {path}: each save is verified as your edit.")
        if text.strip() and text != host.session.current_source:
            host.post_message(host.KernelFileChanged(text, path))

    def file_changed(self, message: Any) -> None:
        """A watched file was saved (`KernelFileChanged`, on the app's thread): verify it now, or once the
        running call has finished."""
        host = self._host
        s = host.session
        if s is None or message.text in (s.current_source, source_of(s.pending)):
            return
        name = self._saved_name(message, s)
        if host.busy_with():
            self._deferred_edit = message.text
            self._deferred_name = name
            running = host.running or "the running call"
            host.activity.note(f"Picked up a save of {name}; it will be verified once "
                               f"the running call ({running}) has finished.")
            return
        self._take_file_edit(message.text, name)

    def take_deferred(self) -> None:
        """A session call finished: verify the save that waited for it, if any."""
        if self._deferred_edit is not None:
            text, self._deferred_edit = self._deferred_edit, None
            self._take_file_edit(text)

    def _saved_name(self, message: Any, session: SessionPort) -> str:
        path = getattr(message, "path", None)
        return str(path) if path is not None else Path(session.kernel_path).name

    def _take_file_edit(self, text: str, name: str | None = None) -> None:
        session = self._host.session
        if session is None or text == session.current_source:
            return
        name = name or self._deferred_name or Path(session.kernel_path).name
        self._deferred_name = None
        self._host.activity.note(f"Picked up a save of {name} from disk ({change_summary(session.current_source, text)}).")
        self.submit(text, f"a save of {name}")

    def stop(self) -> None:
        """Stop watching (a new session is attached, or the app ends)."""
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        if self._own_watcher is not None:
            self._own_watcher.stop()
            self._own_watcher = None
