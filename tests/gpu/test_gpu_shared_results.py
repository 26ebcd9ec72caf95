"""The GPU data path's hand-over of results (verifier/correctness/shared_device_memory.py): the candidate's
process exports the buffer and describes what lies in it, so both are claims. A candidate that forges
them (regions outside the buffer, a descriptor that is no device memory, a buffer rewritten after the
call) gets a correctness failure with one line; the trusted worker stays up and the next honest
verification on it passes."""

from __future__ import annotations

import dataclasses

import pytest

from tests.gpu.conftest import CANDIDATES, task_source

pytestmark = pytest.mark.gpu

HONEST = (CANDIDATES / "cuda" / "relu.py").read_text()

FORGED_REGION = HONEST + '''
from verifier.correctness import shared_device_memory as _sdm
_stage = _sdm.Stager.stage
def _forged(self, outputs, inputs):
    found = _stage(self, outputs, inputs)
    for region in found["outputs"]:
        region["offset"] = self.buffer.nbytes * 4  # past the end: a read elsewhere if it were followed
    return found
_sdm.Stager.stage = _forged
'''

NOT_DEVICE_MEMORY = HONEST + '''
import os as _os
from verifier.correctness import shared_device_memory as _sdm
_init = _sdm.ExportedBuffer.__init__
def _swapped(self, torch, nbytes):
    _init(self, torch, nbytes)
    fake = _os.memfd_create("results")
    _os.ftruncate(fake, self.nbytes)
    self.fd = fake  # a host file where device memory was promised
_sdm.ExportedBuffer.__init__ = _swapped
'''

OTHER_BUFFER = HONEST + '''
import torch as _torch
from verifier.correctness import shared_device_memory as _sdm
_stage = _sdm.Stager.stage
def _zeroed(self, outputs, inputs):
    found = _stage(self, outputs, inputs)
    self.buffer.bytes.zero_()  # the results replaced after they were staged, before the trusted read
    _torch.cuda.synchronize()
    return found
_sdm.Stager.stage = _zeroed
'''


@pytest.mark.parametrize(("source", "wanted"), [(FORGED_REGION, "malformed"),
                                                (NOT_DEVICE_MEMORY, "could not be mapped"),
                                                (OTHER_BUFFER, "differs from the reference")],
                         ids=["region-outside", "host-file-descriptor", "rewritten"])
def test_forged_shared_results_fail_correctness_and_the_worker_survives(source, wanted, gpu_config):
    from verifier import verify

    config = dataclasses.replace(gpu_config, static_scan=False, time_kernels=False)
    res = verify(task_source("relu"), source, backend="cuda", config=config)
    correct = res.gate("correctness")
    assert correct is not None and correct.status == "fail", [(g.name, g.status, g.reason) for g in res.gates]
    assert wanted in correct.reason, correct.reason
    again = verify(task_source("relu"), HONEST, backend="cuda", config=dataclasses.replace(gpu_config, time_kernels=False))
    assert again.outcome == "feasible", [(g.name, g.reason) for g in again.gates if g.status == "fail"]
