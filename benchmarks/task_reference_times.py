"""Eager reference time of every built-in task on this machine.

The built-in suite is sized so each reference forward takes roughly 1-50 ms on 2 CPU cores: long
enough to time reliably, short enough that a verification round stays interactive. Run this after
changing a task's shapes:

    python benchmarks/task_reference_times.py [--repeats 7] [--out benchmarks/results/task_reference_times.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from core.tasks import Task, builtin_tasks  # noqa: E402

LOW_MS, HIGH_MS = 1.0, 50.0
DEFAULT_OUT = Path(__file__).with_name("results") / "task_reference_times.md"


def time_task(task: Task, repeats: int, warmup: int = 5) -> tuple[float, float]:
    """(median, min) forward time in ms, built and seeded the way the verifier builds references.

    The minimum is reported too because a shared 2-core machine makes the median noisy.
    """
    namespace: dict = {"__name__": f"task_{task.name}"}
    exec(compile(task.source, task.path or task.name, "exec"), namespace)
    torch.manual_seed(0)
    model = namespace["Model"](*namespace["get_init_inputs"]())
    inputs = namespace["get_inputs"]()
    times = []
    with torch.no_grad():
        for _ in range(warmup):
            model(*inputs)
        for _ in range(repeats):
            start = time.perf_counter()
            model(*inputs)
            times.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(times), min(times)


def verdict(ms: float) -> str:
    if ms < LOW_MS:
        return "too fast"
    if ms > HIGH_MS:
        return "too slow"
    return "ok"


def markdown(rows: list[tuple[Task, float, float]], repeats: int) -> str:
    lines = [
        "# Built-in task reference times",
        "",
        f"Eager PyTorch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"{os.cpu_count()} CPUs ({platform.machine()}), median of {repeats} runs after 5 warm-up runs. "
        f"Target band: {LOW_MS:g}-{HIGH_MS:g} ms.",
        "",
        "Memory-bound tasks with buffers of 16 MiB or more can swing several-fold between runs on this "
        "sandbox: first-touch page faults are expensive here, and glibc's dynamic mmap threshold decides "
        "whether a freed buffer is reused. The min column is the steadier figure.",
        "",
        "| task | level | category | median ms | min ms | in band (median) |",
        "|---|---:|---|---:|---:|---|",
    ]
    lines += [f"| {t.name} | {t.level} | {t.category} | {med:.2f} | {low:.2f} | {verdict(med)} |"
        for t, med, low in rows
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="markdown file to write ('-' to skip)")
    parser.add_argument("--only", nargs="*", help="time only these task names")
    args = parser.parse_args(argv)

    tasks = [t for t in builtin_tasks() if not args.only or t.name in args.only]
    rows = []
    for task in tasks:
        med, low = time_task(task, args.repeats)
        rows.append((task, med, low))
        print(
            f"{task.name:<26} L{task.level}  {task.category:<11} {med:9.2f} ms (min {low:7.2f})  {verdict(med)}",
            flush=True,
        )
    if str(args.out) != "-":
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(markdown(rows, args.repeats), encoding="utf-8")
        print(f"wrote {args.out}")
    return 0 if all(verdict(med) == "ok" for _, med, _ in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
