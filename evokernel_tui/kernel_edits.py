"""The person's own edits of the kernel: the kernel pane (ctrl+s), $EDITOR, and saves picked up from disk.

A mixin of `EvoKernelApp` (evokernel_tui/app.py): every edit becomes a `submit_human_edit` session call;
a save made while a call runs waits for it (`_deferred_edit`).
"""

from __future__ import annotations

import difflib
import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

from textual.app import SuspendNotSupported

from evokernel_tui.view import source_of
from evokernel_tui.watcher import KernelFileWatcher
from evokernel_tui.widgets.kernel_pane import KernelPane


def change_summary(before: str, after: str) -> str:
    """`+3 −1 lines` between two versions of the kernel."""
    added = removed = 0
    for line in difflib.ndiff(before.splitlines(), after.splitlines()):
        added += line.startswith("+ ")
        removed += line.startswith("- ")
    return f"+{added} −{removed} lines"


class KernelEdits:
    """Takes the person's edits into `EvoKernelApp`'s session and watches the kernel file."""

    def submit_edit(self, source: str, origin: str) -> bool:
        """Verify `source` as the person's edit; its own save of the file is not picked up again.

        The starter as written is verified the same way but recorded by core as the starter's ("seed"),
        crediting no memories; the activity line says so."""
        if self._watcher is not None:
            self._watcher.note_own_write(source)
        if self.view.author == "starter" and source.strip() == (self.view.source or "").strip():
            started = self._start("verify the starter", self._plain_call("submit_human_edit", source))
            if started:
                self.activity.note("Verifying the starter kernel as written: recorded as the starter's, "
                                   "crediting no memories.")
            return started
        started = self._start(f"verify your edit ({origin})", self._plain_call("submit_human_edit", source))
        if started:
            self.activity.note(f"Verifying your edit from {origin} ({change_summary(self.view.source, source)}).")
        return started

    def on_kernel_pane_submitted(self, message: KernelPane.Submitted) -> None:
        self.submit_edit(message.source, "the kernel pane")

    def action_edit_external(self) -> None:
        if self.session is None or self._busy_with():
            self._report("Wait for the running call to finish before editing." if self.session else
                         "No session open: press o to open a task.", "warning")
            return
        path = Path(self.session.kernel_path)
        before = path.read_text() if path.exists() else ""
        command = shlex.split(os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi") + [str(path)]
        try:
            try:
                with self.suspend():
                    subprocess.run(command, check=False)
            except SuspendNotSupported:
                subprocess.run(command, check=False, stdin=subprocess.DEVNULL, capture_output=True)
        except OSError as exc:
            self._report(f"Could not start the editor {command[0]!r}: {exc}. Set $EDITOR to one that exists.")
            return
        after = path.read_text() if path.exists() else before
        if after == before or after == self.session.current_source:
            self._report("The editor closed without changing the kernel.", "information")
            return
        self.submit_edit(after, "$EDITOR")

    def _watch_own_file(self) -> None:
        """`tui --watch FILE`: watch the person's own kernel file too. Its content, when it differs from the
        session's kernel, is taken at once as their edit; then every save of it, as a save of the session's
        copy is. The file is only read: the model's kernels go to the session's copy, never into it."""
        path = self._watch_path
        if path is None or self.session is None:
            return
        self._own_watcher = KernelFileWatcher(
            path, lambda text: self.post_message(self.KernelFileChanged(text, path)), self._debounce).start()
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            self._report(f"Cannot read the watched file {path}: {getattr(exc, 'strerror', None) or exc}.")
            return
        self.activity.note(f"Watching {path}: each save is verified as your edit.")
        if text.strip() and text != self.session.current_source:
            self.post_message(self.KernelFileChanged(text, path))

    def on_evo_kernel_app_kernel_file_changed(self, message: Any) -> None:
        s = self.session
        if s is None or message.text in (s.current_source, source_of(s.pending)):
            return
        name = self._saved_name(message)
        if self._busy_with():
            self._deferred_edit = message.text
            self._deferred_name = name
            running = self.running or "the running call"
            self.activity.note(f"Picked up a save of {name}; it will be verified once "
                               f"the running call ({running}) has finished.")
            return
        self._take_file_edit(message.text, name)

    def _saved_name(self, message: Any) -> str:
        path = getattr(message, "path", None)
        return str(path) if path is not None else Path(self.session.kernel_path).name

    def _take_file_edit(self, text: str, name: str | None = None) -> None:
        if self.session is None or text == self.session.current_source:
            return
        name = name or getattr(self, "_deferred_name", None) or Path(self.session.kernel_path).name
        self._deferred_name = None
        self.activity.note(f"Picked up a save of {name} from disk ({change_summary(self.session.current_source, text)}).")
        self.submit_edit(text, f"a save of {name}")

    def on_unmount(self) -> None:
        self._stop_watcher()

    def _stop_watcher(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        if getattr(self, "_own_watcher", None) is not None:
            self._own_watcher.stop()
            self._own_watcher = None
