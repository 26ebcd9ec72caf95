"""Device memory exported by a process in the sandbox and mapped by the trusted side (the device-side
comparison's transport: verifier/correctness/shared_device_memory.py). Legacy CUDA IPC does not cross
the sandbox's PID namespace; a VMM allocation passed as a descriptor must."""

from __future__ import annotations

import json
import os
import sys
import time

import pytest

pytestmark = pytest.mark.gpu

CHILD = r'''
import sys, time, torch
from verifier.sandbox.channel import Channel
from verifier.correctness.shared_device_memory import ExportedBuffer, supported
ch = Channel.from_env()
n = int(sys.argv[1])
ok = supported(torch)
buf = ExportedBuffer(torch, n)
words = buf.bytes[:n].view(torch.int32)
words.copy_(torch.arange(n // 4, device="cuda", dtype=torch.int32) * 7)
torch.cuda.synchronize()
src = torch.randn(n // 4, device="cuda")
torch.cuda.synchronize()
t0 = time.perf_counter()
for _ in range(5):
    buf.bytes[:n].view(torch.float32).copy_(src)
torch.cuda.synchronize()
copy_ms = (time.perf_counter() - t0) / 5 * 1e3
words.copy_(torch.arange(n // 4, device="cuda", dtype=torch.int32) * 7)
torch.cuda.synchronize()
sent = ch.send_fd(buf.fd, "staging")
ch.mark("exported", supported=ok, nbytes=buf.nbytes, copy_ms=copy_ms, sent=sent)
ch.recv()
'''


def _sandboxed(tmp_path, nbytes: int):
    from verifier.sandbox.isolation import SandboxSpec, gpu_device_nodes, unavailable_reason
    from verifier.sandbox.supervisor import Limits, LiveJob
    from verifier.workers.pools import _clean_env

    if unavailable_reason():
        pytest.skip(unavailable_reason())
    job = tmp_path / "job"
    job.mkdir()
    (job / "child.py").write_text(CHILD)
    spec = SandboxSpec(writable=[job], devices=gpu_device_nodes())
    return LiveJob([sys.executable, str(job / "child.py"), str(nbytes)], job, Limits(wall_s=120, memory_bytes=-1),
                   _clean_env(), spec=spec, fd_socket=True)


@pytest.mark.parametrize("gib", [0.001, 6.0])
def test_sandbox_exports_device_memory_the_trusted_side_maps(tmp_path, gib):
    import torch

    from verifier.correctness.shared_device_memory import ImportedBuffer, SharingUnavailable

    nbytes = int(gib * 1024**3) // 4 * 4
    live = _sandboxed(tmp_path, nbytes)
    try:
        mark = live.expect({"exported"}, 90)
        assert mark is not None, live.finish().stderr_tail
        assert mark["supported"] and mark["sent"]
        got = live.receive_fd(10)
        assert got is not None and got[0] == "staging"
        fd = got[1]
        t0 = time.perf_counter()
        shared = ImportedBuffer(torch, fd, nbytes)
        import_ms = (time.perf_counter() - t0) * 1e3
        words = shared.view(torch, 0, [nbytes // 4], torch.int32)
        want = torch.arange(nbytes // 4, device="cuda", dtype=torch.int32) * 7
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        same = bool(torch.equal(words, want))
        compare_ms = (time.perf_counter() - t0) * 1e3
        assert same
        with pytest.raises(ValueError):
            shared.view(torch, 0, [nbytes // 4 + 1024], torch.int32)
        shared.close()
        with pytest.raises(SharingUnavailable):  # more than the allocation holds: the driver refuses
            ImportedBuffer(torch, fd, mark["nbytes"] * 2)
        print(json.dumps({"gib": gib, "import_ms": round(import_ms, 2), "compare_ms": round(compare_ms, 2),
                          "sandbox_copy_ms": round(mark["copy_ms"], 2), "device": torch.cuda.get_device_name()}))
        os.close(fd)
    finally:
        live.finish(timeout=5)
