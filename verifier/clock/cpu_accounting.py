"""What the trusted side can see of CPU use from /proc: a process tree's CPU time, how long its threads
waited for a CPU, system CPU pressure, and pinning a tree to a core set.

The candidate's sandbox is every process below its bubblewrap (the PID namespace and its init/reaper).
Its CPU time is the sum over the live processes of their own CPU time (per-thread `schedstat`, in ns;
`stat`'s utime+stime in clock ticks where that is larger, e.g. after a thread exited) plus cutime+cstime
(the children they reaped, so processes that ran and exited still count). Reading it costs the parent
a few milliseconds; it is done outside the windows the parent times.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

from verifier.sandbox.procs import descendants

_TICK_NS = 1e9 / (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)


@dataclass(frozen=True)
class CpuSample:
    cpu_ns: float  # CPU time of every process in the tree, exited children included
    wait_ns: float  # run-queue wait of the watched thread (`main`): time it was runnable but not running
    processes: int
    parent_wait_ns: float = 0.0  # run-queue wait of the parent's threads that clock the window


def parent_wait_ns(tids) -> float:
    """Run-queue wait so far of this process's threads `tids` (the caller and the job's mark reader): a
    parent kept off the CPU when a mark arrives stretches the window it clocks."""
    pid = os.getpid()
    return sum(thread_wait_ns(int(t), pid) for t in tids if t)


def tree(root: int) -> list[int]:
    """`root` and all its live descendants."""
    return [root, *descendants(root)]


def _schedstat(path: str) -> tuple[int, int] | None:
    try:
        with open(path, "rb") as fh:
            parts = fh.read().split()
        return int(parts[0]), int(parts[1])
    except (OSError, IndexError, ValueError):
        return None


def thread_wait_ns(tid: int, pid: int | None = None) -> float:
    """Run-queue wait of one thread so far (ns); 0 when unknown."""
    found = _schedstat(f"/proc/{pid or tid}/task/{tid}/schedstat")
    return float(found[1]) if found else 0.0


def process_cpu_ns(pid: int) -> float:
    """One live process's CPU time so far (all its threads, exited ones included) plus its reaped children's."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().decode(errors="replace").rsplit(")", 1)[1].split()
        utime, stime, cutime, cstime = (int(fields[i]) for i in (11, 12, 13, 14))
    except (OSError, IndexError, ValueError):
        return 0.0
    threads = 0.0
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            found = _schedstat(f"/proc/{pid}/task/{tid}/schedstat")
            if found:
                threads += found[0]
    return max(threads, (utime + stime) * _TICK_NS) + (cutime + cstime) * _TICK_NS


def sample(root: int | None, main: int | None = None, parent_tids=()) -> CpuSample | None:
    """The CPU time of `root`'s whole tree, the run-queue wait of thread `main` (its pid: the leader) and
    of this process's threads `parent_tids`."""
    if root is None:
        return None
    pids = tree(root)
    cpu = sum(process_cpu_ns(p) for p in pids)
    return CpuSample(cpu_ns=cpu, wait_ns=thread_wait_ns(main) if main else 0.0, processes=len(pids),
                     parent_wait_ns=parent_wait_ns(parent_tids))


def cpu_pressure_us() -> float | None:
    """System-wide `some` CPU stall (µs since boot) from /proc/pressure/cpu; None where PSI is absent."""
    try:
        with open("/proc/pressure/cpu") as fh:
            for line in fh:
                if line.startswith("some"):
                    return float(line.rsplit("total=", 1)[1])
    except (OSError, IndexError, ValueError):
        return None
    return None


def worker_cpus() -> set[int] | None:
    """The cores the reference worker and the candidate's sandbox share: every core this process may
    use but one (kept for the parent) when there are at least two; None when pinning is unavailable."""
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None
    if len(allowed) < 2:
        return set(allowed) or None
    return set(allowed[1:])


def pin_tree(root: int | None, cpus: set[int] | None) -> int:
    """Every thread of `root`'s tree onto `cpus` (new threads and children inherit it); how many threads
    were (re)pinned. Undone by nothing: a candidate that widens its own set is pinned back each round."""
    if root is None or not cpus:
        return 0
    done = 0
    for pid in tree(root):
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            with contextlib.suppress(OSError, ValueError):
                if os.sched_getaffinity(int(tid)) != cpus:
                    os.sched_setaffinity(int(tid), cpus)
                    done += 1
    return done


# ------------------------------------------------------------------------------------------ host memory
def rss_bytes(peak: bool = False, pid: int | str = "self") -> int:
    """A process's resident memory now (`VmRSS`), or its high-water mark (`VmHWM`, `peak`), in bytes; 0 where
    /proc cannot say. On the CPU backend the host is the device: this is the memory plan's measure there
    (issue 33: tracemalloc sees no tensor, torch's CPU allocator keeps no peak)."""
    key = "VmHWM:" if peak else "VmRSS:"
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return 0
    return 0


def reset_rss_peak() -> bool:
    """The high-water mark set back to the resident memory now (`clear_refs` 5), so the next `rss_bytes(peak=True)`
    is the peak of what ran since; False where the kernel or the sandbox does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
        return True
    except OSError:
        return False
