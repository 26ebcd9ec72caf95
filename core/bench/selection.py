"""Which tasks a bench runs, and in what order: the built-in suite, a folder of task files or a
KernelBench checkout, filtered by `--levels` / `--tasks` / `--limit`; `mixed` shuffles them; and
`reference_skip_reason` says which of them cannot run on this machine.

Kept apart from the runner so the CLI can check a selection (and its error messages) before any
model or executor exists.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from core.bench.records import BenchError
from core.tasks import Task, TaskError, builtin_tasks, load_task

ORDERS = ("curriculum", "mixed")


def order_tasks(tasks: list[Task], order: str, seed: int = 0) -> list[Task]:
    """`curriculum`: the suite's order (level, then suite order); `mixed`: shuffled by `seed`."""
    if order not in ORDERS:
        raise BenchError(f"unknown order {order!r}; choose curriculum or mixed")
    if order == "curriculum":
        return list(tasks)
    import random

    mixed = list(tasks)
    random.Random(seed).shuffle(mixed)
    return mixed


def parse_levels(text: str | None) -> list[int] | None:
    """`"1,2"` -> [1, 2]; None or empty -> None (every level)."""
    if not text or not text.strip():
        return None
    try:
        levels = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise BenchError(f"--levels takes numbers separated by commas (e.g. 1,2), not {text!r}") from None
    if any(lv < 1 for lv in levels):
        raise BenchError("levels start at 1")
    return levels


def parse_names(values: Iterable[str] | None) -> list[str]:
    """`--tasks a,b --tasks c` -> [a, b, c]."""
    return [n.strip() for v in (values or []) for n in v.split(",") if n.strip()]


def select_tasks(suite: str = "builtin", *, kernelbench: str | Path | None = None, levels: list[int] | None = None,
                 names: list[str] | None = None, limit: int | None = None) -> list[Task]:
    """The tasks to run, in a fixed order: level, then suite order (index / problem number / file name).

    A name is a task name, a KernelBench problem number (`12`) or a level and a problem (`2/12`); a bare
    number that matches problems of several selected levels is refused as ambiguous. `limit`: the first N
    tasks of that order."""
    if kernelbench is not None:
        tasks = _kernelbench_tasks(Path(kernelbench), levels or [1, 2, 3])
    elif suite == "builtin":
        tasks = builtin_tasks()
    else:
        tasks = _folder_tasks(Path(suite).expanduser())
    if levels:
        tasks = [t for t in tasks if t.level in levels]
    if names:
        tasks = _filter_names(tasks, names)
    tasks = sorted(tasks, key=lambda t: t.level)  # stable: keeps the suite's own order within a level
    if limit is not None:
        if limit < 1:
            raise BenchError("--limit must be 1 or more")
        tasks = tasks[:limit]
    if not tasks:
        raise BenchError("no tasks selected; check --levels and --tasks (see `evokernel tasks`)")
    return tasks


_LEVEL_PROBLEM = re.compile(r"(?:[Ll](?:evel)?)?(\d+)[/:](\d+)")


def _filter_names(tasks: list[Task], names: list[str]) -> list[Task]:
    def matches(t: Task, n: str) -> bool:
        qualified = _LEVEL_PROBLEM.fullmatch(n)
        if qualified:
            return t.level == int(qualified.group(1)) and t.name.split("_", 1)[0] == qualified.group(2)
        return t.name == n or (n.isdigit() and t.name.split("_", 1)[0] == n)

    unknown = [n for n in names if not any(matches(t, n) for t in tasks)]
    if unknown:
        raise BenchError(f"unknown task(s) in --tasks: {', '.join(unknown)}; see `evokernel tasks` for names "
                         "(KernelBench problems: a number, or LEVEL/NUMBER such as 2/12)")
    for n in names:
        hits = [t for t in tasks if matches(t, n)]
        if n.isdigit() and len({t.level for t in hits}) > 1:
            forms = " or ".join(f"{t.level}/{n}" for t in hits)
            raise BenchError(f"--tasks {n} matches problem {n} of levels "
                             f"{', '.join(str(t.level) for t in hits)}; write {forms} (level/problem), "
                             f"or --limit {n} for the first {n} tasks")
    return [t for t in tasks if any(matches(t, n) for n in names)]


def _kernelbench_tasks(root: Path, levels: list[int]) -> list[Task]:
    from core.tasks import kernelbench_problems

    try:
        return kernelbench_problems(root, levels)
    except TaskError as exc:
        raise BenchError(str(exc)) from None


def _folder_tasks(path: Path) -> list[Task]:
    if path.is_file():
        files = [path]
    elif path.is_dir():
        files = sorted(path.rglob("*.py"), key=lambda f: (f.parent.name, f.name))
    else:
        raise BenchError(f"--suite {path}: no such folder; use `builtin`, a folder of task files, or --kernelbench DIR")
    tasks = []
    for f in files:
        if f.name.startswith("_"):
            continue
        try:
            tasks.append(load_task(str(f)))
        except TaskError as exc:
            raise BenchError(str(exc)) from None
    return tasks


def reference_skip_reason(task: Task, memory_gb: float, timeout_s: float = 300, backend: str = "cpu") -> str | None:
    """Why the task's reference cannot run on this machine (too big for the memory limit, too big for the
    smallest GPU even with nothing else on it, or it fails in the probe under that limit), or None.
    Built-in tasks always run."""
    from core.tasks import (
        device_memory_refusal,
        estimate_task_memory,
        is_builtin,
        memory_refusal,
        validate_task,
    )

    if is_builtin(task):
        return None
    estimate = estimate_task_memory(task)
    if estimate is not None and memory_refusal(task.name, estimate, memory_gb):
        return f"the reference needs {estimate.describe()}, over the {memory_gb:g} GiB limit; raise --memory-gb"
    if estimate is not None and backend in ("cuda", "triton"):
        from core.device import gpu_total_bytes

        card = gpu_total_bytes()
        refusal = device_memory_refusal(task.name, estimate, card[0], card[1], held="in all") if card else None
        if refusal:
            return refusal.removeprefix(f"task {task.name} ")
    try:
        validate_task(task, timeout_s=timeout_s, memory_gb=memory_gb)  # at the default limit, `task_shapes` reuses it
    except TaskError as exc:
        return f"the reference cannot run here: {str(exc).removeprefix(f'task {task.name}: ')}"
    return None
