"""Reading a timed round's outputs from the paused candidate process (`verifier/clock/frozen_read.py`)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from verifier.clock.frozen_read import (
    FrozenReadError,
    _state,
    output_bytes,
    paused,
    process_memory,
    read_output,
)

CHILD = r"""
import sys, time
import numpy as np
a = np.arange(1000, dtype=np.float32) * 0.5
print(a.ctypes.data, flush=True)
while True:
    a[0] = a[0]  # keep running (a spinning process that must be paused)
"""


@pytest.fixture()
def child():
    proc = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True)
    addr = int(proc.stdout.readline())
    yield proc, addr
    proc.kill()
    proc.wait()


def test_the_outputs_are_read_from_the_paused_process_and_it_goes_on(child):
    proc, addr = child
    claim = {"addr": addr, "nbytes": 4000, "shape": [1000], "dtype": "float32"}
    with paused([proc.pid]):
        assert _state(proc.pid) in ("T", "t")
        with process_memory(proc.pid) as mem:
            got = read_output(mem, claim, 1 << 20)
    np.testing.assert_array_equal(got, np.arange(1000, dtype=np.float32) * 0.5)
    assert _state(proc.pid) not in ("T", "t")  # continued


def test_claims_that_do_not_add_up_are_refused(child):
    proc, addr = child
    with paused([proc.pid]), process_memory(proc.pid) as mem:
        with pytest.raises(ValueError, match="claims"):
            read_output(mem, {"addr": addr, "nbytes": 400, "shape": [1000], "dtype": "float32"}, 1 << 20)
        with pytest.raises(ValueError, match="far more"):
            read_output(mem, {"addr": addr, "nbytes": 4000, "shape": [1000], "dtype": "float32"}, 100)
        with pytest.raises(ValueError, match="cannot be read back"):
            output_bytes({"shape": [2], "dtype": "complex64"})
        with pytest.raises(FrozenReadError, match="could not be read"):  # an address nothing is mapped at
            read_output(mem, {"addr": 8, "nbytes": 4000, "shape": [1000], "dtype": "float32"}, 1 << 20)


def test_bfloat16_is_widened():
    import os

    import torch

    t = torch.tensor([1.5, -2.25, 3.0], dtype=torch.bfloat16)
    claim = {"addr": t.data_ptr(), "nbytes": 6, "shape": [3], "dtype": "bfloat16"}
    with process_memory(os.getpid()) as mem:
        got = read_output(mem, claim, 1 << 10)
    np.testing.assert_array_equal(got, np.array([1.5, -2.25, 3.0], dtype=np.float32))


PROTECTED_CHILD = r"""
import ctypes, mmap, sys, time
import numpy as np
m = mmap.mmap(-1, 1 << 20)
a = np.frombuffer(m, dtype=np.float32)
a[:] = np.arange(a.size, dtype=np.float32)
addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
libc = ctypes.CDLL(None, use_errno=True)
assert libc.mprotect(ctypes.c_void_p(addr), ctypes.c_size_t(1 << 20), 0) == 0  # PROT_NONE: unreadable to itself
print(addr, flush=True)
time.sleep(60)
"""


def test_a_buffer_the_process_protected_against_itself_is_still_read():
    """process_vm_readv (the fast path) cannot read PROT_NONE pages; /proc/PID/mem can: an output hidden
    that way must read as what it holds, not fail or read as zeros."""
    proc = subprocess.Popen([sys.executable, "-c", PROTECTED_CHILD], stdout=subprocess.PIPE, text=True)
    try:
        addr = int(proc.stdout.readline())
        claim = {"addr": addr, "nbytes": 1 << 20, "shape": [1 << 18], "dtype": "float32"}
        with paused([proc.pid]), process_memory(proc.pid) as mem:
            got = read_output(mem, claim, 1 << 21)
        np.testing.assert_array_equal(got, np.arange(1 << 18, dtype=np.float32))
    finally:
        proc.kill()
        proc.wait()


def test_a_reused_buffer_holds_the_latest_read(child):
    from verifier.clock.frozen_read import ReadBuffers

    proc, addr = child
    buffers = ReadBuffers()
    claim = {"addr": addr, "nbytes": 4000, "shape": [1000], "dtype": "float32"}
    with paused([proc.pid]), process_memory(proc.pid) as mem:
        first = read_output(mem, claim, 1 << 20, buffers, (0, 0))
        first[:] = -1.0  # whatever the previous round left in the buffer
        again = read_output(mem, claim, 1 << 20, buffers, (0, 0))
    assert np.shares_memory(first, again)
    np.testing.assert_array_equal(again, np.arange(1000, dtype=np.float32) * 0.5)
