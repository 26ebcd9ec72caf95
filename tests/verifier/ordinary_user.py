"""Run a command as the ordinary user `evk` with this checkout and its Python reachable, for the tests that
exercise the verifier and its sandbox without privileges (the guide: "you run as root, users do not").

The suite runs as root (CI: `bash .ci/run` on a clean clone, which creates `evk`). The checkout, its
virtual environment and the base Python the venv points at usually lie under paths only root may traverse
(`/root/.pyenv`, a CI clone under `/root`, `/work`...): `evk` could not even start the interpreter, and the
tests that ran it skipped, so the sandbox was never run as a user in CI. Changing the permissions of the
person's tree is not ours to do. Instead the command starts in a mount namespace of its own (root's
`unshare(CLONE_NEWNS)`, every mount private): each directory on the way that `evk` cannot traverse is
covered by an empty tmpfs (mode 755), the trees the command needs are bound back at their own paths
(so the venv's absolute paths, the editable install and the sandbox's own binds stay what they are), and
only then does the process drop to `evk` and exec. Nothing of this is seen outside that process tree; the
rest of each covered directory (root's home, other checkouts) stays hidden from `evk`.

Run as a script it is the launcher (root): `python ordinary_user.py SPEC_JSON`; import it for
`ordinary_user()` and `run_as_user()`. Standard library at module level (the launcher imports nothing else).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLONE_NEWNS = 0x00020000
MS_BIND, MS_REC, MS_PRIVATE = 0x1000, 0x4000, 1 << 18
_CAN_RUN: set[int] = set()  # users seen starting this Python (the probe costs an import of torch)


def needed_trees() -> list[str]:
    """What a verification as `evk` reads: this checkout, the venv, the base Python and every directory
    on `sys.path` (the same trees the sandbox binds, `isolation.visible_trees`)."""
    trees = {ROOT, Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).resolve().parent}
    trees |= {Path(e) for e in sys.path if e and Path(e).is_dir()}
    out: list[Path] = []
    for p in sorted({t.resolve() for t in trees}, key=lambda q: len(q.parts)):
        if not any(p == o or o in p.parents for o in out):
            out.append(p)
    return [str(p) for p in out]


def _traversable(path: Path, uid: int, gids: set[int]) -> bool:
    st = path.stat()
    if st.st_uid == uid:
        return bool(st.st_mode & 0o100)
    if st.st_gid in gids:
        return bool(st.st_mode & 0o010)
    return bool(st.st_mode & 0o001)


def covers(trees: list[str], uid: int, gids: set[int]) -> dict[str, list[str]]:
    """{directory to cover with a tmpfs: [trees under it to bind back]}: for each tree, the outermost
    directory above it that `uid` cannot traverse (the tree itself must be traversable: binding keeps
    its mode)."""
    blocked: dict[str, list[str]] = {}
    for tree in trees:
        above = [p for p in reversed(Path(tree).parents) if str(p) != "/"]
        block = next((p for p in above if not _traversable(p, uid, gids)), None)
        if block is not None:
            blocked.setdefault(str(block), []).append(tree)
    # never one cover inside another: a tree's outermost closed directory is above anything closed below it
    return blocked


def ordinary_user():
    """The pwd entry of `evk`, when this runs as root and `evk` exists; else the test skips with one line."""
    import pwd

    import pytest

    if os.getuid() != 0:
        pytest.skip("not root: the suite itself runs as an ordinary user, the other tests cover it")
    try:
        return pwd.getpwnam("evk")
    except KeyError:
        pytest.skip("no ordinary user `evk` (useradd -m evk; CI creates it)")


def user_env(user, home: str | None = None, **extra: str) -> dict[str, str]:
    """A plain environment for `user`: its home, this checkout on PYTHONPATH, builds in its home."""
    home = home or user.pw_dir
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8", "PYTHONPATH": str(ROOT),
            "EVOKERNEL_BUILD_DIR": f"{home}/evk-builds", **extra}


def run_as_user(argv: list[str], user, env: dict[str, str], cwd: str = "/", timeout: float = 600,
                pass_fds: tuple[int, ...] = (), **kw):
    """`subprocess.run(argv)` as `user`, in a private mount namespace where `needed_trees()` are
    reachable. Skips the test (one line) where that cannot be made: no mount namespace for root here
    (a container without CAP_SYS_ADMIN), or the user still cannot start this Python."""
    import subprocess

    import pytest

    spec = {"uid": user.pw_uid, "gid": user.pw_gid, "argv": argv, "env": env, "cwd": cwd,
            "trees": needed_trees()}
    launcher = [sys.executable, str(Path(__file__).resolve()), json.dumps(spec)]
    if user.pw_uid not in _CAN_RUN:
        probe = subprocess.run([*launcher[:2], json.dumps({**spec, "cwd": "/",
                                                            "argv": [sys.executable, "-c", "import torch, verifier"]})],
                               capture_output=True, text=True, timeout=180)
        last = (probe.stderr.strip().splitlines() or ["?"])[-1]
        if probe.returncode == 97:
            pytest.skip(f"cannot give `evk` a view of this checkout: {last}")
        if probe.returncode != 0:
            pytest.skip(f"`evk` cannot run this checkout's Python ({sys.executable}) even with its trees bound: {last}")
        _CAN_RUN.add(user.pw_uid)
    return subprocess.run(launcher, timeout=timeout, pass_fds=pass_fds, **kw)


def _launch(spec: dict) -> None:
    """Root: private mount namespace, covers, binds; then `evk` and exec. Exit 97: the namespace could
    not be made (the reason on stderr)."""
    import ctypes

    uid, gid = spec["uid"], spec["gid"]
    plan = covers(spec["trees"], uid, {gid})
    if plan:
        libc = ctypes.CDLL(None, use_errno=True)

        def mount(src: str | None, dst: str, fstype: str | None, flags: int, data: str | None = None) -> None:
            if libc.mount(src and src.encode(), dst.encode(), fstype and fstype.encode(), ctypes.c_ulong(flags),
                          data and data.encode()) != 0:
                err = ctypes.get_errno()
                print(f"mount {src} on {dst}: {os.strerror(err)}", file=sys.stderr)
                sys.exit(97)

        if libc.unshare(CLONE_NEWNS) != 0:
            print(f"unshare(CLONE_NEWNS): {os.strerror(ctypes.get_errno())}", file=sys.stderr)
            sys.exit(97)
        mount(None, "/", None, MS_REC | MS_PRIVATE)
        os.umask(0o022)
        held = {t: os.open(t, os.O_PATH | os.O_DIRECTORY) for trees in plan.values() for t in trees}
        for cover, trees in plan.items():
            mount("tmpfs", cover, "tmpfs", 0, "mode=755,size=1m")
            for tree in trees:
                os.makedirs(tree, mode=0o755, exist_ok=True)
                mount(f"/proc/self/fd/{held[tree]}", tree, None, MS_BIND | MS_REC)
        for fd in held.values():
            os.close(fd)
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    os.chdir(spec["cwd"])
    os.execve(spec["argv"][0], spec["argv"], spec["env"])


if __name__ == "__main__":
    _launch(json.loads(sys.argv[1]))
