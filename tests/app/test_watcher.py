"""The kernel-file watcher: one report per real change, however the editor saves."""

from __future__ import annotations

import os
import threading
import time

import pytest

from evokernel_tui.watcher import KernelFileWatcher

DEBOUNCE = 0.15


@pytest.fixture
def watched(tmp_path):
    path = tmp_path / "current_kernel.py"
    path.write_text("v0\n")
    seen: list[str] = []
    lock = threading.Lock()

    def on_change(text: str) -> None:
        with lock:
            seen.append(text)

    watcher = KernelFileWatcher(path, on_change, debounce=DEBOUNCE).start()
    yield path, watcher, seen
    watcher.stop()


def wait_quiet(seen: list[str], expect: int, timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while len(seen) < expect and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(DEBOUNCE * 4)  # anything late would show up now


def vim_save(path, text):
    """vim with backupcopy=no: write a sibling temp file, then rename it over the original."""
    tmp = path.with_name(f".{path.name}.swp")
    tmp.write_text(text)
    os.replace(tmp, path)


def vscode_save(path, text):
    """An atomic save through a temp file in the same folder, fsynced, then renamed."""
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, path)


def direct_save(path, text):
    """Truncate and write in place, in two writes (several modify events)."""
    with open(path, "w") as f:
        f.write(text[: len(text) // 2])
        f.flush()
        f.write(text[len(text) // 2 :])


@pytest.mark.parametrize("save", [vim_save, vscode_save, direct_save])
def test_one_report_per_change(watched, save):
    path, _, seen = watched
    save(path, "v1\n")
    wait_quiet(seen, 1)
    assert seen == ["v1\n"]
    save(path, "v2\n")
    wait_quiet(seen, 2)
    assert seen == ["v1\n", "v2\n"]


def test_same_content_is_not_a_change(watched):
    path, _, seen = watched
    vim_save(path, "v0\n")
    wait_quiet(seen, 0)
    assert seen == []


def test_own_writes_are_ignored(watched):
    path, watcher, seen = watched
    watcher.note_own_write("from the app\n")
    path.write_text("from the app\n")
    wait_quiet(seen, 0)
    assert seen == []
    direct_save(path, "a person's edit\n")
    wait_quiet(seen, 1)
    assert seen == ["a person's edit\n"]


def test_other_files_in_the_folder_are_ignored(watched):
    path, _, seen = watched
    (path.parent / "notes.txt").write_text("hello")
    vim_save(path.parent / "other.py", "x")
    wait_quiet(seen, 0)
    assert seen == []
