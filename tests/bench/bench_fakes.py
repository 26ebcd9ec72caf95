"""Helpers for bench tests: the verdict-reading fake verifier (importable by spawned and Ray workers)
and per-task scripted replies."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

#: the repository root, on the worker processes' path so they can import `tests.fakes` (the shared doubles)
CORE_TESTS = str(Path(__file__).resolve().parents[2])
if CORE_TESTS not in sys.path:
    sys.path.insert(0, CORE_TESTS)

from tests.fakes.verdicts import fake_verify, kernel, reply  # noqa: E402

__all__ = ["CORE_TESTS", "fake_verify", "gpu_interval", "gpu_verify", "kernel", "reply", "slow_verify", "visible", "where",
           "write_script"]


def slow_verify(reference_source, candidate_source, backend="cpu", config=None):
    """The fake verdict after a short sleep, so overlapping jobs are visible in wall time."""
    time.sleep(0.3)
    return fake_verify(reference_source, candidate_source, backend, config)


def progressing_verify(reference_source, candidate_source, backend="cpu", config=None, on_gate=None):
    """The fake verdict after three "trial k/3" progress reports 0.2 s apart (a verification's live lines)."""
    for k in range(3):
        if on_gate:
            on_gate("correctness", "running", f"trial {k + 1}/3 (pid {os.getpid()})")
        time.sleep(0.2)
    return fake_verify(reference_source, candidate_source, backend, config, on_gate=on_gate)


def where_slowly(_: object = None) -> int:
    """The worker's pid after a short wait, so a pool of two cannot serve every call from one worker."""
    import time

    time.sleep(0.1)
    return where()


def card_slowly(_: object = None) -> tuple[int, str | None]:
    """The worker's pid and GPU ids after a short wait (so a pool of two serves from both workers)."""
    time.sleep(0.1)
    return os.getpid(), os.environ.get("CUDA_VISIBLE_DEVICES")


def pid_after(seconds: float) -> int:
    """The worker's pid after `seconds` (a job long enough to be running whenever a killer beside it is)."""
    time.sleep(seconds)
    return os.getpid()


def die_once(marker: str) -> int:
    """Kill the worker it runs in the first time (leaving `marker`), then return the worker's pid."""
    if not os.path.exists(marker):
        with open(marker, "w") as fh:
            fh.write("died once\n")
        os._exit(3)
    return os.getpid()


def die(_: object = None) -> int:
    """Kill the pool worker it runs in (as the kernel OOM killer or a crash in a native library would)."""
    time.sleep(0.05)
    os._exit(3)


def where(_: object = None) -> int:
    """The worker's process id."""
    return os.getpid()


def improving(first_ms: float, best_ms: float) -> list[str]:
    """Draft feasible at first_ms, refine to best_ms (plus the insight the loop asks for), then a miss."""
    return [reply("feasible", first_ms), reply("feasible", best_ms), "Fuse the loop\nFusing the two passes over the row halves the memory traffic of the kernel.", reply("incorrect")]


def write_script(path: Path, tasks: dict[str, list], default: list | None = None) -> Path:
    data: dict = {"tasks": tasks}
    if default is not None:
        data["replies"] = default
    path.write_text(json.dumps(data))
    return path


def visible(_: object = None) -> str | None:
    """The GPU ids the worker was given."""
    time.sleep(0.01)
    return os.environ.get("CUDA_VISIBLE_DEVICES")


FAKE_GPU = "Fake GPU 80GB"


def gpu_verify(reference_source, candidate_source, backend="cpu", config=None):
    """The fake verdict, timed for 0.2 s on the "GPU" this worker was pinned to: the device fields say which
    (as the real reference worker fills them), and `timing` holds the job's start and end on this host's clock."""
    from verifier.result import device_label_id

    start = time.time()
    time.sleep(0.2)
    res = fake_verify(reference_source, candidate_source, backend, config)
    res.device = FAKE_GPU
    res.device_id = device_label_id(os.environ.get("CUDA_VISIBLE_DEVICES"), 0, f"fake-{os.environ.get('CUDA_VISIBLE_DEVICES')}")
    res.timing = {**res.timing, "job_start": start, "job_end": time.time(), "pid": os.getpid()}
    return res


def gpu_interval(_: object = None) -> tuple[str | None, int, float, float]:
    """(the GPU ids the worker was given, its pid, start, end) of a 0.15 s job."""
    start = time.time()
    time.sleep(0.15)
    return os.environ.get("CUDA_VISIBLE_DEVICES"), os.getpid(), start, time.time()
