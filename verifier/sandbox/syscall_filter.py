"""The seccomp filter every sandbox runs under: a classic-BPF program written here with `struct` (no native
dependency), handed to bubblewrap's `--seccomp FD`, which installs it just before it runs the job.

It denies the system calls a kernel, Python, torch and the compilers never need and that let a process
leave the sandbox's one boundary: new namespaces (`unshare`, `setns`, `clone` with a namespace flag;
`clone3` answers ENOSYS so libc falls back to `clone`, whose flags the filter can read), mounts,
`ptrace` and writing or reading another process's memory, `bpf`, `perf_event_open`, `userfaultfd`,
`personality` beyond the query, module and kexec loading, keyrings, io_uring, clock and host settings.
A helper in a nested PID or user namespace was invisible to the pause that freezes the sandbox before its
outputs are read (issue 37); with this filter (and bubblewrap's `--disable-userns`) there is none.

Only x86-64 has a table here: on another architecture `program()` returns None and the sandbox relies on
`--disable-userns` alone. Calls of another ABI (i386 `int 0x80`, x32) are all denied.
"""

from __future__ import annotations

import errno
import os
import platform
import struct

# classic BPF
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06

RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data (arg0's low 32 bits on little-endian)

# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET (CLONE_NEWTIME shares clone's
# exit-signal byte and is only reachable through clone3 and unshare, both denied)
CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000

X86_64_CLONE, X86_64_CLONE3, X86_64_PERSONALITY = 56, 435, 135
# name -> x86-64 number, denied with EPERM
X86_64_DENIED = {
    "unshare": 272, "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "mount_setattr": 442, "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "pidfd_getfd": 438,
    "bpf": 321, "perf_event_open": 298, "userfaultfd": 323, "kexec_load": 246, "kexec_file_load": 320,
    "init_module": 175, "finit_module": 313, "delete_module": 176, "keyctl": 250, "add_key": 248,
    "request_key": 249, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "swapon": 167, "swapoff": 168, "reboot": 169, "acct": 163, "iopl": 172, "ioperm": 173, "syslog": 103,
    "quotactl": 179, "open_by_handle_at": 304, "name_to_handle_at": 303, "lookup_dcookie": 212,
    "settimeofday": 164, "clock_settime": 227, "clock_adjtime": 305, "adjtimex": 159, "vhangup": 153,
    "sethostname": 170, "setdomainname": 171, "fanotify_init": 300, "modify_ldt": 154, "uselib": 134,
}


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k & 0xFFFFFFFF)


def _ret(value: int) -> bytes:
    return _insn(_RET_K, value)


X86_64_MMAP, X86_64_MPROTECT, X86_64_PKEY_MPROTECT = 9, 10, 329
PROT_EXEC, MAP_ANONYMOUS = 0x4, 0x20
_ARG2, _ARG3 = 32, 40  # low 32 bits of the third and fourth arguments (prot; mmap's flags)


def _no_anonymous_exec(eperm: int) -> list[bytes]:
    """Under the strict policy: no executable memory without a file. `mmap` with PROT_EXEC and
    MAP_ANONYMOUS, and `mprotect`/`pkey_mprotect` adding PROT_EXEC to anything, answer EPERM. Code made at
    run time in anonymous memory and unmapped within one forward was never seen by the audit, which reads
    the mappings between forwards (issue 37). A file mapped executable is still allowed (the dynamic loader
    maps every library so; glibc's loader calls mprotect with PROT_EXEC only for text relocations and an
    executable stack, which torch's and the candidate's libraries do not ask for). Under kernelbench torch's
    own CPU JIT (oneDNN) makes such memory in the candidate's process, so there it is only reported."""
    return [
        _insn(_JEQ_K, X86_64_MMAP, 0, 6),
        _insn(_LD_W_ABS, _ARG2),
        _insn(_JSET_K, PROT_EXEC, 0, 3),
        _insn(_LD_W_ABS, _ARG3),
        _insn(_JSET_K, MAP_ANONYMOUS, 0, 1),
        _ret(eperm),
        _ret(RET_ALLOW),
        _insn(_JEQ_K, X86_64_MPROTECT, 1, 0),
        _insn(_JEQ_K, X86_64_PKEY_MPROTECT, 0, 4),
        _insn(_LD_W_ABS, _ARG2),
        _insn(_JSET_K, PROT_EXEC, 0, 1),
        _ret(eperm),
        _ret(RET_ALLOW),
    ]


def program(machine: str | None = None, no_anonymous_exec: bool = False) -> bytes | None:
    """The filter as bytes of `struct sock_filter`, or None where this module has no syscall table;
    `no_anonymous_exec` (the strict policy) adds `_no_anonymous_exec`."""
    if (machine or platform.machine()) not in ("x86_64", "amd64", "AMD64"):
        return None
    eperm = RET_ERRNO | errno.EPERM
    out = [
        _insn(_LD_W_ABS, _ARCH),
        _insn(_JEQ_K, AUDIT_ARCH_X86_64, 1, 0),
        _ret(eperm),                                   # i386 calls from a 64-bit process
        _insn(_LD_W_ABS, _NR),
        _insn(_JGE_K, X32_SYSCALL_BIT, 0, 1),
        _ret(eperm),                                   # x32 ABI
        _insn(_JEQ_K, X86_64_CLONE3, 0, 1),
        _ret(RET_ERRNO | errno.ENOSYS),                # libc falls back to clone, whose flags are read below
    ]
    for nr in sorted(X86_64_DENIED.values()):
        out += [_insn(_JEQ_K, nr, 0, 1), _ret(eperm)]
    if no_anonymous_exec:
        out += _no_anonymous_exec(eperm)
    # personality: only the query (0xffffffff) and PER_LINUX
    out += [_insn(_JEQ_K, X86_64_PERSONALITY, 0, 5), _insn(_LD_W_ABS, _ARG0),
            _insn(_JEQ_K, 0xFFFFFFFF, 2, 0), _insn(_JEQ_K, 0, 1, 0), _ret(eperm), _ret(RET_ALLOW)]
    # clone: no namespace flag (the accumulator still holds the number when personality did not match)
    out += [_insn(_JEQ_K, X86_64_CLONE, 0, 3), _insn(_LD_W_ABS, _ARG0), _insn(_JSET_K, CLONE_NAMESPACES, 0, 1),
            _ret(eperm), _ret(RET_ALLOW)]
    return b"".join(out)


def filter_fd(no_anonymous_exec: bool = False) -> int | None:
    """A fresh descriptor (its own offset: bubblewrap reads it to its end) holding the program, for one
    bubblewrap start; the caller passes it with `pass_fds` and closes it once bubblewrap started. None
    where there is no program for this machine."""
    prog = program(no_anonymous_exec=no_anonymous_exec)
    if prog is None:
        return None
    fd = os.memfd_create("evk_seccomp", 0) if hasattr(os, "memfd_create") else None
    if fd is None:
        import tempfile

        fd, name = tempfile.mkstemp(prefix="evk_seccomp_")
        os.unlink(name)
    os.write(fd, prog)
    os.lseek(fd, 0, os.SEEK_SET)
    os.set_inheritable(fd, True)
    return fd
