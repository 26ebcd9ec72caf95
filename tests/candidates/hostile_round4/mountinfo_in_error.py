"""Host paths from the sandbox's mount table, raised as an error. /proc/self/mountinfo cannot be hidden
from a process that has /proc; each line names a mount point and the bind's source within its file
system: the project, the virtual environment, the job directory in the private scratch, the empty
tmpfs over each hidden directory (the home, the build root). Only the 300 first characters of an error
reach a verdict, so the paths are packed in first, most telling first, and the whole table follows in
the traceback (4000 characters).

Before (issue 37): the project path, the scratch and the job's run directory reached the verdict text
that goes to the model provider in the next prompt."""

import torch.nn as nn

_points, _roots = [], []
with open("/proc/self/mountinfo") as _fh:
    _table = _fh.read()
for _line in _table.splitlines():
    _f = _line.split(" ")
    _root, _point = _f[3], _f[4]
    if _point.startswith(("/proc", "/dev/pts", "/dev/mqueue")) or _point in ("/", "/dev", "/usr", "/etc/passwd"):
        continue
    _points.append(_point)
    if _root not in ("/", _point):
        _roots.append(_root)
_points.sort(key=len, reverse=True)
raise RuntimeError("MOUNTS " + " ".join(_points + _roots) + " TABLE " + _table)


class ModelNew(nn.Module):
    def forward(self, x):
        return x
