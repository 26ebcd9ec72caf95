"""relu, honest, whose module fills its job directory first: four files of 1 GiB each, written in 64 MiB
pieces into the working directory (the job directory), every one kept. Each file stays below the
per-file limit (RLIMIT_FSIZE), so before issue 37's cap nothing stopped it: the job directory was the
host's /dev/shm and host Shmem rose from 8 MB to 4.1 GB while the verification ran.

With `KEEP_GOING` it then carries on as an honest relu (the harness and the verifier meet the full
directory); without, it raises with what it managed to write."""
import errno
import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

KEEP_GOING = False

CPP = r"""
#include <torch/extension.h>
torch::Tensor relu_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) o[i] = in[i] > 0.0f ? in[i] : 0.0f;
    return out;
}
"""

_ext = load_inline(name="evk_round4_fills_job_dir", cpp_sources=[CPP], functions=["relu_forward"])

_written, _err = 0, 0
_piece = b"\xa5" * (64 << 20)
for _k in range(4):
    try:
        with open(f"fill-{_k}.bin", "wb") as _fh:
            for _ in range(16):
                _fh.write(_piece)
                _fh.flush()
                _written += len(_piece)
    except OSError as _exc:
        _err = _exc.errno or -1
        break
del _piece
if not KEEP_GOING:
    raise RuntimeError(f"JOB-FILL wrote={_written} errno={_err} enospc={_err == errno.ENOSPC} cwd={os.getcwd()!r}")


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.relu_forward(x)
