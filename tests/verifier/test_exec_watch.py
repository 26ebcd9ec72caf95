"""Code made within forward under the default policy (issue 37): every executable mapping the sandbox makes
is told to the trusted side as it is made (`verifier.sandbox.exec_watch`), and one made and dropped before
the next audit is `hidden-exec`, refused under every preset; torch's own JIT (oneDNN convolution) and
libffi's closures, which keep theirs, stay feasible."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from verifier import verify
from verifier.sandbox.exec_watch import watch_program

ROOT = Path(__file__).resolve().parents[2]
ROUND4 = ROOT / "tests" / "candidates" / "hostile_round4"
pytestmark = pytest.mark.skipif(watch_program() is None, reason="the exec watch's filter exists for x86-64 only")

# a process as the harness starts: the listener first, sent to the parent, then torch and the work
CHILD = r'''
import ctypes, os, sys
from verifier.sandbox.exec_watch import send_listener
send_listener(int(sys.argv[1]))
import torch, torch.nn.functional as F
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
libc.shmat.restype = ctypes.c_void_p
CODE = bytes([0xB8, 42, 0, 0, 0, 0xC3])
mode = sys.argv[2]
out = {}
# what honest work makes: oneDNN's convolution JIT (mmap RW + mprotect RWX), a ctypes callback (mmap RWX)
out["conv"] = tuple(F.conv2d(torch.randn(8, 64, 56, 56), torch.randn(64, 64, 3, 3)).shape)
out["callback"] = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)(lambda v: v + 1)(41)
def run(addr):
    ctypes.memmove(addr, CODE, len(CODE))
    return ctypes.CFUNCTYPE(ctypes.c_int)(addr)()
if mode in ("mprotect", "unprotect", "keep"):
    a = libc.mmap(None, 4096, 3, 0x22, -1, 0); ctypes.memmove(a, CODE, len(CODE))
    assert libc.mprotect(a, 4096, 5) == 0
    out["ran"] = ctypes.CFUNCTYPE(ctypes.c_int)(a)()
    if mode == "mprotect":
        libc.munmap(a, 4096)
    elif mode == "unprotect":
        libc.mprotect(a, 4096, 3)
elif mode == "mmap":
    a = libc.mmap(None, 8192, 7, 0x22, -1, 0)
    out["ran"] = run(a)
    libc.munmap(a, 8192)
elif mode == "fork":
    pid = os.fork()
    if pid == 0:
        a = libc.mmap(None, 4096, 7, 0x22, -1, 0)
        os._exit(run(a))
    out["ran"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
elif mode in ("file_tmp", "file_keep"):
    path = os.path.join(sys.argv[3], "code.bin")
    with open(path, "wb") as fh:
        fh.write(CODE.ljust(4096, bytes([0xC3])))
    fd = os.open(path, os.O_RDONLY)
    a = libc.mmap(None, 4096, 5, 0x02, fd, 0)
    os.close(fd)
    out["ran"] = ctypes.CFUNCTYPE(ctypes.c_int)(a)()
    if mode == "file_tmp":
        libc.munmap(a, 4096)
elif mode in ("file_shrink", "file_drop"):
    # the loader's way with a library: the whole span mapped with the text's rights, then (after the watch
    # has looked) the tail mapped over with the data's; or a candidate taking every right to run back
    import time
    path = os.path.join(sys.argv[3], "lib.bin")
    with open(path, "wb") as fh:
        fh.write(CODE.ljust(3 * 4096, bytes([0xC3])))
    fd = os.open(path, os.O_RDONLY)
    a = libc.mmap(None, 3 * 4096, 5, 0x02, fd, 0)
    out["ran"] = ctypes.CFUNCTYPE(ctypes.c_int)(a)()
    time.sleep(0.5)  # the watch has noted the whole span by now
    if mode == "file_shrink":
        got = libc.mmap(a + 4096, 2 * 4096, 3, 0x02 | 0x10, fd, 4096)  # MAP_PRIVATE | MAP_FIXED, read-write
        out["overlay"] = got == a + 4096
    else:
        out["overlay"] = libc.mprotect(a, 3 * 4096, 1) == 0  # read only: nothing of it can run any more
    os.close(fd)
elif mode == "dontunmap":
    libc.mremap.restype = ctypes.c_void_p
    libc.mremap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
    a = libc.mmap(None, 4096, 3, 0x22, -1, 0)
    got = libc.mremap(a, 4096, 4096, 1 | 4, None)  # MREMAP_MAYMOVE | MREMAP_DONTUNMAP
    out["mremap"] = ctypes.get_errno() if got in (None, ctypes.c_void_p(-1).value) else "copied"
elif mode in ("fd_swap", "fd_swap_cover"):
    # check and use of one descriptor number: the watch reads what it names (a file it does not follow),
    # and before the kernel maps it another thread has put the code file there (dup2)
    import threading
    d = sys.argv[3]
    with open(os.path.join(d, "code.bin"), "wb") as fh:
        fh.write(CODE.ljust(4096, bytes([0xC3])))
    evil_fd = os.open(os.path.join(d, "code.bin"), os.O_RDONLY)
    n = os.open(sys.argv[4], os.O_RDONLY)
    if mode == "fd_swap_cover":  # a piece of the named file, mapped honestly first, to cover the tracks with
        a0 = libc.mmap(None, 4096, 5, 0x02, n, 0)
    def swap():
        with open(os.path.join(d, "swap"), "rb") as fh:  # a FIFO: the watch has looked (the race won)
            fh.read(1)
        os.dup2(evil_fd, n)
        with open(os.path.join(d, "swapped"), "wb") as fh:
            fh.write(b"1")
    t = threading.Thread(target=swap)
    t.start()
    a = libc.mmap(None, 4096, 5, 0x02, n, 0)
    t.join()
    with open("/proc/self/maps") as fh:
        out["mapped"] = next(ln for ln in fh if int(ln.split("-")[0], 16) == a).split()[-1]
    out["ran"] = ctypes.CFUNCTYPE(ctypes.c_int)(a)()
    libc.munmap(a, 4096)
    if mode == "fd_swap_cover":
        # the named file's earlier piece moved (mremap, no call the watch is told of) to where the code was:
        # a "new" piece of the file the descriptor named, where the kernel placed the mapping
        libc.mremap.restype = ctypes.c_void_p
        libc.mremap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
        out["moved"] = libc.mremap(a0, 4096, 4096, 1 | 2, a) == a  # MREMAP_MAYMOVE | MREMAP_FIXED
        with open(os.path.join(d, "covered"), "wb") as fh:
            fh.write(b"1")
elif mode == "fork_swap":
    # the descriptor swap in a forked copy that runs the code and exits before the watch confirms which
    # file was mapped (the confirmation finds no process: once counted as a program that ended quickly)
    import threading
    d = sys.argv[3]
    with open(os.path.join(d, "code.bin"), "wb") as fh:
        fh.write(CODE.ljust(4096, bytes([0xC3])))
    pid = os.fork()
    if pid == 0:
        evil_fd = os.open(os.path.join(d, "code.bin"), os.O_RDONLY)
        n = os.open(sys.argv[4], os.O_RDONLY)
        def swap():
            with open(os.path.join(d, "swap"), "rb") as fh:
                fh.read(1)
            os.dup2(evil_fd, n)
            with open(os.path.join(d, "swapped"), "wb") as fh:
                fh.write(b"1")
        t = threading.Thread(target=swap)
        t.start()
        a = libc.mmap(None, 4096, 5, 0x02, n, 0)
        t.join()
        with open("/proc/self/maps") as fh:
            mapped = next(ln for ln in fh if int(ln.split("-")[0], 16) == a).split()[-1]
        with open(os.path.join(d, "mapped"), "w") as fh:
            fh.write(mapped)
        os._exit(ctypes.CFUNCTYPE(ctypes.c_int)(a)())
    out["ran"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    with open(os.path.join(d, "mapped")) as fh:
        out["mapped"] = fh.read()
    with open(os.path.join(d, "exited"), "wb") as fh:  # the child is gone: the watch may look now
        fh.write(b"1")
elif mode == "exec_quick":
    # honest: programs started afresh whose loader maps their libraries and which end at once
    import subprocess
    out["ran"] = [subprocess.run(cmd).returncode for cmd in (["/bin/true"], [sys.executable, "-S", "-c", "pass"])]
elif mode == "shm_exec":
    shm = libc.shmget(0, 4096, 0o1600)  # IPC_PRIVATE, IPC_CREAT | 0600
    got = libc.shmat(shm, None, 0o100000)  # SHM_EXEC
    out["shmat"] = ctypes.get_errno() if got in (None, ctypes.c_void_p(-1).value) else "mapped"
    libc.shmctl(shm, 0, None)  # IPC_RMID
import json; print("RESULT " + json.dumps(out), flush=True)
sys.stdin.read()
'''


def _watched(mode: str, tmp: Path | None = None, watch_cls=None, *extra: str):
    """Run CHILD in `mode` under a watch held here; (its RESULT, the watch's summary, its finding). `tmp`:
    where the file modes write their code (a place the watch follows)."""
    from verifier.sandbox.channel import receive_fd
    from verifier.sandbox.exec_watch import TAG, ExecWatch, is_listener

    watch_cls = watch_cls or ExecWatch
    parent, child = socket.socketpair()
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(child.fileno()), mode, str(tmp or "/tmp"), *extra],
                            pass_fds=[child.fileno()],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=str(ROOT),
                            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})
    child.close()
    watch = None
    try:
        got = receive_fd(parent.fileno(), 60)
        assert got is not None and got[0] == TAG and is_listener(got[1]), got
        followed = str(tmp) + "/" if tmp is not None else None
        watch = watch_cls(got[1], tracks=(lambda p: p.startswith(followed)) if followed else None)
        line = ""
        while not line.startswith("RESULT "):
            line = proc.stdout.readline()
            assert line, "the child ended without a result"
        result = json.loads(line.removeprefix("RESULT "))
        finding = watch.check()  # first: it waits for regions still being looked for
        return result, watch.summary(), finding
    finally:
        if watch is not None:
            watch.close()  # a child still waiting on it gets ENOSYS, not a hang
        proc.stdin.close()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        parent.close()


@pytest.mark.slow  # a child importing torch: seconds each
def test_honest_jit_regions_are_seen_and_kept():
    """oneDNN's convolution and a ctypes callback make executable memory and keep it: no finding."""
    result, summary, finding = _watched("honest")
    assert result == {"conv": [8, 64, 54, 54], "callback": 42}, result
    assert finding is None, finding
    assert summary["events"] >= 2 and summary["regions"] >= 2 and summary["lost"] == 0, summary


@pytest.mark.slow  # a child importing torch: seconds each
def test_code_kept_executable_is_no_hidden_code():
    result, _summary, finding = _watched("keep")
    assert result["ran"] == 42 and finding is None, finding


@pytest.mark.slow  # a child importing torch: seconds each
@pytest.mark.parametrize("mode", ["mprotect", "mmap", "unprotect", "fork"])
def test_code_made_and_dropped_is_seen(mode):
    """Made executable by mprotect (its range told) or by mmap (placed by the kernel, found right after the
    call), run, then unmapped, made writable-only again, or made in a child that exits: the region is gone
    when the watch is asked, `hidden-exec`."""
    result, summary, finding = _watched(mode)
    assert result["ran"] == 42, result
    assert finding is not None and finding[0] == "hidden-exec", (finding, summary)


@pytest.mark.slow  # a child importing torch: seconds each
@pytest.mark.slow  # a child importing torch: seconds each
@pytest.mark.parametrize("mode", ["file_tmp", "file_keep"])
def test_a_file_the_candidate_wrote_is_followed_like_anonymous_memory(tmp_path, mode):
    """A file from a place the candidate writes, mapped executable and unmapped again: `hidden-exec`; kept
    mapped it is the audit's to read (no hidden code); the libraries torch loads meanwhile are not followed."""
    result, summary, finding = _watched(mode, tmp_path)
    assert result["ran"] == 42, result
    if mode == "file_tmp":  # found and then gone, or gone before it was found: hidden either way
        assert finding is not None and finding[0] == "hidden-exec", (finding, summary)
        assert summary["file_regions"] + summary["lost"] == 1, summary
    else:
        assert finding is None and summary["file_regions"] == 1, (finding, summary)


@pytest.mark.slow  # a child importing torch: seconds each
@pytest.mark.parametrize("mode", ["fd_swap", "fd_swap_cover"])
def test_a_descriptor_swapped_after_the_watch_looked_is_still_followed(tmp_path, mode):
    """The race the watch left open: it read which file an executable `mmap`'s descriptor names (a file
    from a read-only tree: not followed), answered "continue", and the kernel then mapped whatever that
    descriptor number held by then; another thread of the candidate had put its code file there (dup2).
    The code ran and was unmapped unseen: no finding. Here the swap is made at the worst moment on
    purpose (the watch below waits for it after its look), which a candidate reaches by swapping in a loop.
    Now the mapping is confirmed in the kernel's own record (/proc/<pid>/maps: the file actually mapped):
    the code file is followed, its removal is `hidden-exec`. "fd_swap_cover" also covers its tracks before
    the watch's first look at the maps: an earlier piece of the named file moved (mremap) to where the
    code was, posing as the mapping asked for; the piece gone from its old place is seen: `hidden-exec`."""
    import os

    from verifier.sandbox.exec_watch import ExecWatch

    decoy = str((ROOT / "pyproject.toml").resolve())  # a file the watch does not follow (any would do)
    for fifo in ("swap", "swapped", "covered"):
        os.mkfifo(tmp_path / fifo)
    looks = 2 if mode == "fd_swap_cover" else 1  # the look at which the candidate swaps

    class Racing(ExecWatch):
        seen = 0

        def _fd_file(self, tid: int, fd: int):
            path, ident = super()._fd_file(tid, fd)
            if path == decoy:
                Racing.seen += 1
                if Racing.seen == looks:  # the look is done: now the candidate swaps
                    with open(tmp_path / "swap", "wb") as fh:
                        fh.write(b"1")
                    with open(tmp_path / "swapped", "rb") as fh:
                        fh.read(1)
            return path, ident

        def _confirm(self, *args):
            if mode == "fd_swap_cover" and Racing.seen == looks:
                with open(tmp_path / "covered", "rb") as fh:  # the candidate is faster than this first look
                    fh.read(1)
            return super()._confirm(*args)

    result, summary, finding = _watched(mode, tmp_path, Racing, decoy)
    assert result["ran"] == 42 and result["mapped"] == str(tmp_path / "code.bin"), result
    assert result.get("moved", True), result
    assert finding is not None and finding[0] == "hidden-exec", (finding, summary)


@pytest.mark.slow  # a child importing torch
def test_a_forked_copy_that_swaps_runs_and_leaves_before_the_confirmation_is_refused(tmp_path):
    """The gap the confirmation left: a process that ends before its mapping is confirmed was counted, not
    refused (a compiler's `sh -c` maps its libraries and is gone within the millisecond). A forked copy of
    the candidate swapped the descriptor after the watch's look, ran the code and exited before the
    confirmation's first look (here the watch waits for the exit on purpose: a candidate gets there by
    trying in a loop): no finding. Now whether the caller is a fork is read while its call waits (its auxv is
    its parent's: the kernel writes it at exec and copies it at fork), and a fork's unconfirmed mapping is
    `hidden-exec`."""
    import os

    from verifier.sandbox.exec_watch import ExecWatch

    decoy = str((ROOT / "pyproject.toml").resolve())
    for fifo in ("swap", "swapped", "exited"):
        os.mkfifo(tmp_path / fifo)

    class Racing(ExecWatch):
        state = "looking"

        def _fd_file(self, tid: int, fd: int):
            path, ident = super()._fd_file(tid, fd)
            if path == decoy and Racing.state == "looking":
                Racing.state = "swapped"
                with open(tmp_path / "swap", "wb") as fh:
                    fh.write(b"1")
                with open(tmp_path / "swapped", "rb") as fh:
                    fh.read(1)
            return path, ident

        def _confirm(self, *args, **kwargs):
            if Racing.state == "swapped":
                Racing.state = "done"
                with open(tmp_path / "exited", "rb") as fh:  # the fork ran the code and is gone
                    fh.read(1)
            return super()._confirm(*args, **kwargs)

    result, summary, finding = _watched("fork_swap", tmp_path, Racing, decoy)
    assert result["ran"] == 42 and result["mapped"] == str(tmp_path / "code.bin"), result
    assert Racing.state == "done", Racing.state
    assert finding is not None and finding[0] == "hidden-exec", (finding, summary)
    assert "forked copy" in finding[1], finding


@pytest.mark.slow  # a child importing torch
def test_programs_started_afresh_that_end_before_the_confirmation_are_counted_not_refused(tmp_path):
    """The honest side of the fork rule: `/bin/true` and a `python -c` child are execs (their auxv is
    new), so their libraries' mappings, unconfirmed because they ended first (here every confirmation for
    them is held back until they have), are counted, and the verdict has no finding."""
    import os
    import time

    from verifier.sandbox.exec_watch import ExecWatch, _ppid

    me = os.getpid()

    class Slow(ExecWatch):
        def _confirm(self, tid, tgid, *args, **kwargs):
            if _ppid(tgid) != me:  # a grandchild: let it finish first
                time.sleep(0.05)
            return super()._confirm(tid, tgid, *args, **kwargs)

    result, summary, finding = _watched("exec_quick", tmp_path, Slow)
    assert result["ran"] == [0, 0], result
    assert summary["unconfirmed"] >= 2, summary
    assert finding is None, (finding, summary)


@pytest.mark.slow  # a child importing torch
def test_a_copy_of_a_mapping_made_unseen_is_refused():
    """mremap with MREMAP_DONTUNMAP copies a mapping with no call the watch is told of (a second piece of
    a library could pose as the one a swapped descriptor should have mapped): EPERM in the sandbox."""
    import errno

    result, _summary, _finding = _watched("dontunmap")
    assert result["mremap"] == errno.EPERM, result


WATCHED_AS_USER = r"""
import json, sys
from tests.verifier.test_exec_watch import _watched
from pathlib import Path
out = {}
for mode in ("file_tmp",):  # (honest code and mprotect'd code as evk: test_hostile_round4_late's verifications)
    result, summary, finding = _watched(mode, Path(sys.argv[1]) if mode.startswith("file") else None)
    out[mode] = {"result": result, "summary": summary, "finding": finding}
print("RESULT " + json.dumps(out), flush=True)
"""


@pytest.mark.slow  # children importing torch: seconds each
def test_the_watch_between_two_processes_of_an_ordinary_user():
    """Both sides as `evk` (the person's own trusted side, never root): the listener installed without
    privileges (no_new_privs) and handed over a socket, the notifications received and answered, the
    process's maps and descriptor links read through /proc. A file written, mapped executable and
    unmapped: `hidden-exec`; the libraries torch loads meanwhile confirmed, none lost (one child only:
    the whole verifications as `evk` cover honest code and code made by mprotect)."""
    import os
    import shutil
    import tempfile

    from tests.verifier.ordinary_user import ordinary_user, run_as_user, user_env

    user = ordinary_user()
    base = Path(tempfile.mkdtemp(prefix="evk-watch-", dir="/var/tmp"))
    try:
        os.chmod(base, 0o755)
        os.chown(base, user.pw_uid, user.pw_gid)
        proc = run_as_user([sys.executable, "-c", WATCHED_AS_USER, str(base)], user,
                           user_env(user, str(base)), cwd=str(ROOT), timeout=300, capture_output=True, text=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line is not None, (proc.returncode, proc.stderr[-3000:])
    out = json.loads(line.removeprefix("RESULT "))
    got = out["file_tmp"]
    assert got["result"]["ran"] == 42 and got["result"]["conv"] == [8, 64, 54, 54], got
    assert got["finding"] is not None and got["finding"][0] == "hidden-exec", got
    assert got["summary"]["regions"] >= 2 and got["summary"]["file_regions"] + got["summary"]["lost"] == 1, got


@pytest.mark.slow  # a child importing torch: 20 s on a loaded machine
def test_executable_system_v_memory_is_refused():
    import errno

    result, _summary, _finding = _watched("shm_exec")
    assert result["shmat"] == errno.EPERM, result


def test_hidden_exec_is_refused_under_every_preset():
    from verifier.policy.rules import PRESETS, make_policy

    assert all(make_policy(p).refuses("hidden-exec") for p in PRESETS)


def _rules(res) -> tuple[list[str], list[str]]:
    gate = res.gates[0]
    refused = [v["rule"] for v in gate.detail.get("violations", [])]
    return refused, [r.get("rule") if isinstance(r, dict) else r for r in gate.detail.get("reported", [])]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["mprotect", "mmap_rwx", "unprotect", "thread", "fork", "file_tmp", "memfd"])
def test_code_made_within_forward_is_refused_under_kernelbench(task_source, make_config, mode):
    """Before: `maps_code_within_forward.py` feasible under kernelbench with no finding at all. Now
    `hidden-exec`, whichever way the code is made and dropped (see the candidate's MODE)."""
    source = (ROUND4 / "maps_code_within_forward.py").read_text()
    source = source.replace('MODE = "mprotect"', f'MODE = "{mode}"')
    res = verify(task_source("relu"), source, config=make_config(static_scan=False, time_kernels=False))
    refused, _reported = _rules(res)
    text = json.dumps(res.to_dict())
    assert not res.feasible and "hidden-exec" in refused, text[:2000]
    assert "removed before the verifier could audit it" in text


@pytest.mark.slow
def test_an_honest_conv_with_a_custom_epilogue_stays_feasible_under_kernelbench(task_source, make_config):
    """torch's convolution (oneDNN JIT regions made in forward, at the held-out shapes too) + a custom
    batch-norm/ReLU kernel: feasible under kernelbench, its JIT regions reported as `anon-exec`, never as
    hidden code, through the correctness trials and timed rounds (each round's pause checks the watch)."""
    source = (ROOT / "tests" / "candidates" / "policy" / "library_conv_fused_bn_relu.py").read_text()
    res = verify(task_source("conv2d_bn_relu"), source, config=make_config(static_scan=False))
    refused, reported = _rules(res)
    text = json.dumps(res.to_dict())
    assert res.feasible, text[:3000]
    assert "hidden-exec" not in text and "anon-exec" in reported, text[:3000]


def test_without_a_say_from_the_sandbox_only_nameless_files_are_followed():
    """A checkout or venv under /tmp (CI's clone) holds torch's libraries; the loader remaps parts of each
    library as it maps it, so following them read an honest run as `hidden-exec` (session 17). Which files
    the candidate could write is the sandbox's to say (`pools._followed_files`); with no say, only a memfd
    or a deleted file is followed, whatever its path."""
    from verifier.sandbox.exec_watch import ExecWatch

    r, w = os.pipe()
    watch = ExecWatch(r)
    try:
        assert not watch._is_followed("/tmp/ci/repo/.venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so")
        assert not watch._is_followed("/dev/shm/evk-x/lib.so")
        assert watch._is_followed("/memfd:jit (deleted)")
        assert watch._is_followed("/tmp/job/code.bin (deleted)")
        told = ExecWatch(os.dup(r), tracks=lambda p: p.startswith("/tmp/job/"))
        try:
            assert told._is_followed("/tmp/job/code.bin") and not told._is_followed("/tmp/ci/lib.so")
        finally:
            told.close()
    finally:
        watch.close()
        os.close(w)


@pytest.mark.slow  # a child importing torch: seconds each
@pytest.mark.parametrize("mode", ["file_shrink", "file_drop"])
def test_a_library_span_the_loader_narrows_is_no_hidden_code(tmp_path, mode):
    """CI under load (session 19): the honest candidate's own extension read as `hidden-exec` when the watch
    noted its whole first span before the loader mapped the data segments over the tail (192 KiB noted,
    180 KiB of text left), and the false verdict, cached, failed two more tests. A followed file whose range
    narrowed but keeps part of the same file executable is the audit's to read; one with nothing of it
    executable left is still refused."""
    result, summary, finding = _watched(mode, tmp_path)
    assert result["ran"] == 42 and result["overlay"], result
    assert summary["file_regions"] == 1, summary
    if mode == "file_shrink":
        assert finding is None, (finding, summary)
    else:
        assert finding is not None and finding[0] == "hidden-exec", (finding, summary)
