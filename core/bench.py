"""`evokernel bench`: the draft -> refine loop over a suite of tasks, with one shared memory bank.

Each task is its own session under `OUT/sessions/`, named by its position in the (fixed) task order,
so a rerun with the same `OUT` finds them: recorded tasks are skipped and a task that was running
when the bench stopped is reopened and continued. `OUT/bench.json` (settings + one `TaskOutcome` per
finished task) is rewritten atomically after every task.

The metrics are pure functions over `TaskOutcome` records (KernelBench's compile rate, correctness
and fast_p, a geometric-mean speedup, and the median in-task refine speedup of EvoKernel), so a
report can be recomputed from `bench.json` alone, and `replay_bench` recomputes one on this
machine's hardware from recorded sessions without any model.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import statistics
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from core.executors import executor_verify, verify_job
from core.fsutil import first_line
from core.llm import SCRIPTED_PREFIX, ModelConfig, ModelError, ScriptedModel, make_client
from core.session import Budgets, Session, SessionError, ends_headless_run
from core.tasks import Task, TaskError, builtin_tasks, load_task
from verifier.result import VerificationResult

BENCH_FORMAT = 1
FAST_PS = (0.0, 1.0, 1.5, 2.0)
RETRIEVAL_MODES = ("value", "similarity", "random")
#: settings that must match for a rerun into the same folder to count as a resume
RESUME_KEYS = ("suite", "backend", "model", "draft_steps", "refine_steps", "retrieval", "mode")
#: the memory ablations must match too; a bench.json written before a key existed ran at its default
RESUME_DEFAULTS: dict[str, Any] = {"seed": 0, "epsilon": None, "pool_size": None, "k": None, "memory_mode": "shared",
                                   "order": "curriculum", "budget": None, "refine_norm": False,
                                   "policy": "strict", "allow": []}
#: a bench.json written before policies existed was judged as `strict` judges now
LEGACY_POLICY = "strict"


def bench_policy(settings: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    """The anti-hacking policy a bench ran under: (preset, allowed rules)."""
    return str(settings.get("policy") or LEGACY_POLICY), tuple(sorted(settings.get("allow") or ()))


def policy_mismatch(a: dict[str, Any], b: dict[str, Any]) -> str | None:
    """Why two bench runs cannot be compared (judged under different policies), or None."""
    pa, pb = bench_policy(a), bench_policy(b)
    if pa == pb:
        return None

    def label(p: tuple[str, tuple[str, ...]]) -> str:
        return p[0] + (f" allowing {', '.join(p[1])}" if p[1] else "")

    return (f"A was judged under the {label(pa)} policy and B under {label(pb)}: their figures do not compare; "
            "rerun one with the other's --policy")


class BenchError(Exception):
    """A bench that cannot start or continue; the message is one line saying what to do."""


# -------------------------------------------------------------------- records

@dataclass
class TaskOutcome:
    """What one task's session achieved: the record every metric is computed from."""

    task: str
    level: int
    compiled: bool = False
    feasible: bool = False
    speedup: float | None = None
    speedup_vs_compile: float | None = None
    first_feasible_ms: float | None = None
    best_ms: float | None = None
    tokens: int = 0
    cost: float | None = 0.0
    category: str = ""
    kernels: int = 0
    session: str = ""
    seconds: float = 0.0
    device: str = ""
    error: str = ""
    skipped: str = ""
    rejected: int = 0
    compile_failed: int = 0
    #: retrieval slots filled in this task's session, and those chosen by value that similarity's top-k
    #: would not have chosen (from the `retrieved` events)
    slots: int = 0
    value_slots: int = 0
    #: feasible refinements after the first feasible draft (the paper's refine median counts tasks with one)
    feasible_refinements: int = 0
    #: 1-based kernel index of the first kernel that compiled / was correct (None: never)
    first_compiled_at: int | None = None
    first_feasible_at: int | None = None

    @property
    def status(self) -> str:
        """correct, incorrect, did not compile, rejected by anti-hacking, no kernel, skipped (reason), or error: ..."""
        if self.error:
            return f"error: {self.error}"
        if self.skipped:
            return f"skipped ({self.skipped})"
        if self.feasible:
            return "correct"
        if self.compiled:
            return "incorrect"
        if self.kernels and self.rejected == self.kernels:
            return "rejected by anti-hacking"
        return "did not compile" if self.kernels else "no kernel"

    @property
    def counted(self) -> bool:
        """Whether the task enters the metrics: it ran (not skipped because its reference cannot run here)."""
        return not self.error and not self.skipped

    @property
    def refine_speedup(self) -> float | None:
        """Best refined latency over the first feasible draft's latency (1.0 when refining found nothing faster)."""
        if self.feasible and self.first_feasible_ms and self.best_ms:
            return self.first_feasible_ms / self.best_ms
        return None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TaskOutcome:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


@dataclass
class LevelSummary:
    """The report row of one level (or of all tasks, `level=None`)."""

    level: int | None
    tasks: int
    compile_rate: float
    correct_rate: float
    rejected_rate: float
    fast: dict[str, float]
    fast_vs_compile: dict[str, float] | None
    geomean_speedup: float | None
    median_refine_speedup: float | None
    tokens: int
    cost: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# -------------------------------------------------------------------- metrics (pure)

def compile_rate(outcomes: Sequence[TaskOutcome]) -> float:
    """Share of tasks where at least one kernel compiled."""
    return sum(o.compiled for o in outcomes) / len(outcomes) if outcomes else 0.0


def correct_rate(outcomes: Sequence[TaskOutcome]) -> float:
    """Share of tasks with a feasible (correct, honest) kernel."""
    return sum(o.feasible for o in outcomes) / len(outcomes) if outcomes else 0.0


def rejected_rate(outcomes: Sequence[TaskOutcome]) -> float:
    """Share of tasks whose every kernel was rejected by anti-hacking (apart from "did not compile")."""
    return sum(o.status == "rejected by anti-hacking" for o in outcomes) / len(outcomes) if outcomes else 0.0


def fast_p(outcomes: Sequence[TaskOutcome], p: float, against: str = "eager", strict: bool = True) -> float | None:
    """fast_p as KernelBench's score.py defines it: the share of all tasks (incorrect ones included in the
    denominator) that are correct and strictly more than p times faster. `strict=False` is the labelled
    variant "at least p times faster" (it differs only at exact ties).

    `against="compile"` uses the speedup over torch.compile; None when no task measured it.
    fast_0 is the correctness rate (a correct kernel counts even if its latency was not measured).
    """
    if not outcomes:
        return 0.0
    attr = "speedup" if against == "eager" else "speedup_vs_compile"
    if against != "eager" and not any(o.feasible and o.speedup_vs_compile is not None for o in outcomes):
        return None
    hits = 0
    for o in outcomes:
        value = getattr(o, attr)
        if o.feasible and (p <= 0 or (value is not None and (value > p if strict else value >= p))):
            hits += 1
    return hits / len(outcomes)


def geomean(values: Iterable[float]) -> float | None:
    vals = [v for v in values if v is not None and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def geomean_speedup(outcomes: Sequence[TaskOutcome]) -> float | None:
    """Geometric mean of the speedup over eager, over correct tasks with a measured latency."""
    return geomean(o.speedup for o in outcomes if o.feasible and o.speedup)


def median_refine_speedup(outcomes: Sequence[TaskOutcome]) -> float | None:
    """Median over correct tasks of (first feasible draft's latency / best latency), as in EvoKernel."""
    ratios = [o.refine_speedup for o in outcomes if o.refine_speedup is not None]
    return statistics.median(ratios) if ratios else None


def median_refine_speedup_paper(outcomes: Sequence[TaskOutcome]) -> float | None:
    """The paper's in-task refine speedup: the median over tasks with at least one feasible refinement
    beyond the first feasible draft (tasks whose refining produced nothing feasible are left out)."""
    ratios = [o.refine_speedup for o in outcomes if o.refine_speedup is not None and o.feasible_refinements > 0]
    return statistics.median(ratios) if ratios else None


def learning_metrics(outcomes: Sequence[TaskOutcome]) -> dict[str, Any]:
    """How much the learned values steered retrieval: the share of retrieval slots chosen by value that
    similarity's top-k would not have chosen, and the paper's refine median next to today's."""
    slots = sum(o.slots for o in outcomes)
    value = sum(o.value_slots for o in outcomes)
    n = len(outcomes)
    horizon = max((o.kernels for o in outcomes), default=0)

    def curve(attr: str) -> list[float]:
        """Share of tasks with a compiled / correct kernel among their first i kernels, i = 1..horizon."""
        firsts = [getattr(o, attr) for o in outcomes]
        return [round(sum(1 for f in firsts if f is not None and f <= i) / n, 4) for i in range(1, horizon + 1)]

    compiled, correct = (curve("first_compiled_at"), curve("first_feasible_at")) if n else ([], [])
    return {
        "curves": {"compiled": compiled, "correct": correct},
        "round1": {"compile_rate": compiled[0] if compiled else None, "correct_rate": correct[0] if correct else None},
        "final": {"compile_rate": compiled[-1] if compiled else None, "correct_rate": correct[-1] if correct else None},
        "slots": slots,
        "value_slots": value,
        "value_slot_share": round(value / slots, 4) if slots else None,
        "median_refine_speedup": median_refine_speedup(outcomes),
        "median_refine_speedup_paper": median_refine_speedup_paper(outcomes),
    }


ORDERS = ("curriculum", "mixed")
MEMORY_MODES = ("shared", "per-task", "none")


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


def total_cost(outcomes: Sequence[TaskOutcome]) -> float | None:
    """Summed cost; None when any task's cost is unknown."""
    if any(o.cost is None for o in outcomes):
        return None
    return sum(o.cost or 0.0 for o in outcomes)


def _p_key(p: float) -> str:
    return f"{p:g}"


def summarise(outcomes: Sequence[TaskOutcome], level: int | None = None) -> LevelSummary:
    vs_compile = {_p_key(p): fast_p(outcomes, p, "compile") for p in FAST_PS}
    return LevelSummary(
        level=level,
        tasks=len(outcomes),
        compile_rate=compile_rate(outcomes),
        correct_rate=correct_rate(outcomes),
        rejected_rate=rejected_rate(outcomes),
        fast={_p_key(p): fast_p(outcomes, p) for p in FAST_PS},
        fast_vs_compile=None if all(v is None for v in vs_compile.values()) else vs_compile,
        geomean_speedup=geomean_speedup(outcomes),
        median_refine_speedup=median_refine_speedup(outcomes),
        tokens=sum(o.tokens for o in outcomes),
        cost=total_cost(outcomes),
    )


def summarise_levels(outcomes: Sequence[TaskOutcome]) -> list[LevelSummary]:
    """One row per level present, then the row over all tasks (level None); skipped tasks (reference
    cannot run here) are left out of every rate."""
    outcomes = [o for o in outcomes if not o.skipped]
    levels = sorted({o.level for o in outcomes})
    rows = [summarise([o for o in outcomes if o.level == lv], lv) for lv in levels]
    return [*rows, summarise(outcomes, None)]


def best_attempt(results: Sequence[VerificationResult | None]) -> int | None:
    """Index of the kernel the headless loop ends with: the fastest feasible one, else the first feasible.

    The loop accepts the first feasible draft and then only strictly faster refinements, so this is
    the same kernel the loop accepted; replay uses it to pick the best kernel on new hardware.
    """
    feasible = [i for i, r in enumerate(results) if r is not None and r.feasible]
    if not feasible:
        return None
    timed = [i for i in feasible if results[i].latency_ms is not None]
    if not timed:
        return feasible[0]
    return min(timed, key=lambda i: (results[i].latency_ms, i))


def outcome_from_results(task: str, level: int, results: Sequence[VerificationResult | None], *,
                         tokens: int = 0, cost: float | None = 0.0, category: str = "", session: str = "",
                         seconds: float = 0.0, best_index: int | None = None) -> TaskOutcome:
    """A task's outcome from its kernels' results, in the order they were written. `best_index`: the
    session's accepted best kernel (the one definition of "best" the app, `sessions` and replay use);
    without one (re-verified results), the fastest feasible kernel."""
    best_i = best_index if best_index is not None else best_attempt(results)
    first = next((r for r in results if r is not None and r.feasible), None)
    best = results[best_i] if best_i is not None else None
    compiled = any(r is not None and (g := r.gate("compile")) is not None and g.passed for r in results)
    device = next((r.device for r in results if r is not None and r.device), "")
    return TaskOutcome(
        task=task, level=level, compiled=compiled, feasible=best is not None,
        speedup=best.speedup if best else None,
        speedup_vs_compile=best.speedup_vs_compile if best else None,
        first_feasible_ms=first.latency_ms if first else None,
        best_ms=best.latency_ms if best else None,
        tokens=tokens, cost=cost, category=category, kernels=len(results), session=session,
        seconds=seconds, device=device,
        first_compiled_at=next((i + 1 for i, r in enumerate(results)
                                if r is not None and (g := r.gate("compile")) is not None and g.passed), None),
        first_feasible_at=next((i + 1 for i, r in enumerate(results) if r is not None and r.feasible), None),
        rejected=sum(r is not None and r.outcome == "hack_fail" for r in results),
        compile_failed=sum(r is not None and r.outcome == "compile_fail" for r in results),
    )


# -------------------------------------------------------------------- task selection

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


# -------------------------------------------------------------------- models

class BoundedClient:
    """A model client whose calls wait on a shared semaphore: many tasks, at most N calls in flight."""

    def __init__(self, client: Any, slots: threading.Semaphore):
        self.client, self.slots = client, slots
        self.name = getattr(client, "name", type(client).__name__)

    @property
    def inner(self) -> Any:
        """The wrapped client (sessions ask it what kind of model they talk to)."""
        return self.client

    def complete(self, messages: list[dict[str, str]], on_token: Any = None) -> Any:
        with self.slots:
            return self.client.complete(messages, on_token=on_token)


class ModelSource:
    """Gives each task its model: one litellm config for all, or canned replies.

    A `scripted:FILE.json` file holds a list of replies (each task replays it from the start) or
    `{"tasks": {"relu": [...], ...}, "replies": [...]}` (per-task replies; `replies` for the rest).
    """

    def __init__(self, config: ModelConfig, max_concurrent: int = 4):
        self.config = config
        self.slots = threading.Semaphore(max(1, max_concurrent))
        self._scripts: dict[str, Any] | None = None
        if config.model.startswith(SCRIPTED_PREFIX):
            path = Path(config.model[len(SCRIPTED_PREFIX):]).expanduser()
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError) as exc:
                raise BenchError(f"cannot read scripted replies from {path}: {exc}") from None
            if isinstance(data, list):
                data = {"replies": data}
            if not isinstance(data, dict) or not isinstance(data.get("tasks", {}), dict):
                raise BenchError(f"{path} must hold a list of replies or {{\"tasks\": {{name: [replies]}}}}")
            self._scripts = {"tasks": data.get("tasks", {}), "replies": data.get("replies"),
                             "source": str(path.resolve()), "name": f"{SCRIPTED_PREFIX}{path.name}"}

    @property
    def name(self) -> str:
        return self.config.model

    def for_task(self, task: str, position: int = 0) -> ModelConfig | ScriptedModel:
        """What `Session.create` records (so `evokernel resume` can rebuild the model)."""
        if self._scripts is None:
            return self.config
        replies = self._scripts["tasks"].get(task, self._scripts["replies"])
        if replies is None:
            raise BenchError(f"the scripted replies have none for task {task} (and no default `replies` list)")
        return ScriptedModel(list(replies), position=position, source=self._scripts["source"], name=self._scripts["name"])

    def client(self, task: str, position: int = 0) -> BoundedClient:
        return BoundedClient(make_client(self.for_task(task, position)), self.slots)


# -------------------------------------------------------------------- the bench file

def bench_path(out: Path) -> Path:
    return Path(out) / "bench.json"


def load_bench(path: Path | str) -> dict[str, Any]:
    """A bench.json (or the folder holding one), checked for format."""
    p = Path(path)
    if p.is_dir():
        p = bench_path(p)
    if not p.exists():
        raise BenchError(f"{p} does not exist; pass a bench output folder or its bench.json")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise BenchError(f"cannot read {p}: {exc}") from None
    if not isinstance(data, dict) or data.get("kind") != "evokernel-bench":
        raise BenchError(f"{p} is not an evokernel bench file")
    if data.get("format", 0) > BENCH_FORMAT:
        raise BenchError(f"{p} was written by a newer evokernel (format {data['format']}); upgrade to read it")
    return data


def outcomes_of(data: dict[str, Any], key: str = "outcomes") -> list[TaskOutcome]:
    return [TaskOutcome.from_dict(d) for d in data.get(key, [])]


def _atomic_write(path: Path, text: str) -> None:
    from core.fsutil import atomic_write_text

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text)


class BenchFile:
    """The bench.json of one run: settings, the task order, and outcomes as tasks finish (thread-safe)."""

    def __init__(self, out: Path, settings: dict[str, Any], order: list[str]):
        self.path = bench_path(out)
        self.settings = settings
        self.order = order
        self.lock = threading.Lock()
        self.outcomes: dict[str, TaskOutcome] = {}
        self.extra: dict[str, Any] = {}
        self.started = time.time()
        if self.path.exists():
            old = load_bench(self.path)
            _check_resume(old.get("settings", {}), settings, self.path.parent)
            self.started = old.get("started", self.started)
            self.outcomes = {o.task: o for o in outcomes_of(old) if not o.error and not o.skipped}
            self.extra = {k: old[k] for k in ("recorded",) if k in old}

    def done(self, task: str) -> bool:
        return task in self.outcomes

    def record(self, outcome: TaskOutcome) -> None:
        with self.lock:
            self.outcomes[outcome.task] = outcome
            self._write()

    def ordered(self) -> list[TaskOutcome]:
        rank = {name: i for i, name in enumerate(self.order)}
        return sorted(self.outcomes.values(), key=lambda o: rank.get(o.task, len(rank)))

    def to_dict(self) -> dict[str, Any]:
        outs = self.ordered()
        finished = [o for o in outs if not o.error]
        return {
            "format": BENCH_FORMAT,
            "kind": "evokernel-bench",
            "settings": self.settings,
            "tasks": self.order,
            "complete": len(finished) == len(self.order) and set(self.order) <= {o.task for o in finished},
            "started": self.started,
            "updated": time.time(),
            "environment": _environment(outs),
            "summary": [s.to_dict() for s in summarise_levels(finished)] if finished else [],
            "learning": learning_metrics([o for o in finished if o.counted]),
            "outcomes": [o.to_dict() for o in outs],
            **self.extra,
        }

    def _write(self) -> None:
        _atomic_write(self.path, json.dumps(self.to_dict(), indent=2, default=str))

    def flush(self) -> dict[str, Any]:
        with self.lock:
            self._write()
            return self.to_dict()


def _check_resume(old: dict[str, Any], new: dict[str, Any], out: Path) -> None:
    diffs = [f"{k} {old.get(k)!r} vs {new.get(k)!r}" for k in RESUME_KEYS if old.get(k) != new.get(k)]
    diffs += [f"{k} {old.get(k, d)!r} vs {new.get(k, d)!r}" for k, d in RESUME_DEFAULTS.items()
              if old.get(k, d) != new.get(k, d)]
    if diffs:
        raise BenchError(f"{out} holds a bench with other settings ({'; '.join(diffs)}); "
                         "rerun with those settings to resume, or pick another --out")


def _environment(outcomes: list[TaskOutcome]) -> dict[str, Any]:
    import platform

    devices = sorted({o.device for o in outcomes if o.device})
    return {"python": platform.python_version(), "platform": platform.platform(), "devices": devices}


# -------------------------------------------------------------------- running

@dataclass
class BenchConfig:
    """Everything a bench run needs besides the tasks; `settings()` is what bench.json records."""

    backend: str = "cpu"
    draft_steps: int = 4
    refine_steps: int = 4
    retrieval: str = "value"
    seed: int = 0
    workers: int = 1
    executor: str = "inprocess"
    suite: str = "builtin"
    memory: str | None = None
    verify_config: Any = None
    wall_s: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # ablations of the memory (None: the RetrievalPolicy default)
    epsilon: float | None = None
    pool_size: int | None = None
    k: int | None = None
    memory_mode: str = "shared"
    order: str = "curriculum"
    budget: int | None = None  # T: model steps per task shared by draft and refine
    refine_norm: bool = False  # z-normalised refine rewards (`RetrievalPolicy.refine_norm`)

    def __post_init__(self) -> None:
        if self.retrieval not in RETRIEVAL_MODES:
            raise BenchError(f"unknown retrieval {self.retrieval!r}; choose value, similarity or random")
        if self.workers < 1:
            raise BenchError("--workers must be 1 or more")
        if self.memory_mode not in MEMORY_MODES:
            raise BenchError(f"unknown memory mode {self.memory_mode!r}; choose shared, per-task or none")
        if self.order not in ORDERS:
            raise BenchError(f"unknown order {self.order!r}; choose curriculum or mixed")
        if self.epsilon is not None and not 0.0 <= self.epsilon <= 1.0:
            raise BenchError(f"--epsilon must be within 0..1, got {self.epsilon}")
        if (self.k is not None and self.k < 1) or (self.pool_size is not None and self.pool_size < 1):
            raise BenchError("--k and --pool-size must be 1 or more")
        if self.k is not None and self.pool_size is not None and self.pool_size < self.k:
            raise BenchError(f"--pool-size ({self.pool_size}) must be at least --k ({self.k})")
        if self.budget is not None and self.budget < 1:
            raise BenchError("--budget must be 1 or more")

    def policy(self, index: int) -> Any:
        """The retrieval policy of the task at `index` (its own seed, the ablation settings)."""
        from memory import RetrievalPolicy

        kw = {k: v for k, v in (("epsilon", self.epsilon), ("pool_size", self.pool_size), ("k", self.k)) if v is not None}
        if self.refine_norm:
            kw["refine_norm"] = True
        try:
            return RetrievalPolicy(mode=self.retrieval, seed=self.seed + index, **kw)
        except ValueError as exc:
            raise BenchError(str(exc)) from None

    def settings(self, model: str | None, mode: str = "run") -> dict[str, Any]:
        return {
            "mode": mode, "suite": self.suite, "backend": self.backend, "model": model,
            "draft_steps": self.draft_steps, "refine_steps": self.refine_steps, "retrieval": self.retrieval,
            "seed": self.seed, "workers": self.workers, "executor": self.executor, "memory": self.memory,
            "wall_s": self.wall_s, "epsilon": self.epsilon, "pool_size": self.pool_size, "k": self.k,
            "memory_mode": self.memory_mode, "order": self.order, "budget": self.budget,
            "refine_norm": self.refine_norm,
            "policy": getattr(self.verify_config, "policy", "kernelbench"),
            "allow": list(getattr(self.verify_config, "allow", []) or []), **self.extra,
        }


ProgressFn = Callable[[str, str, TaskOutcome | None], None]


def session_id(index: int, task: str) -> str:
    """Sessions are named by position, so a rerun finds the one it was working on."""
    slug = "".join(c if c.isalnum() or c in "-_" else "-" for c in task)[:40]
    return f"{index:03d}-{slug}"


def reference_skip_reason(task: Task, memory_gb: float, timeout_s: float = 300) -> str | None:
    """Why the task's reference cannot run on this machine (too big for the memory limit, or it fails in
    the probe under that limit), or None. Built-in tasks always run."""
    from core.tasks import estimate_task_memory, is_builtin, memory_refusal, validate_task

    if is_builtin(task):
        return None
    estimate = estimate_task_memory(task)
    if estimate is not None and memory_refusal(task.name, estimate, memory_gb):
        return f"the reference needs {estimate.describe()}, over the {memory_gb:g} GiB limit; raise --memory-gb"
    try:
        validate_task(task, timeout_s=timeout_s, memory_gb=memory_gb)  # at the default limit, `task_shapes` reuses it
    except TaskError as exc:
        return f"the reference cannot run here: {str(exc).removeprefix(f'task {task.name}: ')}"
    return None


def run_bench(tasks: list[Task], out: Path, config: BenchConfig, models: ModelSource, *, memory: Any,
              executor: Any, job: Callable[..., Any] = verify_job,
              shapes: Callable[[Task], str] | None = None,
              on_progress: ProgressFn | None = None,
              check: Callable[[Task], str | None] | None = None) -> dict[str, Any]:
    """Run (or continue) the bench in `out`; returns the final bench.json content.

    Up to `config.workers` tasks run at once, one thread each; their verification jobs go to
    `executor` and their memory reads/writes go to the one shared `memory` bank. `check(task)` returns
    why a task cannot run here (e.g. `reference_skip_reason`): it is recorded as skipped, with no
    session and no model call.
    """
    out = Path(out)
    order = [t.name for t in tasks]
    if len(set(order)) != len(order):
        raise BenchError("two selected tasks have the same name; select them separately")
    bench = BenchFile(out, config.settings(models.name), order)
    verify_fn = executor_verify(executor, job)
    notify = on_progress or (lambda kind, task, outcome: None)
    pending = [(i, t) for i, t in enumerate(tasks) if not bench.done(t.name)]
    for t in tasks:
        if bench.done(t.name):
            notify("skipped", t.name, bench.outcomes[t.name])
    bench.flush()

    def one(index: int, task: Task) -> None:
        notify("started", task.name, None)
        start = time.monotonic()
        reason = check(task) if check is not None else None
        if reason:
            outcome = TaskOutcome(task.name, task.level, category=task.category, skipped=reason,
                                  seconds=time.monotonic() - start)
            bench.record(outcome)
            notify("finished", task.name, outcome)
            return
        try:
            outcome = _run_task(index, task, out / "sessions", config, models, memory, verify_fn, shapes)
        except (SessionError, ModelError, BenchError, OSError) as exc:
            outcome = TaskOutcome(task.name, task.level, category=task.category, error=first_line(exc, 300),
                                  seconds=time.monotonic() - start)
        bench.record(outcome)
        notify("finished", task.name, outcome)

    if config.workers <= 1 or len(pending) <= 1:
        for index, task in pending:
            one(index, task)
    else:
        pool = ThreadPoolExecutor(max_workers=config.workers, thread_name_prefix="bench-task")
        try:
            futures = [pool.submit(one, i, t) for i, t in pending]
            wait(futures, return_when=FIRST_EXCEPTION)
            for fut in futures:
                if fut.done() and fut.exception() is not None:
                    raise fut.exception()
            for fut in futures:
                fut.result()
        except BaseException:
            # interrupted: start no more tasks; running ones finish their step and stay resumable
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
    return bench.flush()


def _run_task(index: int, task: Task, root: Path, config: BenchConfig, models: ModelSource, memory: Any,
              verify_fn: Callable[..., Any], shapes: Callable[[Task], str] | None) -> TaskOutcome:
    path = root / session_id(index, task.name)
    memory = task_memory(config, memory, root.parent, path.name)
    common = {"memory": memory, "verify_fn": verify_fn, "verify_config": config.verify_config, "auto_accept": True}
    policy = config.policy(index)
    if not (path / "session.json").exists():
        _clear_unstarted(path)
        draft, refine = (config.budget, config.budget) if config.budget else (config.draft_steps, config.refine_steps)
        budgets = Budgets(draft_steps=draft, refine_steps=refine, wall_s=config.wall_s)
        Session.create(task, backend=config.backend, model=models.for_task(task.name), budgets=budgets, root=root,
                       policy=policy, shapes=shapes(task) if shapes and memory is not None else "",
                       session_id=path.name, **{k: v for k, v in common.items() if k != "auto_accept"})
    calls = Session.open(path).model_calls
    session = Session.open(path, model=models.client(task.name, position=calls), policy=policy, **common)
    if config.budget:  # one budget of T model steps shared by both stages
        while session.stage != "done" and sum(session.used.values()) < config.budget:
            if ends_headless_run(session.step()):
                break
    else:
        session.run()
    results = [a.result for a in session.history]
    outcome = outcome_from_results(task.name, task.level, results, tokens=session.tokens, cost=session.cost,
                                   category=task.category, session=session.id, seconds=session.elapsed_s,
                                   best_index=accepted_index(session))
    outcome.slots, outcome.value_slots = retrieval_slots(session.path)
    outcome.feasible_refinements = sum(1 for a in session.history if a.stage == "refine" and a.feasible)
    return outcome


def task_memory(config: BenchConfig, memory: Any, out: Path, name: str) -> Any:
    """The bank a task uses: the shared one, a fresh seeded one of its own (`per-task`), or none."""
    if config.memory_mode == "none":
        return None
    if config.memory_mode == "per-task":
        from memory import MemoryStore

        return MemoryStore(out / "memory" / f"{name}.json")
    return memory


def retrieval_slots(session_path: Path) -> tuple[int, int]:
    """(ranked slots, slots chosen by value beyond similarity's top-k) over a session's `retrieved` events."""
    from core.events import read_events

    slots = value = 0
    try:
        events = read_events(session_path)
    except (OSError, ValueError):
        return 0, 0
    for ev in events:
        if ev.kind == "retrieved":
            slots += int(ev.payload.slots or 0)
            value += int(ev.payload.value_beyond_similarity or 0)
    return slots, value


def _clear_unstarted(path: Path) -> None:
    """A folder a kill left before session.json was written holds nothing yet: remove it so the task can start."""
    if path.is_dir() and not any(p.is_file() for p in path.rglob("*")):
        shutil.rmtree(path)


# -------------------------------------------------------------------- replay

def session_dirs(path: Path) -> list[Path]:
    """Session folders in a bench output folder (`DIR/sessions/*`) or a plain sessions folder, by name."""
    path = Path(path)
    root = path / "sessions" if (path / "sessions").is_dir() else path
    if not root.is_dir():
        raise BenchError(f"{path} is not a folder of sessions")
    dirs = sorted(d for d in root.iterdir() if (d / "session.json").exists())
    if not dirs:
        raise BenchError(f"no sessions under {root}; pass a bench output folder or a sessions folder")
    return dirs


def replay_bench(source: Path, out: Path, config: BenchConfig, *, executor: Any, job: Callable[..., Any] = verify_job,
                 on_progress: ProgressFn | None = None) -> dict[str, Any]:
    """Verify every recorded kernel again here and recompute the outcomes; sessions are only read.

    All kernels of a session are submitted at once, so the executor's workers are kept busy. The
    recorded outcomes are kept under `recorded` to set beside the replayed ones.
    """
    notify = on_progress or (lambda kind, task, outcome: None)
    sessions = []
    for d in session_dirs(source):
        try:
            sessions.append(Session.open(d))
        except SessionError as exc:
            raise BenchError(f"cannot replay {d.name}: {exc}") from None
    order = [s.meta["task"]["name"] for s in sessions]
    if len(set(order)) != len(order):
        raise BenchError(f"{source} holds several sessions of the same task; replay one bench's sessions at a time")
    settings = config.settings(None, mode="replay")
    settings["replayed_from"] = str(Path(source).resolve())
    recorded_bench = bench_path(Path(source))
    if recorded_bench.exists():  # the replayed run's own suite (a KernelBench run stays labelled as one)
        try:
            settings["suite"] = load_bench(recorded_bench).get("settings", {}).get("suite", settings["suite"])
        except BenchError:
            pass
    if sessions:
        settings["backend"] = sessions[0].backend
        settings["recorded_model"] = sessions[0].model_name
    bench = BenchFile(out, settings, order)
    bench.extra["recorded"] = [_recorded_outcome(s).to_dict() for s in sessions]
    bench.flush()
    for s in sessions:
        name = s.meta["task"]["name"]
        if bench.done(name):
            notify("skipped", name, bench.outcomes[name])
            continue
        notify("started", name, None)
        start = time.monotonic()
        ref = s.meta["task"]["source"]
        futures = [executor.submit(job, ref, a.source, s.backend, config.verify_config) for a in s.history]
        results: list[VerificationResult | None] = []
        error = ""
        for fut in futures:
            try:
                results.append(fut.result())
            except Exception as exc:  # one kernel the verifier could not run; the others still count
                results.append(None)
                error = error or f"verifier error: {first_line(exc, 200)}"
        t = s.meta["task"]
        outcome = outcome_from_results(name, int(t.get("level") or 1), results, tokens=s.tokens, cost=s.cost,
                                       category=t.get("category") or "", session=s.id,
                                       seconds=time.monotonic() - start)
        if error and not any(results):
            outcome.error = error
        bench.record(outcome)
        notify("finished", name, outcome)
    return bench.flush()


def _recorded_outcome(s: Session) -> TaskOutcome:
    t = s.meta["task"]
    return outcome_from_results(t["name"], int(t.get("level") or 1), [a.result for a in s.history],
                                tokens=s.tokens, cost=s.cost, category=t.get("category") or "", session=s.id,
                                seconds=s.elapsed_s, best_index=accepted_index(s))


def accepted_index(s: Session) -> int | None:
    """The position of the session's accepted best kernel in its history (None when none was accepted)."""
    best = s.best
    return next((i for i, a in enumerate(s.history) if best is not None and a.version == best.version), None)


# -------------------------------------------------------------------- comparison

@dataclass
class ComparedTask:
    task: str
    level: int
    a: TaskOutcome | None
    b: TaskOutcome | None

    @property
    def ratio(self) -> float | None:
        """B's speedup over A's on this task (both correct)."""
        if self.a and self.b and self.a.speedup and self.b.speedup:
            return self.b.speedup / self.a.speedup
        return None


def compare_outcomes(a: Sequence[TaskOutcome], b: Sequence[TaskOutcome]) -> tuple[list[tuple[LevelSummary, LevelSummary]],
                                                                                  list[ComparedTask]]:
    """Level rows of A and B side by side (over the tasks both ran), and per-task pairs (all tasks)."""
    common = {o.task for o in a} & {o.task for o in b}
    a_c = [o for o in a if o.task in common and not o.error]
    b_c = [o for o in b if o.task in common and not o.error]
    rows_a, rows_b = summarise_levels(a_c), summarise_levels(b_c)
    by_level_b = {r.level: r for r in rows_b}
    levels = [(ra, by_level_b[ra.level]) for ra in rows_a if ra.level in by_level_b]
    amap, bmap = {o.task: o for o in a}, {o.task: o for o in b}
    names = list(dict.fromkeys([o.task for o in a] + [o.task for o in b]))
    tasks = [ComparedTask(n, (amap.get(n) or bmap[n]).level, amap.get(n), bmap.get(n)) for n in names]
    return levels, tasks


# -------------------------------------------------------------------- reports

def fmt_rate(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.0f}%"


def fmt_x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def fmt_cost(v: float | None) -> str:
    return "unknown" if v is None else f"${v:.4f}"


def level_name(level: int | None) -> str:
    return "all" if level is None else f"L{level}"


SUMMARY_COLUMNS = ("level", "tasks", "compiled", "correct", "fast_1", "fast_1.5", "fast_2", "geomean", "refine (median)",
                   "tokens", "cost", "rejected")


def summary_cells(s: LevelSummary) -> list[str]:
    """One level row as display strings, in SUMMARY_COLUMNS order ("rejected": share of tasks whose every
    kernel anti-hacking rejected, kept apart from the compile rate)."""
    return [level_name(s.level), str(s.tasks), fmt_rate(s.compile_rate), fmt_rate(s.correct_rate),
            fmt_rate(s.fast["1"]), fmt_rate(s.fast["1.5"]), fmt_rate(s.fast["2"]), fmt_x(s.geomean_speedup),
            fmt_x(s.median_refine_speedup), str(s.tokens), fmt_cost(s.cost), fmt_rate(s.rejected_rate)]


def _md_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines


def text_plot(outcomes: Sequence[TaskOutcome], width: int = 40) -> str:
    """Speedup over eager per task as a bar chart in text (log2 scale, `|` marks 1x), for terminals and
    machines without matplotlib."""
    timed = [o for o in outcomes if o.feasible and o.speedup]
    if not timed:
        return "no correct task with a measured speedup"
    span = max(1.0, max(abs(math.log2(o.speedup)) for o in timed))
    half = width // 2
    name_w = max(len(o.task) for o in timed)
    lines = [f"{'task':<{name_w}}  speedup vs eager (log2 scale, | = 1x)"]
    for o in timed:
        n = round(abs(math.log2(o.speedup)) / span * half)
        left = " " * (half - n) + "#" * n if o.speedup < 1 else " " * half
        right = "#" * n if o.speedup >= 1 else ""
        lines.append(f"{o.task:<{name_w}}  {left}|{right:<{half}} {o.speedup:.2f}x")
    return "\n".join(lines)


def write_plot(outcomes: Sequence[TaskOutcome], out: Path) -> Path:
    """`speedup.png` (matplotlib) or, without matplotlib, `speedup.txt`; returns the file written."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        path = Path(out) / "speedup.txt"
        path.write_text(text_plot(outcomes) + "\n", encoding="utf-8")
        return path
    done = [o for o in outcomes if not o.error]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, max(3.0, 0.35 * len(done) + 1.5)), sharey=True,
                                   layout="constrained")
    ys = list(range(len(done)))
    eager = [o.speedup if o.feasible and o.speedup else None for o in done]
    refine = [o.refine_speedup for o in done]
    _log_bars(ax1, ys, eager, [o.task for o in done], "best kernel: speedup over eager PyTorch")
    _log_bars(ax2, ys, refine, None, "refine: first feasible latency / best latency")
    path = Path(out) / "speedup.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _log_bars(ax: Any, ys: list[int], values: list[float | None], names: list[str] | None, title: str) -> None:
    """Bars from 1x to each value on a log2 axis (green faster, orange slower); no value -> "no kernel"."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

    known = [v for v in values if v]
    lo = min([0.5, *known]) / 1.3
    hi = max([2.0, *known]) * 1.3
    for y, v in zip(ys, values, strict=True):
        if not v:
            ax.text(1.0, y, "  not correct", va="center", fontsize=8, color="grey")
            continue
        ax.barh(y, abs(v - 1.0) or 0.01, left=min(v, 1.0), color="tab:green" if v >= 1 else "tab:orange")
        ax.text(v, y, f" {v:.2f}x", va="center", fontsize=8)
    ax.axvline(1.0, color="black", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlim(lo, hi)
    ax.xaxis.set_major_locator(LogLocator(base=2))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}x"))
    ax.set_title(title, fontsize=10)
    ax.set_ylim(len(ys) - 0.5, -0.5)  # first task on top; rows without a bar still get their space
    if names is not None:
        ax.set_yticks(ys, names)


def render_markdown(data: dict[str, Any], plot_file: str | None = None) -> str:
    """report.md of a bench.json: settings, one row per level, one row per task, the plot."""
    s = data.get("settings", {})
    outs = outcomes_of(data)
    finished = [o for o in outs if not o.error]
    title = "Bench replay" if s.get("mode") == "replay" else "Bench"
    lines = [f"# {title}: {s.get('suite', '')} on {s.get('backend', '')}", ""]
    if s.get("mode") == "replay":
        lines.append(f"Kernels of the sessions in `{s.get('replayed_from')}` verified again here "
                     f"(recorded with model {s.get('recorded_model')}).")
    else:
        lines.append(f"Model `{s.get('model')}`, {s.get('draft_steps')} draft + {s.get('refine_steps')} refine steps "
                     f"per task, retrieval `{s.get('retrieval')}`, executor {s.get('executor')} x{s.get('workers')}.")
    devices = ", ".join(data.get("environment", {}).get("devices", [])) or "unknown"
    state = "complete" if data.get("complete") else f"incomplete ({len(finished)} of {len(data.get('tasks', []))} tasks)"
    lines += [f"Device: {devices}. Run {state}.", "", "## Per level", ""]
    lines += _md_table(SUMMARY_COLUMNS, [summary_cells(r) for r in summarise_levels(finished)] if finished else [])
    compile_rows = [r for r in summarise_levels(finished) if r.fast_vs_compile] if finished else []
    if compile_rows:
        lines += ["", "Against torch.compile:", ""]
        lines += _md_table(("level", "fast_0", "fast_1", "fast_1.5", "fast_2"),
                           [[level_name(r.level), *(fmt_rate(r.fast_vs_compile[_p_key(p)]) for p in FAST_PS)]
                            for r in compile_rows])
    learning = learning_metrics([o for o in finished if o.counted]) if finished else {}
    if learning.get("slots"):
        lines += ["", f"Memory: value chose {learning['value_slots']} of {learning['slots']} retrieval slots "
                      f"({fmt_rate(learning['value_slot_share'])}) that similarity's top-k would not have chosen; "
                      f"median refine speedup {fmt_x(learning['median_refine_speedup'])} over correct tasks, "
                      f"{fmt_x(learning['median_refine_speedup_paper'])} over tasks with a feasible refinement (paper)."]
    if learning.get("curves", {}).get("correct"):
        r1, fin = learning["round1"], learning["final"]
        lines += ["", f"First kernel: compiled {fmt_rate(r1['compile_rate'])}, correct {fmt_rate(r1['correct_rate'])}; "
                      f"final: compiled {fmt_rate(fin['compile_rate'])}, correct {fmt_rate(fin['correct_rate'])}. "
                      "Correct by kernel: " + " ".join(fmt_rate(v) for v in learning["curves"]["correct"]) + "."]
    skipped = [o for o in finished if o.skipped]
    if skipped:
        lines += ["", f"Skipped (the reference cannot run here; not in any rate): {len(skipped)} task"
                      f"{'s' if len(skipped) != 1 else ''}: " + ", ".join(o.task for o in skipped) + "."]
    lines += ["", "fast_p as in KernelBench's score.py: share of all tasks (incorrect ones included) that are correct "
              "and strictly more than p times faster than eager PyTorch (fast_0 = correct). compiled: a kernel "
              "compiled; rejected: every kernel was refused by anti-hacking (never counted as a compile failure). "
              "geomean: over correct tasks. refine: median over correct tasks of the first feasible draft's latency "
              "over the best latency.", "", "## Per task", ""]
    rows = []
    for o in outs:
        status = o.status
        if o.rejected and o.status not in ("rejected by anti-hacking",) and not o.error and not o.skipped:
            status += f" ({o.rejected} of {o.kernels} kernels rejected by anti-hacking)"
        rows.append([o.task, str(o.level), status, fmt_x(o.speedup), fmt_x(o.speedup_vs_compile),
                     "-" if o.best_ms is None else f"{o.best_ms:.4f}", fmt_x(o.refine_speedup), str(o.kernels),
                     str(o.tokens), fmt_cost(o.cost)])
    lines += _md_table(("task", "level", "result", "vs eager", "vs compile", "best ms", "refine", "kernels", "tokens",
                        "cost"), rows)
    recorded = outcomes_of(data, "recorded")
    if recorded:
        levels, tasks = compare_outcomes(recorded, outs)
        lines += ["", "## Recorded vs here", ""]
        lines += _md_table(("level", "correct (rec)", "correct (here)", "geomean (rec)", "geomean (here)"),
                           [[level_name(a.level), fmt_rate(a.correct_rate), fmt_rate(b.correct_rate),
                             fmt_x(a.geomean_speedup), fmt_x(b.geomean_speedup)] for a, b in levels])
        moved = [t for t in tasks if t.a and t.b and t.a.feasible != t.b.feasible]
        if moved:
            lines += ["", "Correctness changed here: " + ", ".join(t.task for t in moved) + "."]
    if plot_file:
        lines += ["", "## Speedups", ""]
        if plot_file.endswith(".png"):
            lines.append(f"![speedups]({plot_file})")
        else:
            lines += ["```", text_plot(outs), "```"]
    return "\n".join(lines) + "\n"


def write_report(out: Path, data: dict[str, Any]) -> tuple[Path, Path]:
    """report.md and the plot next to bench.json."""
    plot = write_plot(outcomes_of(data), out)
    report = Path(out) / "report.md"
    _atomic_write(report, render_markdown(data, plot.name))
    return report, plot
