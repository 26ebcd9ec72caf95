"""Fourth held-out round (issue 37): a candidate holds the trusted builders' lock files.

The shared build tree (`ROOT/shared`) is bound read-only into every sandbox, and the trusted builders'
lock files lay in it; `flock` needs only a read-only descriptor, so a candidate could take every lock it
found and hold the next verification's precompiled headers and bindings behind it for as long as it ran.
This one takes each lock it can and reports how many (as an error, so the verdict carries the count).
Now the trusted side's locks lie beside the tree (`ROOT/shared.locks`), which no sandbox sees."""

import fcntl
import json
import os
from pathlib import Path

import torch.nn as nn

_here = Path(__file__).resolve().parent / "job.json"
_job = json.loads(_here.read_text()) if _here.exists() else {}
_root = Path(_job.get("shared_build_root") or "/nonexistent")
_held, _found = [], 0
for _dir, _subdirs, _files in os.walk(_root):
    for _name in _files:
        if _name.endswith(".lock"):
            _found += 1
            try:
                _fd = os.open(os.path.join(_dir, _name), os.O_RDONLY)
                fcntl.flock(_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                _held.append(_fd)
            except OSError:
                pass
raise RuntimeError(f"SHARED-LOCKS found={_found} held={len(_held)} in {_root.name} (exists={_root.is_dir()})")


class ModelNew(nn.Module):
    def forward(self, x):
        return x
