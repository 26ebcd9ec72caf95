"""The profile's work split: ATen's copy counts as the task's work only where the reference's own work
is a copy (a do-nothing kernel that re-strides and lets ATen copy), never an honest kernel's conversion."""

from __future__ import annotations

from verifier.gates.evidence import _copy_task, _torch_outside_kernel

TRANSPOSE_REF = [{"name": "aten::copy_", "self_ms": 9.0}, {"name": "aten::clone", "self_ms": 0.1},
                 {"name": "aten::empty_strided", "self_ms": 0.1}]
SUM_REF = [{"name": "aten::sum", "self_ms": 9.0}, {"name": "aten::empty", "self_ms": 0.1}]
RESTRIDE_ONLY = {"kernel_ms": 0.01, "torch_ms": 0.0, "torch_ops": [], "copy_ms": 8.0}
CONVERTS_THEN_SUMS = {"kernel_ms": 3.0, "torch_ms": 0.0, "torch_ops": [], "copy_ms": 7.0}


def test_copy_is_work_only_for_a_copy_task():
    assert _copy_task(TRANSPOSE_REF) and not _copy_task(SUM_REF) and not _copy_task([])
    found = _torch_outside_kernel(RESTRIDE_ONLY, copies_are_work=_copy_task(TRANSPOSE_REF))
    assert found is not None and "aten::copy_" in found
    assert _torch_outside_kernel(CONVERTS_THEN_SUMS, copies_are_work=_copy_task(SUM_REF)) is None
    assert _torch_outside_kernel({"kernel_ms": 1.0, "torch_ms": 0.0, "torch_ops": []}, copies_are_work=True) is None
