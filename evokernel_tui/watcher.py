"""Watch the session's kernel file for saves from any editor.

The observer watches the file's directory, not the file, because editors such as vim and VS Code
may save by writing a temp file and renaming it over the original (a new inode). Bursts of events
from one save are debounced into one, and a save whose content matches what the app last wrote or
handled is dropped, so each real change is reported exactly once.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from pathlib import Path

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class KernelFileWatcher(FileSystemEventHandler):
    """Calls `on_change(text)` from a timer thread once per real change to `path`."""

    def __init__(self, path: Path, on_change: Callable[[str], None], debounce: float = 0.3) -> None:
        super().__init__()
        self.path = Path(path).resolve()
        self._on_change = on_change
        self._debounce = debounce
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._last = content_hash(self.path.read_text()) if self.path.exists() else ""
        self._observer: BaseObserver | None = None

    def start(self) -> KernelFileWatcher:
        self._observer = Observer()
        self._observer.schedule(self, str(self.path.parent), recursive=False)
        self._observer.daemon = True
        self._observer.start()
        return self

    def stop(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=2)
            self._observer = None

    def note_own_write(self, text: str) -> None:
        """Record content the app wrote or already handled, so its save is not reported back."""
        with self._lock:
            self._last = content_hash(text)

    def _concerns(self, event: FileSystemEvent) -> bool:
        paths = [event.src_path, getattr(event, "dest_path", "") or ""]
        return any(p and Path(str(p)).resolve() == self.path for p in paths)

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.is_directory or event.event_type in ("opened", "closed_no_write") or not self._concerns(event):
            return
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = threading.Timer(self._debounce, self._fire)
            self._timer.daemon = True
            self._timer.start()

    def _fire(self) -> None:
        try:
            text = self.path.read_text()
        except (OSError, UnicodeDecodeError):
            return
        digest = content_hash(text)
        with self._lock:
            if digest == self._last:
                return
            self._last = digest
        self._on_change(text)
