"""Read a timed round's outputs straight out of the candidate's paused process.

After a timed round the candidate's harness used to be asked to `save` its outputs; that save ran after
the parent's clock had stopped, inside the candidate's process, so a kernel that hooked it could hand
back garbage while timed and compute the right answers while saving, unclocked. Instead, when
`timing_end` arrives the parent stops every process of the sandbox (SIGSTOP to each process of its PID
namespace), reads each output's bytes from the harness's memory itself (`/proc/PID/mem`, at the
addresses the harness reported) and compares them with the reference's, then lets the sandbox go on.
Nothing runs in the sandbox between the end of the clock and the read but the few hundred microseconds
the parent takes to stop it, so whatever the memory holds was computed on the clock.

The addresses are the candidate's claim; the bytes are not: memory that holds anything but the right
answer for the inputs of that call fails the check, and a process that cannot be read (it made itself
undumpable, or unmapped the buffer) fails it too.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import signal
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

STOP_WAIT_S = 2.0
CHUNK = 1 << 26
_NUMPY = {"float32": np.float32, "float64": np.float64, "float16": np.float16, "int64": np.int64,
          "int32": np.int32, "int16": np.int16, "int8": np.int8, "uint8": np.uint8, "bool": np.bool_}
_ITEMSIZE = {**{k: np.dtype(v).itemsize for k, v in _NUMPY.items()}, "bfloat16": 2}


class FrozenReadError(Exception):
    """The outputs could not be read from the paused sandbox; the message is one line for the verdict."""


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read(4096)
    except OSError:
        return None
    end = raw.rfind(b")")
    return raw[end + 2:end + 3].decode() if end > 0 else None


@contextlib.contextmanager
def paused(pids: Sequence[int], wait_s: float = STOP_WAIT_S) -> Iterator[None]:
    """Every process in `pids` stopped (SIGSTOP, then waited for until /proc shows it stopped) while the
    block runs, and continued afterwards whatever happens. A process that cannot be stopped in time is a
    FrozenReadError: its threads could still be writing what is about to be read."""
    sent = []
    try:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
                sent.append(pid)
        deadline = time.monotonic() + wait_s
        pending = list(sent)
        while pending:
            pending = [p for p in pending if _state(p) not in (None, "T", "t", "Z", "X")]
            if not pending:
                break
            if time.monotonic() > deadline:
                raise FrozenReadError(f"the kernel's process {pending[0]} could not be paused to read its outputs")
            time.sleep(0.0002)
        yield
    finally:
        for pid in sent:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


def output_bytes(claim: dict) -> int:
    """Bytes of one claimed output (`shape`, `dtype`); ValueError for a dtype or shape that is not plain."""
    dtype = str(claim.get("dtype"))
    if dtype not in _ITEMSIZE:
        raise ValueError(f"output dtype {dtype!r} cannot be read back")
    shape = claim.get("shape")
    if not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape):
        raise ValueError("output shape is not a list of sizes")
    return math.prod(shape) * _ITEMSIZE[dtype]


class ReadBuffers:
    """One buffer per (call, output) of a timed round, reused round after round: a fresh bytearray per
    output cost its page faults and zeroing, about as much as the read itself (2 MB: ~1 ms each, 21
    calls a round). An array `read_output` returns is a view of its buffer until the next round's read."""

    def __init__(self) -> None:
        self._buffers: dict[tuple, bytearray] = {}

    def get(self, key: tuple, nbytes: int) -> bytearray:
        buf = self._buffers.get(key)
        if buf is None or len(buf) != nbytes:
            buf = self._buffers[key] = bytearray(nbytes)
        return buf


class _IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def _libc_process_vm_readv():
    try:
        fn = ctypes.CDLL(None, use_errno=True).process_vm_readv
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.POINTER(_IoVec), ctypes.c_ulong, ctypes.POINTER(_IoVec), ctypes.c_ulong,
                   ctypes.c_ulong]
    fn.restype = ctypes.c_ssize_t
    return fn


_VM_READV = _libc_process_vm_readv()


@dataclass(frozen=True)
class ProcessMemory:
    """The paused process's memory: its pid and its /proc/PID/mem, open for reading."""

    pid: int
    fd: int

    def read(self, view: memoryview, addr: int) -> int:
        """Bytes of `addr..` copied into `view` (which is writable): `process_vm_readv` (about 2.5x faster
        than reading /proc/PID/mem: 0.17 against 0.44 ms per 2 MB), else /proc/PID/mem, which also reads
        pages the process protected against itself and says why a read failed (OSError)."""
        if _VM_READV is not None and len(view):
            buf = (ctypes.c_char * len(view)).from_buffer(view)
            local, remote = _IoVec(ctypes.addressof(buf), len(view)), _IoVec(addr, len(view))
            got = _VM_READV(self.pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
            del buf
            if got > 0:
                return got
        return os.preadv(self.fd, [view], addr)


def read_output(mem: ProcessMemory, claim: dict, max_bytes: int, buffers: ReadBuffers | None = None,
                key: tuple = ()) -> np.ndarray:
    """One output read from the paused process's memory (`mem`) as the float32 / native array the
    comparison takes (bfloat16 widened), into `buffers`' buffer for `key` when given."""
    addr, nbytes = claim.get("addr"), claim.get("nbytes")
    if not isinstance(addr, int) or not isinstance(nbytes, int) or addr <= 0 or nbytes < 0:
        raise ValueError("output address missing")
    if nbytes != output_bytes(claim):
        raise ValueError(f"output claims {nbytes} bytes for shape {claim.get('shape')} {claim.get('dtype')}")
    if nbytes > max_bytes:
        raise ValueError(f"output holds {nbytes} bytes, far more than the reference's")
    buf = buffers.get(key, nbytes) if buffers is not None else bytearray(nbytes)
    view, done = memoryview(buf), 0
    while done < nbytes:
        try:
            got = mem.read(view[done:done + CHUNK], addr + done)
        except OSError as exc:
            raise FrozenReadError(f"the output's memory could not be read from the kernel's process "
                                  f"({exc.strerror or exc})") from None
        if got <= 0:
            raise FrozenReadError("the output's memory could not be read from the kernel's process (unmapped)")
        done += got
    dtype, shape = str(claim["dtype"]), tuple(claim["shape"])
    if dtype == "bfloat16":
        wide = np.frombuffer(buf, dtype=np.uint16).astype(np.uint32) << 16
        return wide.view(np.float32).reshape(shape)
    return np.frombuffer(buf, dtype=_NUMPY[dtype]).reshape(shape)  # over the buffer read: no second copy


@contextlib.contextmanager
def process_memory(pid: int) -> Iterator[ProcessMemory]:
    """/proc/PID/mem opened for reading (the harness is a descendant of this process, same user)."""
    try:
        fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise FrozenReadError(f"the kernel's process memory cannot be read ({exc.strerror or exc})") from None
    try:
        yield ProcessMemory(pid, fd)
    finally:
        os.close(fd)
