"""Every piece of executable memory the sandbox makes at run time, seen by the trusted side as it is made.

The audit reads the sandbox's mappings between forwards (`mapped_audit.anonymous_exec`). Code written into
anonymous memory, made executable, run and unmapped within one forward was never there when it looked
(`hostile_round4/maps_code_within_forward.py`, issue 37). The strict policy's syscall filter refuses such
memory outright (EPERM); the default `kernelbench` policy cannot: torch's own CPU convolution (oneDNN's JIT)
maps 256 KiB regions `mmap(RW)` + `mprotect(RWX)` at the first call of each shape, and without them
`F.conv2d` at an ordinary size fails ("could not create a primitive"). Python's ctypes callbacks (libffi)
`mmap` RWX pages directly.

So instead of refusing, the kernel tells the trusted side about each one (seccomp user notification):

* the harness, before it imports anything of the candidate's (before torch, with no thread started),
  installs a second filter with `SECCOMP_FILTER_FLAG_NEW_LISTENER` that turns `mmap` with PROT_EXEC and
  MAP_ANONYMOUS, and `mprotect`/`pkey_mprotect` adding PROT_EXEC, into notifications, and refuses
  `shmat` with SHM_EXEC. Every process and thread the sandbox starts inherits it; a later filter cannot
  undo it (seccomp runs them all and the strictest answer wins), and a second listener cannot be added
  to the chain (EBUSY); `mremap` with MREMAP_DONTUNMAP is refused. The harness passes the listener to the trusted side over the job's descriptor
  socket and closes its own copy before any candidate code runs;
* the trusted side (`ExecWatch`) answers each notification "continue" (nothing the candidate does is
  refused for it) after noting where the memory is: `mprotect` names its range; an `mmap` that does not
  (no MAP_FIXED) is found by reading the process's mappings before the call and right after it until
  a new executable piece of that size appears;
* a file mapped executable is followed like anonymous memory when the candidate could have written it.
  What the call's descriptor names when the watch looks is only a claim: another thread can put another
  file under that number (dup2) before the kernel maps it, and "continue" lets the kernel map whatever is
  there by then. So a file the watch does not follow is confirmed after the answer in the kernel's own
  record (`/proc/<pid>/maps`: a new executable piece of that same file); any followed file appearing
  meanwhile is followed, and neither seen in time is a lost region (`hidden-exec`). A piece of the named
  file moved meanwhile (mremap, never told) could pose as the new one: a moved piece leaves no confirmation;
  a copy (MREMAP_DONTUNMAP) is refused, and a new mapping of it waits on this same (single) serving
  thread. The watch's look at the maps comes a fraction of a millisecond after the kernel's mapping, so
  what is made and dropped in between is seen only by what it leaves (the missing confirmation, the moved
  piece): a library whose load fails and is unmapped that fast reads as lost too. A program started
  afresh that ends or execs before its mapping is confirmed (a compiler's `sh -c`, a `python -c` child:
  its loader maps its libraries and it is gone within the millisecond) is counted, not refused. A *forked
  copy* that does so is refused (`hidden-exec`): a fork that swaps the descriptor, runs the code and
  exits before the confirmation's first look was the way round it. Which one a process is, is read from
  the kernel's record while its call waits: `/proc/<pid>/auxv` is written by the kernel at exec (the
  random bytes' address, the vDSO's, the program headers': different for every exec with address-space
  randomisation) and copied at fork, and a process cannot change its own without CAP_SYS_RESOURCE; so a
  process whose auxv is its parent's, or another process's of the sandbox seen before, is a fork that has
  not exec'd. (An honest program with randomisation turned off that execs itself reads as a fork: that
  fails safe.) Writable places mounted noexec would need no confirmation at all, but the candidate's
  Triton cache and builds live there;
* at each audit and each timed round's pause, every range noted must still be executable anonymous
  memory of its process. Torch's JIT keeps its code for the process's life (oneDNN's primitive cache:
  65 regions made over 150 mixed conv/linear/pool shapes on this machine, none unmapped), libffi keeps
  its closures; code that was made and is gone (unmapped, made non-executable, or in a process that
  ended) was hidden from the audit on purpose: `hidden-exec`, refused under every preset.

What is kept is still `anon-exec` (reported under kernelbench, refused under strict) as before. Only the
kernel's own word is used: the notification's pid and arguments and `/proc/<pid>/maps`; nothing the
candidate's process reports. Only x86-64 has the filter (`watch_program()` is None elsewhere: no watch).

Standard library only.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import hashlib
import os
import platform
import select
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from verifier.sandbox.syscall_filter import (
    _ARCH,
    _JEQ_K,
    _JSET_K,
    _LD_W_ABS,
    _NR,
    AUDIT_ARCH_X86_64,
    MAP_ANONYMOUS,
    PROT_EXEC,
    RET_ALLOW,
    RET_ERRNO,
    X86_64_MMAP,
    X86_64_MPROTECT,
    X86_64_PKEY_MPROTECT,
    _insn,
    _ret,
)

RET_USER_NOTIF = 0x7FC00000
X86_64_SHMAT, SHM_EXEC = 30, 0o100000
X86_64_MREMAP, MREMAP_DONTUNMAP = 25, 4
_ARG0, _ARG1, _ARG2, _ARG3 = 16, 24, 32, 40
MAP_FIXED, MAP_FIXED_NOREPLACE = 0x10, 0x100000
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

# <linux/seccomp.h>
SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER = 1, 1 << 3
SECCOMP_USER_NOTIF_FLAG_CONTINUE = 1
_NOTIF = struct.Struct("<QII iI Q 6Q")  # id, pid, flags, seccomp_data {nr, arch, ip, args[6]}
_RESP = struct.Struct("<QqiI")  # id, val, error, flags
SECCOMP_IOCTL_NOTIF_RECV = (3 << 30) | (_NOTIF.size << 16) | (ord("!") << 8) | 0
SECCOMP_IOCTL_NOTIF_SEND = (3 << 30) | (_RESP.size << 16) | (ord("!") << 8) | 1
SYS_SECCOMP, PR_SET_NO_NEW_PRIVS = 317, 38
TAG = "exec-watch"


def watch_program(machine: str | None = None) -> bytes | None:
    """The notifying filter as `struct sock_filter` bytes; None off x86-64 (the base filter already
    denies every other ABI, so only x86-64 calls reach here)."""
    if (machine or platform.machine()) not in ("x86_64", "amd64", "AMD64"):
        return None
    eperm = RET_ERRNO | errno.EPERM
    return b"".join([
        _insn(_LD_W_ABS, _ARCH),
        _insn(_JEQ_K, AUDIT_ARCH_X86_64, 1, 0),
        _ret(RET_ALLOW),                                # the base filter refuses other ABIs
        _insn(_LD_W_ABS, _NR),
        # mmap with PROT_EXEC -> notify (anonymous memory, or a file: the loader's libraries are answered
        # at once, a file the candidate could write is followed like anonymous memory)
        _insn(_JEQ_K, X86_64_MMAP, 0, 4),
        _insn(_LD_W_ABS, _ARG2),
        _insn(_JSET_K, PROT_EXEC, 0, 1),
        _ret(RET_USER_NOTIF),
        _ret(RET_ALLOW),
        # mprotect / pkey_mprotect adding PROT_EXEC -> notify
        _insn(_JEQ_K, X86_64_MPROTECT, 1, 0),
        _insn(_JEQ_K, X86_64_PKEY_MPROTECT, 0, 4),
        _insn(_LD_W_ABS, _ARG2),
        _insn(_JSET_K, PROT_EXEC, 0, 1),
        _ret(RET_USER_NOTIF),
        _ret(RET_ALLOW),
        # shmat with SHM_EXEC: executable System V memory no one needs -> EPERM
        _insn(_JEQ_K, X86_64_SHMAT, 0, 4),
        _insn(_LD_W_ABS, _ARG2),
        _insn(_JSET_K, SHM_EXEC, 0, 1),
        _ret(eperm),
        _ret(RET_ALLOW),
        # mremap keeping the old mapping (MREMAP_DONTUNMAP): a copy of a mapping made with no call the
        # watch sees, which could stand in for the file `_confirm` waits for -> EPERM (a plain move
        # leaves the old piece gone, which `_confirm` sees)
        _insn(_JEQ_K, X86_64_MREMAP, 0, 4),
        _insn(_LD_W_ABS, _ARG3),
        _insn(_JSET_K, MREMAP_DONTUNMAP, 0, 1),
        _ret(eperm),
        _ret(RET_ALLOW),
        _ret(RET_ALLOW),
    ])


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install_listener() -> int:
    """In the sandbox, before any candidate code: install `watch_program()` on this process (and what it
    starts) and return the listener's descriptor. OSError when the kernel refuses."""
    prog = watch_program()
    if prog is None:
        raise OSError(errno.ENOSYS, "no exec-watch filter for this machine")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    buf = ctypes.create_string_buffer(prog, len(prog))
    fprog = _Fprog(len(prog) // 8, ctypes.addressof(buf))
    fd = libc.syscall(ctypes.c_long(SYS_SECCOMP), ctypes.c_long(SECCOMP_SET_MODE_FILTER),
                      ctypes.c_long(SECCOMP_FILTER_FLAG_NEW_LISTENER), ctypes.byref(fprog))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"seccomp(NEW_LISTENER) failed: {os.strerror(err)}")
    return int(fd)


def send_listener(sock_fd: int) -> None:
    """Install the filter and pass its listener over the Unix socket `sock_fd` (SCM_RIGHTS), keeping no
    copy. Everything the sending needs is loaded first: once the filter is on, a library loaded (an
    executable file mapping) waits for an answer from the side that does not hold the listener yet."""
    import socket  # noqa: F401  (_socket's extension module, mapped before the filter)

    from verifier.sandbox.channel import send_fd

    fd = install_listener()
    try:
        if not send_fd(sock_fd, fd, TAG):
            raise OSError(errno.EPIPE, "the listener could not be sent to the trusted side")
    finally:
        os.close(fd)


def is_listener(fd: int) -> bool:
    """The descriptor is a seccomp notification listener (what the harness must have sent)."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:seccomp notify"
    except OSError:
        return False


def _exec_lines(pid: int) -> list[list[str]] | None:
    """The executable mappings of `pid`, each `/proc/<pid>/maps` line split into its fields (address, perms,
    offset, device, inode[, path]); None when the process is gone. One reader for `exec_ranges` and
    `file_pieces`."""
    try:
        with open(f"/proc/{pid}/maps") as fh:
            text = fh.read()
    except OSError:
        return None
    return [parts for parts in (line.split(None, 5) for line in text.splitlines())
            if len(parts) >= 5 and "x" in parts[1]]


def exec_ranges(pid: int, anonymous_only: bool = True,
                files: Callable[[str], bool] | None = None) -> list[tuple[int, int]] | None:
    """[start, end) of each executable mapping of `pid` with no file behind it (kernel pseudo mappings
    like [vdso] left out), and with `anonymous_only` off, of each file for which `files(path)` holds (every
    file when None); None when the process is gone."""
    lines = _exec_lines(pid)
    if lines is None:
        return None
    out = []
    for parts in lines:
        name = parts[5].strip() if len(parts) > 5 else ""
        if name and not name.startswith("[") and (anonymous_only or (files is not None and not files(name))):
            continue
        if name in ("[vdso]", "[vsyscall]", "[vvar]", "[uprobes]"):
            continue
        lo, hi = (int(x, 16) for x in parts[0].split("-"))
        out.append((lo, hi))
    return out


def file_pieces(pid: int) -> list[tuple[int, int, int, int, str]] | None:
    """(start, end, device, inode, path) of each executable mapping of `pid` backed by a file (the kernel's
    own record: the file actually mapped, whatever a descriptor named before); None when it is gone."""
    lines = _exec_lines(pid)
    if lines is None:
        return None
    out = []
    for parts in lines:
        if len(parts) < 6 or parts[4] == "0":
            continue
        major, _, minor = parts[3].partition(":")
        lo, hi = (int(x, 16) for x in parts[0].split("-"))
        out.append((lo, hi, os.makedev(int(major, 16), int(minor, 16)), int(parts[4]), parts[5].strip()))
    return out


def _minus(ranges: list[tuple[int, int]], cut: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """`ranges` with every byte of `cut` removed."""
    out = []
    for lo, hi in ranges:
        pieces = [(lo, hi)]
        for c0, c1 in cut:
            nxt = []
            for a, b in pieces:
                if c1 <= a or c0 >= b:
                    nxt.append((a, b))
                    continue
                if a < c0:
                    nxt.append((a, c0))
                if c1 < b:
                    nxt.append((c1, b))
            pieces = nxt
        out += pieces
    return out


def _exe(pid: int) -> str | None:
    """The program `pid` runs (changes when it execs); None when it is gone."""
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None


def _image(pid: int) -> bytes | None:
    """A digest of the process's auxiliary vector: set by the kernel at each exec (randomised addresses of
    the stack's random bytes, the vDSO, the program headers), copied unchanged at fork and not writable by
    the process without CAP_SYS_RESOURCE. Two processes with the same one are one exec and its forks."""
    try:
        with open(f"/proc/{pid}/auxv", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    return hashlib.blake2b(raw, digest_size=16).digest() if raw else None


def _status_number(pid: int, key: str) -> int | None:
    """A number from /proc/<pid>/status (`Tgid`, `PPid`); None when the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def _ppid(pid: int) -> int | None:
    return _status_number(pid, "PPid")


def _tgid(tid: int) -> int | None:
    return _status_number(tid, "Tgid")


@dataclass
class ExecWatch:
    """The trusted side of the watch: a thread answering the listener, the ranges each process made
    executable, and what could not be accounted for (`check`)."""

    fd: int
    # a file mapped executable is followed when this says the candidate could have written it (None: only
    # memfds and deleted files)
    tracks: Callable[[str], bool] | None = None
    known: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # tgid -> anonymous ranges made executable
    files: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # tgid -> ranges of followed files
    # (tgid, range) of a followed file -> its (device, inode) when noted
    file_ids: dict[tuple[int, tuple[int, int]], tuple[int, int]] = field(default_factory=dict)
    lost: list[str] = field(default_factory=list)  # made and gone before it could be seen
    events: int = 0
    unconfirmed: int = 0  # library mappings whose process ended (or exec'd) before they were confirmed
    # auxv digest -> the first process seen with it (an exec); another process with it is a fork
    images: dict[bytes, int] = field(default_factory=dict)
    locate_s: float = 2.0  # how long an unplaced mmap's region is looked for after the call returns

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._pending = 0  # unplaced mmaps being looked for: `check` waits for them
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="evokernel-exec-watch", daemon=True)
        self._thread.start()

    # the notification loop ----------------------------------------------------------------------------
    def _serve(self) -> None:
        poll = select.poll()
        poll.register(self.fd, select.POLLIN)
        while not self._stop.is_set():
            try:
                ready = poll.poll(200)
            except (OSError, ValueError):
                return
            if not ready:
                continue
            if any(ev & (select.POLLHUP | select.POLLERR | select.POLLNVAL) for _fd, ev in ready) and not any(
                    ev & select.POLLIN for _fd, ev in ready):
                return  # every process under the filter has ended
            buf = bytearray(_NOTIF.size)
            try:
                fcntl.ioctl(self.fd, SECCOMP_IOCTL_NOTIF_RECV, buf, True)
            except OSError as exc:
                if exc.errno in (errno.ENOENT, errno.EINTR):
                    continue  # the caller died before it was received
                return
            self._handle(*_NOTIF.unpack(buf))

    def _answer(self, nid: int) -> None:
        with contextlib.suppress(OSError):
            fcntl.ioctl(self.fd, SECCOMP_IOCTL_NOTIF_SEND,
                        bytearray(_RESP.pack(nid, 0, 0, SECCOMP_USER_NOTIF_FLAG_CONTINUE)), True)

    def _handle(self, nid: int, tid: int, _flags: int, nr: int, _arch: int, _ip: int, *args: int) -> None:
        self.events += 1
        addr, length, _prot, flags = args[0], args[1], args[2], args[3]
        anon = nr != X86_64_MMAP or bool(flags & MAP_ANONYMOUS)
        tgid = _tgid(tid) or tid
        size = -(-length // PAGE) * PAGE
        placed = nr != X86_64_MMAP or bool(flags & (MAP_FIXED | MAP_FIXED_NOREPLACE))
        if not anon and size > 0:  # (a length of 0 the kernel refuses: nothing to confirm)
            path, ident = self._fd_file(tid, args[4])
            if path is not None and ident is not None and not self._is_followed(path):
                # a library from the read-only trees (the loader's mappings), by what the descriptor named
                # when looked at: answered, then confirmed in the process's maps (`_confirm`); whether the
                # caller is a fork is read now, while its call waits and it cannot be gone
                pieces = file_pieces(tgid)
                forked = self._forked(tgid)
                with self._lock:
                    self._pending += 1
                self._answer(nid)
                try:
                    self._confirm(tid, tgid, addr if placed else None, size, pieces, ident, path, forked)
                finally:
                    with self._lock:
                        self._pending -= 1
                return
        before = None if placed else exec_ranges(tid, anonymous_only=anon, files=self._is_followed)
        if placed or size <= 0:
            if size > 0:  # noted before the caller goes on: an audit right after it must know the range
                self._note(tgid, (addr, addr + size), anon)
            self._answer(nid)
            return
        with self._lock:
            self._pending += 1
        self._answer(nid)
        try:
            self._locate(tid, tgid, size, before, anon)
        finally:
            with self._lock:
                self._pending -= 1

    def _fd_file(self, tid: int, fd: int) -> tuple[str | None, tuple[int, int] | None]:
        """(path, (device, inode)) of the file behind descriptor `fd` of `tid`, read while the caller waits;
        (None, None) when it cannot be told (then the mapping is followed). What the descriptor names
        here is only a claim: another thread can put another file under that number (dup2) before the
        kernel maps it, so a file not followed is confirmed afterwards (`_confirm`)."""
        link = f"/proc/{tid}/fd/{fd & 0xFFFFFFFF}"
        try:
            path = os.readlink(link)
            st = os.stat(link)
        except OSError:
            return None, None
        return path, (st.st_dev, st.st_ino)

    def _is_followed(self, path: str) -> bool:
        """A file (as a descriptor's link or a maps line names it) the candidate could have written."""
        if self.tracks is not None:
            return self.tracks(path)
        # no say from the caller: only what is nobody's file (a memfd, a deleted file). Which paths the
        # candidate could write is the sandbox's to say (`pools._followed_files`: its writable mounts), not a
        # list of names here: a checkout or venv under /tmp is read-only to the candidate, and following its
        # libraries read the loader's own remapping as hidden code (CI's clone under /tmp, session 17)
        return not path.startswith("/") or path.startswith("/memfd:") or path.endswith(" (deleted)")

    def _locate(self, tid: int, tgid: int, size: int, before: list[tuple[int, int]] | None,
                anon: bool = True) -> None:
        # an mmap the kernel places: find the new executable piece of its size once the call returned
        deadline = time.monotonic() + self.locate_s
        wait = 0.0001
        while True:
            now = exec_ranges(tid, anonymous_only=anon, files=self._is_followed)
            if now is None:
                self._lose(tgid, size, "its process (or thread) ended before the verifier could see the region")
                return
            with self._lock:
                old = [*(before or []), *self.known.get(tgid, []), *self.files.get(tgid, [])]
            # a file's first mapping spans the whole object and the loader maps its other segments over it
            # at once (MAP_FIXED), so only some of it stays executable: any new piece will do
            need = size if anon else PAGE
            piece = next(((a, b) for a, b in _minus(now, old) if b - a >= need), None)
            if piece is not None:
                self._note(tgid, (piece[0], piece[0] + min(size, piece[1] - piece[0])), anon)
                return
            if time.monotonic() > deadline:
                self._lose(tgid, size, "it was unmapped or made non-executable before the verifier could see it")
                return
            time.sleep(wait)
            wait = min(wait * 2, 0.01)

    def _forked(self, tgid: int) -> bool:
        """Whether `tgid` is a forked copy that has not exec'd: its auxv digest (`_image`) is its parent's,
        or another process's of the sandbox seen before. Read while the caller's call waits. A process whose
        auxv cannot be read counts as a fork (it can only fail safe)."""
        image = _image(tgid)
        if image is None:
            return True
        parent = _ppid(tgid)
        with self._lock:
            first = self.images.setdefault(image, tgid)
        return first != tgid or (parent is not None and parent > 0 and _image(parent) == image)

    def _confirm(self, tid: int, tgid: int, addr: int | None, size: int,
                 before: list[tuple[int, int, int, int, str]] | None, ident: tuple[int, int],
                 named: str, forked: bool = False) -> None:
        """After a file the watch does not follow was answered: wait until the kernel's record of the
        process's mappings shows a new executable piece of that same file (device and inode, or its path
        `named`: a path in the read-only trees, where the candidate can put no file of its own; maps and
        stat disagree on an overlay's device; at `addr` when the call placed it). Any new executable piece of a file the watch follows seen meanwhile is noted
        (the descriptor was swapped: that file is followed from here on, and its removal is `hidden-exec`);
        neither seen in time is a region lost, as for any mapping that vanished unseen."""
        old = set(before or [])
        image = _exe(tgid)
        deadline = time.monotonic() + self.locate_s
        wait = 0.0001
        while True:
            now = file_pieces(tgid)  # the process's, not the thread's: a thread may end, its mappings stay
            if now is None or _exe(tgid) != image:
                # the process ended or ran another program (a compiler's `sh -c`, `g++ --version`: often
                # within a millisecond): its mappings went with it, unconfirmed (counted, not refused) --
                # unless it was a forked copy, which had no loader's work to do: a fork that swapped the
                # descriptor, ran what it mapped and left before this look
                if forked:
                    self._lose(tgid, size, "a forked copy of a process mapped a file executable and ended (or ran "
                                           "another program) before the verifier could confirm which file it was")
                    return
                with self._lock:
                    self.unconfirmed += 1
                return
            # a piece of that file already there that moved or shrank meanwhile (mremap, which the watch is
            # not told of) could pose as the new one: then the new one is not confirmed
            here = set(now)
            moved = any(p not in here and ((p[2], p[3]) == ident or p[4] == named) for p in old)
            done = False
            for piece in now:
                if piece in old:
                    continue
                lo, hi, dev, ino, path = piece
                if self._is_followed(path):
                    self._note(tgid, (lo, hi), anon=False)
                elif ((dev, ino) == ident or path == named) and (addr is None or lo <= addr < hi):
                    done = True
            if done and not moved:
                return
            if time.monotonic() > deadline:
                self._lose(tgid, size, "the file mapped executable was not the one its descriptor named when the "
                                       "verifier looked, or was unmapped before it could be seen")
                return
            time.sleep(wait)
            wait = min(wait * 2, 0.01)

    def _note(self, tgid: int, rng: tuple[int, int], anon: bool = True) -> None:
        ident = None
        if not anon:  # which file it is, read now: the range may shrink to its text (`_file_still_mapped`)
            ident = next(((dev, ino) for lo, hi, dev, ino, _path in (file_pieces(tgid) or [])
                          if lo <= rng[0] < hi), None)
        with self._lock:
            ranges = (self.known if anon else self.files).setdefault(tgid, [])
            if rng not in ranges:
                ranges.append(rng)
            if ident is not None:
                self.file_ids[(tgid, rng)] = ident

    def _file_still_mapped(self, tgid: int, rng: tuple[int, int]) -> bool:
        """A followed file's noted range whose executable part shrank but did not go: part of that same file
        (device and inode, as when it was noted) is still mapped executable inside the range.

        Why: the loader maps a library's whole span with its first segment's rights, then maps the data
        segments over the tail; a watch that looked in between noted the whole span, and the honest
        candidate's own extension read as code dropped within forward (CI under load, session 19: 192 KiB
        noted, 180 KiB of text left). What stays mapped executable is the audit's to read, as for a file kept
        mapped; a range with nothing of its file executable left is still `hidden-exec`."""
        ident = self.file_ids.get((tgid, rng))
        if ident is None:
            return False
        lo, hi = rng
        return any((dev, ino) == ident and a < hi and lo < b for a, b, dev, ino, _path in (file_pieces(tgid) or []))

    def _lose(self, tgid: int, size: int, why: str) -> None:
        with self._lock:
            self.lost.append(f"{size // 1024} KiB in one of its processes: {why}")

    # the audit's side ---------------------------------------------------------------------------------
    def check(self) -> tuple[str, str] | None:
        """The `hidden-exec` finding, or None: every range made executable since the sandbox started must
        still be executable anonymous memory of a living process of it. Called while the sandbox is
        stopped (a timed round's pause) or idle between commands (each audit), after the regions still
        being looked for are found or lost."""
        deadline = time.monotonic() + self.locate_s + 1.0
        while self._pending and time.monotonic() < deadline and self._thread.is_alive():
            time.sleep(0.005)
        with self._lock:
            known = [(t, list(r), True) for t, r in self.known.items()]
            known += [(t, list(r), False) for t, r in self.files.items()]
            lost = list(self.lost)
        gone: list[str] = []
        for tgid, ranges, anon in known:
            now = exec_ranges(tgid, anonymous_only=anon, files=self._is_followed)
            if now is None:
                gone.append(f"{len(ranges)} region(s) in a process of the sandbox that ended")
                continue
            missing = [r for r in ranges if _minus([r], now) and (anon or not self._file_still_mapped(tgid, r))]
            if missing:
                total = sum(b - a for a, b in missing)
                gone.append(f"{len(missing)} region(s), {total // 1024} KiB, in a process of the sandbox: unmapped or made "
                            "non-executable")
        if not (gone or lost):
            return None
        what = "; ".join([*lost, *gone][:4]) + (" …" if len(lost) + len(gone) > 4 else "")
        return ("hidden-exec", "executable memory was made at run time and removed before the verifier could audit "
                               f"it ({what}): code run and dropped within a forward, out of every audit's sight")

    def summary(self) -> dict:
        with self._lock:
            return {"events": self.events, "regions": sum(len(r) for r in self.known.values()),
                    "kib": sum(b - a for r in self.known.values() for a, b in r) // 1024,
                    "file_regions": sum(len(r) for r in self.files.values()), "lost": len(self.lost),
                    "unconfirmed": self.unconfirmed}

    def close(self) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=2)
        with contextlib.suppress(OSError):
            os.close(self.fd)
        self.fd = -1
