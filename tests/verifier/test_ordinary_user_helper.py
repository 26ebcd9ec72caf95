"""The helper that opens this checkout to `evk` (`tests/verifier/ordinary_user.py`) covers exactly the
outermost directory closed to the user on the way to each tree, and nothing when the way is open."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from tests.verifier.ordinary_user import covers


def test_the_outermost_closed_directory_is_covered():
    tmp_path = Path(tempfile.mkdtemp(prefix="evk-covers-", dir="/var/tmp"))  # pytest's own is closed (700)
    try:
        _check(tmp_path)
    finally:
        shutil.rmtree(tmp_path, ignore_errors=True)


def _check(tmp_path: Path) -> None:
    closed = tmp_path / "home"
    (closed / "inner" / "venv").mkdir(parents=True)
    (closed / "inner").chmod(0o700)  # closed too, but below the outer one: covered with it
    closed.chmod(0o700)
    open_tree = tmp_path / "open" / "repo"
    open_tree.mkdir(parents=True)
    tmp_path.chmod(0o755)
    (tmp_path / "open").chmod(0o755)
    uid, gids = 54321, {54321}  # nobody's: only the "other" bits count
    tree = str(closed / "inner" / "venv")
    assert covers([tree, str(open_tree)], uid, gids) == {str(closed): [tree]}
    closed.chmod(0o755)
    (closed / "inner").chmod(0o755)
    assert covers([tree, str(open_tree)], uid, gids) == {}
