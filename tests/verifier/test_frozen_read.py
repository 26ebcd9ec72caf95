"""Reading a timed round's outputs from the paused candidate process (`verifier/frozen_read.py`)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from verifier.frozen_read import FrozenReadError, _state, output_bytes, paused, process_memory, read_output

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
