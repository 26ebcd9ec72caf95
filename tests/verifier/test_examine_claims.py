"""The trusted worker's check of a call staged in shared device memory (`reference_worker.Worker.examine`),
run here on the CPU with the shared buffer stood in by a CPU byte tensor: everything the candidate claims
(regions, shapes, dtypes, the count of outputs, its inputs after the call) is checked, a bad claim is a
failure with one line, never an exception; the GPU tests (tests/gpu/test_gpu_shared_results.py) run the
real thing."""

from __future__ import annotations

import pytest
import torch

from verifier.correctness.input_recipe import capture
from verifier.correctness.shared_device_memory import ImportedBuffer, layout
from verifier.workers.reference_worker import Worker


class _Channel:
    def mark(self, *_a, **_k) -> None:
        pass


class _Unmapped:
    def close(self) -> None:
        pass


def _buffer(nbytes: int) -> ImportedBuffer:
    buf = ImportedBuffer.__new__(ImportedBuffer)  # the driver's mapping stood in by host memory
    buf.bytes, buf.nbytes, buf._map = torch.zeros(nbytes, dtype=torch.uint8), nbytes, _Unmapped()
    return buf


@pytest.fixture
def worker():
    w = Worker(_Channel())
    w.device = "cpu"
    w.model = torch.nn.ReLU()
    w.recipe = capture(torch, lambda: [torch.randn(64, 33)])
    w.trial_cmds = [{"seed": 1234, "dist": "task"}]
    w.trial_records = [{"seed": 1234, "dist": "task"}]
    return w


def _staged(worker, outputs=None, inputs=None):
    """What an honest harness stages for trial 0 (or the given tensors instead): regions and the buffer."""
    drawn = worker.draw(1234, "task")
    outs = outputs if outputs is not None else [torch.relu(drawn[0])]
    ins = inputs if inputs is not None else drawn
    tensors = outs + ins
    offsets, total = layout([t.numel() * t.element_size() for t in tensors])
    buf = _buffer(total + 4096)
    regions = []
    for t, at in zip(tensors, offsets, strict=True):
        n = t.numel() * t.element_size()
        buf.bytes[at:at + n] = t.contiguous().reshape(-1).view(torch.uint8)
        regions.append({"offset": at, "shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", "")})
    worker.staging = buf
    return {"cmd": "examine", "index": 0, "compare": True, "outputs": regions[:len(outs)],
            "after": regions[len(outs):], "atol": None, "rtol": None, "label": "trial 0", "digest_key": 99}


def test_an_honest_call_passes_with_its_figures_and_a_digest(worker):
    got = worker.examine(_staged(worker))
    assert "fail" not in got and got["max_abs"] == 0.0
    assert len(got["digests"]) == 1 and got["digests"][0]


def test_a_wrong_element_fails_with_where(worker):
    out = torch.relu(worker.draw(1234, "task")[0])
    out[3, 4] += 1.0
    got = worker.examine(_staged(worker, outputs=[out]))
    assert "differs from the reference" in got["fail"] and "[3, 4]" in got["mismatch"]


@pytest.mark.parametrize(("claim", "wanted"), [
    ({"offset": 1 << 40}, "malformed"),
    ({"offset": 3}, "malformed"),  # not aligned
    ({"offset": -256}, "malformed"),
    ({"offset": "0"}, "malformed"),
    ({"shape": [33, 64]}, "has shape [33, 64], expected [64, 33]"),
    ({"shape": [64, -33]}, "malformed"),
    ({"dtype": "float64"}, "has dtype float64, expected float32"),
])
def test_a_forged_region_is_one_line_never_a_read_elsewhere(worker, claim, wanted):
    cmd = _staged(worker)
    cmd["outputs"][0].update(claim)
    got = worker.examine(cmd)
    assert wanted in got["fail"], got


def test_the_count_of_outputs_and_inputs_must_be_the_references(worker):
    cmd = _staged(worker)
    cmd["outputs"] = cmd["outputs"] * 2
    assert "forward returned 2 outputs, expected 1" in worker.examine(cmd)["fail"]
    cmd = _staged(worker)
    cmd["after"] = []
    assert "forward was given 1 inputs" in worker.examine(cmd)["fail"]
    cmd = _staged(worker)
    cmd["outputs"] = "everything is fine"
    assert "malformed" in worker.examine(cmd)["fail"]


def test_an_input_changed_by_forward_fails(worker):
    x = worker.draw(1234, "task")[0]
    changed = x.clone()
    changed[0, 0] = 42.0
    got = worker.examine(_staged(worker, inputs=[changed]))
    assert "input 0 was modified by forward" in got["fail"]


def test_without_a_shared_buffer_the_call_fails(worker):
    cmd = _staged(worker)
    worker.staging = None
    assert "shared no buffer" in worker.examine(cmd)["fail"]


def test_the_digest_alone_needs_no_reference_and_sees_a_changed_byte(worker):
    cmd = _staged(worker)
    only = {**cmd, "index": None, "compare": False}
    first = worker.examine(only)["digests"]
    worker.staging.bytes[cmd["outputs"][0]["offset"] + 5] ^= 1
    assert worker.examine(only)["digests"] != first
