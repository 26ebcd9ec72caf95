"""Tasks: KernelBench-format reference files (Model, get_inputs, get_init_inputs).

Loading and static checks happen in-process with `ast` only; anything that executes the task file
runs in a child process (`validate_task`), so a broken or hostile task cannot hang or crash the
app. This module never imports torch, which keeps `evokernel tasks` and the app's first paint fast.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import os
import re
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from core import lifetime
from core.fsutil import atomic_write_text

BUILTIN_DIR = Path(__file__).with_name("builtin_tasks")
INDEX_PATH = BUILTIN_DIR / "index.json"
PROBE_PATH = Path(__file__).with_name("task_probe.py")

CATEGORIES = (
    "elementwise", "activation", "reduction", "softmax", "norm", "matmul", "conv", "fusion", "block",
    "attention", "other",
)
REQUIRED_FUNCTIONS = ("get_inputs", "get_init_inputs")

# name keywords -> category, tried in order, for task files that come without metadata
_CATEGORY_HINTS = (
    ("attention", "attention"), ("softmax", "softmax"), ("norm", "norm"), ("conv", "conv"),
    ("pool", "conv"), ("matmul", "matmul"), ("gemm", "matmul"), ("bmm", "matmul"), ("linear", "matmul"),
    ("relu", "activation"), ("gelu", "activation"), ("sigmoid", "activation"), ("tanh", "activation"),
    ("swish", "activation"), ("elu", "activation"), ("sum", "reduction"), ("mean", "reduction"),
    ("argm", "reduction"), ("max", "reduction"), ("min", "reduction"), ("cumsum", "reduction"),
    ("cumprod", "reduction"), ("prod", "reduction"),
)
_DTYPE_SHORT = {
    "float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64", "int64": "i64",
    "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "bool",
}


class TaskError(Exception):
    """A task that cannot be loaded or run; the message is one line saying what to fix."""


@dataclass
class Task:
    name: str
    level: int
    category: str
    description: str
    source: str
    path: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Task:
        fields: dict[str, Any] = {k: data.get(k)
                                  for k in ("name", "level", "category", "description", "source", "path")}
        return cls(**fields)


@dataclass
class TensorSpec:
    name: str
    shape: list[int]
    dtype: str

    def short(self) -> str:
        """`x: 256x4096 f32`; a scalar tensor shows as `scalar`."""
        dims = "x".join(str(d) for d in self.shape) or "scalar"
        return f"{self.name}: {dims} {_DTYPE_SHORT.get(self.dtype, self.dtype)}"


@dataclass
class TaskInfo:
    """What running the reference once in a child process revealed."""

    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    init_args: list[str] = field(default_factory=list)
    reference_ms: float | None = None
    parameters: int = 0
    degenerate: list[str] = field(default_factory=list)
    separating: list[str] = field(default_factory=list)  # input distributions where no input passes through

    @property
    def output_shape(self) -> list[int]:
        return self.outputs[0].shape

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> TaskInfo:
        return cls(
            inputs=[TensorSpec(**s) for s in data["inputs"]],
            outputs=[TensorSpec(**s) for s in data["outputs"]],
            init_args=list(data.get("init_args", [])),
            reference_ms=data.get("reference_ms"),
            parameters=int(data.get("parameters", 0)),
            degenerate=list(data.get("degenerate", [])),
            separating=list(data.get("separating", [])),
        )


@dataclass(frozen=True)
class TaskMeta:
    """One row of the built-in index: enough to list tasks without reading or running them."""

    name: str
    level: int
    category: str
    description: str
    file: str

    def to_dict(self) -> dict:
        return asdict(self)


def builtin_index() -> list[TaskMeta]:
    """The built-in suite's metadata, in index order (reads index.json only)."""
    try:
        data = json.loads(INDEX_PATH.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TaskError(f"built-in task index {INDEX_PATH} is unreadable ({exc}); reinstall evokernel-tui") from None
    return [TaskMeta(**row) for row in data["tasks"]]


def builtin_tasks() -> list[Task]:
    """Every built-in task with its source text."""
    return [_builtin_task(meta) for meta in builtin_index()]


def _builtin_task(meta: TaskMeta) -> Task:
    path = BUILTIN_DIR / meta.file
    return Task(meta.name, meta.level, meta.category, meta.description, path.read_text(encoding="utf-8"), str(path))


def load_task(
    spec: str | None = None,
    *,
    kernelbench: str | Path | None = None,
    level: int | None = None,
    problem: int | None = None,
) -> Task:
    """A built-in task by name, a task file by path, or problem N of level L in a KernelBench checkout.

    The file is parsed and checked for Model / get_inputs / get_init_inputs but not executed.
    """
    if kernelbench is not None:
        if spec is not None:
            raise TaskError("give either a task name/path or a KernelBench directory, not both")
        path, level = _kernelbench_file(Path(kernelbench), level, problem)
        task = _task_from_file(path, level=level)
    elif spec is None or not str(spec).strip():
        raise TaskError("no task given; pass a built-in task name (see `evokernel tasks`) or a task file path")
    else:
        task = _task_from_spec(str(spec).strip())
    check_task_source(task.source, task.name)
    return task


def _task_from_spec(spec: str) -> Task:
    by_name = {meta.name: meta for meta in builtin_index()}
    if spec in by_name:
        return _builtin_task(by_name[spec])
    path = Path(spec).expanduser()
    if path.is_file():
        return _task_from_file(path)
    if path.is_dir():
        raise TaskError(f"{spec} is a directory; pass a task file, or use --kernelbench DIR with a level and problem")
    raise TaskError(f"unknown task '{spec}': not a built-in task name (see `evokernel tasks`) and no such file")


def _kernelbench_file(root: Path, level: int | None, problem: int | None) -> tuple[Path, int]:
    """DIR/level{L}/{N}_*.py (or DIR/KernelBench/level{L}/..., the layout of a git checkout)."""
    if level is None or problem is None:
        raise TaskError("a KernelBench task needs both a level and a problem number (e.g. level 1, problem 23)")
    if not root.is_dir():
        raise TaskError(f"KernelBench directory {root} does not exist")
    candidates = [root / f"level{level}", root / "KernelBench" / f"level{level}"]
    level_dir = next((d for d in candidates if d.is_dir()), None)
    if level_dir is None:
        raise TaskError(f"no level{level} folder in KernelBench directory {root} (looked for {candidates[0]})")
    matches = sorted(level_dir.glob(f"{problem}_*.py"))
    if not matches:
        raise TaskError(f"no problem {problem} in {level_dir} (looked for {problem}_*.py)")
    if len(matches) > 1:
        names = ", ".join(m.name for m in matches)
        raise TaskError(f"problem {problem} is ambiguous in {level_dir}: {names}")
    return matches[0], int(level)


def kernelbench_problems(root: str | Path, levels: list[int] | None = None) -> list[Task]:
    """Every problem of the given levels (default 1-3) of a KernelBench checkout, by level then problem number."""
    root = Path(root).expanduser()
    if not root.is_dir():
        raise TaskError(f"KernelBench directory {root} does not exist")
    tasks: list[Task] = []
    for lv in levels or [1, 2, 3]:
        level_dir = next((d for d in (root / f"level{lv}", root / "KernelBench" / f"level{lv}") if d.is_dir()), None)
        if level_dir is None:
            continue
        numbered = sorted((int(m.group(1)), f) for f in level_dir.glob("*.py") if (m := re.match(r"(\d+)_", f.name)))
        for _, path in numbered:
            task = _task_from_file(path, level=lv)
            check_task_source(task.source, task.name)
            tasks.append(task)
    if not tasks:
        wanted = ", ".join(str(lv) for lv in levels or [1, 2, 3])
        raise TaskError(f"no KernelBench problems for level {wanted} under {root} (expected level1/1_*.py ...)")
    return tasks


def problem_number(task: Task) -> int | None:
    """The N of a KernelBench file `N_Name.py`."""
    m = re.match(r"(\d+)_", task.name)
    return int(m.group(1)) if m else None


def _task_from_file(path: Path, level: int | None = None) -> Task:
    try:
        source = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise TaskError(f"task file {path} is not UTF-8 text") from None
    except OSError as exc:
        raise TaskError(f"cannot read task file {path}: {exc.strerror or exc}") from None
    if level is None:
        found = re.fullmatch(r"level(\d+)", path.parent.name)
        level = int(found.group(1)) if found else 1
    name = path.stem
    return Task(
        name=name,
        level=level,
        category=guess_category(name, level),
        description=_describe_source(source) or f"task from {path.name}",
        source=source,
        path=str(path),
    )


def guess_category(name: str, level: int) -> str:
    """A category from the file name (KernelBench names say what they compute), else by level."""
    if level == 2:
        return "fusion"
    lowered = name.lower()
    for hint, category in _CATEGORY_HINTS:
        if hint in lowered:
            return category
    return "block" if level >= 3 else "other"


def _describe_source(source: str) -> str:
    """First line of the module or Model docstring, if the file parses and has one."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ""
    docs = [ast.get_docstring(tree)]
    docs += [ast.get_docstring(n) for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"]
    for doc in docs:
        if doc and doc.strip():
            return doc.strip().splitlines()[0].rstrip(".")
    return ""


def check_task_source(source: str, name: str = "task") -> ast.Module:
    """Syntax and required top-level names, without executing anything."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise TaskError(f"task {name}: syntax error at line {exc.lineno}: {exc.msg}") from None
    defined = _top_level_names(tree)
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    if model is None:
        raise TaskError(f"task {name} has no `Model` class; define class Model(nn.Module) with a forward method")
    if not any(isinstance(n, ast.FunctionDef) and n.name == "forward" for n in model.body):
        raise TaskError(f"task {name}: class Model has no forward method; add def forward(self, ...)")
    missing = [f for f in REQUIRED_FUNCTIONS if f not in defined]
    if missing:
        wanted = " and ".join(f"`{f}()`" for f in missing)
        raise TaskError(f"task {name} has no {wanted}; a task file defines get_inputs() and get_init_inputs()")
    return tree


def _top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def forward_arg_names(tree: ast.Module) -> list[str]:
    """Parameter names of Model.forward after self (empty when it takes *args)."""
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "forward":
                    args = item.args.posonlyargs + item.args.args
                    return [a.arg for a in args[1:]]
    return []


#: modules KernelBench problems import besides torch: the `kernelbench` extra of pyproject.toml installs them
KERNELBENCH_EXTRAS = {"einops"}
#: the probe's address-space limit when the caller gives none (the verifier's default memory limit)
DEFAULT_PROBE_MEMORY_GB = 8.0


def _limit_memory(memory_gb: float | None):
    """A preexec function that caps the child's data memory (the probe allocates what the task asks for).

    RLIMIT_DATA, not RLIMIT_AS: it counts what is allocated (heap, anonymous mappings) but not address
    space merely reserved, which CUDA reserves by the terabyte when a task moves its inputs to the GPU."""
    if not memory_gb or os.name != "posix":
        return None
    limit = int(memory_gb * 1024**3)

    def apply() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))

    return apply


def _run_probe(task: Task, args: list[str], timeout_s: float, memory_gb: float | None, what: str) -> dict:
    filename = task.path or f"<task {task.name}>"
    try:
        # dies with us (parent-death signal, its own group killed on SIGTERM/SIGINT and at exit)
        proc = lifetime.run([sys.executable, "-I", str(PROBE_PATH), filename, *args], input=task.source, text=True,
                            timeout=timeout_s, preexec_fn=_limit_memory(memory_gb))
    except subprocess.TimeoutExpired:
        raise TaskError(f"task {task.name} did not finish within {timeout_s:g}s ({what} is too slow or stuck)") from None
    result = _last_json_line(proc.stdout)
    if result is None:
        hint = ""
        if memory_gb and re.search(r"MemoryError|alloc|out of memory|std::bad_alloc", proc.stderr or ""):
            hint = f" (it ran out of the {memory_gb:g} GiB memory limit; raise it with --memory-gb)"
        raise TaskError(f"task {task.name} crashed the probe process (exit {proc.returncode}): "
                        f"{_last_line(proc.stderr)}{hint}")
    if not result.get("ok"):
        error = result.get("error", "unknown failure")
        missing = re.search(r"No module named '(\w+)'", error)
        if missing and missing.group(1) in KERNELBENCH_EXTRAS:
            error += "; install what KernelBench problems import with: pip install -e '.[kernelbench]'"
        if memory_gb and re.search(r"MemoryError|alloc|out of memory|not enough memory", error):
            error += f" (the probe's memory limit is {memory_gb:g} GiB; raise it with --memory-gb)"
        raise TaskError(f"task {task.name}: {error}")
    return result


_PROBED: dict[tuple, dict] = {}


def validate_task(task: Task, timeout_s: float = 60, *, memory_gb: float | None = DEFAULT_PROBE_MEMORY_GB,
                  degenerate: str | None = None, device: str = "cpu") -> TaskInfo:
    """Run the task once in a child process (its address space capped at `memory_gb`); its shapes, or a
    one-line TaskError. `degenerate="kernelbench"|"v0"|"paper"` also finds which trivial answers pass.
    `device="cuda"` runs it on the GPU the task will be verified on (its inputs drawn there)."""
    arg_names = forward_arg_names(check_task_source(task.source, task.name))
    args = ["--degenerate", degenerate] if degenerate else []
    if device != "cpu":
        args += ["--device", device]
    key = (hashlib.sha256(task.source.encode()).hexdigest(), task.path, memory_gb, degenerate, device)
    result = _PROBED.get(key)
    if result is None:
        result = _run_probe(task, args, timeout_s, memory_gb, "get_inputs, Model() or forward")
        _PROBED[key] = result  # bench checks a task and then reads its shapes: one reference run, not two
    return TaskInfo(
        inputs=[_spec(_arg_name(arg_names, i), s) for i, s in enumerate(result["inputs"])],
        outputs=[_spec("out" if i == 0 else f"out{i}", s) for i, s in enumerate(result["outputs"])],
        init_args=result["init_args"],
        reference_ms=result["reference_ms"],
        parameters=result["parameters"],
        degenerate=list(result.get("degenerate", [])),
        separating=list(result.get("separating", [])),
    )


@dataclass
class MemoryEstimate:
    """What one reference run needs, counted on the meta device without allocating (`task_probe.estimate_memory`)."""

    bytes: int
    weights_bytes: int
    inputs_bytes: int
    peak_bytes: int
    outputs_bytes: int
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]

    def to_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        """`about 12.0 GiB (inputs 6.0 GiB, weights 0 B, forward peak 6.0 GiB)`."""
        return (f"about {fmt_bytes(self.bytes)} (inputs {fmt_bytes(self.inputs_bytes)}, weights "
                f"{fmt_bytes(self.weights_bytes)}, forward peak {fmt_bytes(self.peak_bytes)})")


def fmt_bytes(n: float) -> str:
    for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


ESTIMATE_FORMAT = 2


def _estimate_cache(task: Task) -> Path:
    from verifier.config import default_build_root

    key = hashlib.sha256(f"{ESTIMATE_FORMAT}\0{task.source}".encode()).hexdigest()[:32]
    return default_build_root() / "task_estimates" / f"{key}.json"


def _read_cache(path: Path) -> Any:
    """A cached probe result (JSON), or None when there is none or it cannot be read."""
    try:
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    except (OSError, ValueError):
        return None


def _write_cache(path: Path, data: Any) -> None:
    """Keep a probe result for next time; a cache that cannot be written only costs a later probe."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(data))
    except OSError:
        pass


def _read_estimate(task: Task) -> dict | None:
    return _read_cache(_estimate_cache(task))


def _write_estimate(task: Task, result: dict) -> None:
    _write_cache(_estimate_cache(task), result)


def _estimate_from(task: Task, result: dict | None) -> MemoryEstimate | None:
    if not result or not result.get("ok"):
        return None
    arg_names = forward_arg_names(check_task_source(task.source, task.name))
    return MemoryEstimate(
        bytes=int(result["bytes"]), weights_bytes=int(result["weights_bytes"]), inputs_bytes=int(result["inputs_bytes"]),
        peak_bytes=int(result["peak_bytes"]), outputs_bytes=int(result["outputs_bytes"]),
        inputs=[_spec(_arg_name(arg_names, i), s) for i, s in enumerate(result["inputs"])],
        outputs=[_spec("out" if i == 0 else f"out{i}", s) for i, s in enumerate(result["outputs"])],
    )


def estimate_many(tasks: list[Task], timeout_s: float = 300, use_cache: bool = True) -> list[MemoryEstimate | None]:
    """`estimate_task_memory` for many tasks with one child process (torch imported once), cached per source."""
    results: list[dict | None] = [(_read_estimate(t) if use_cache else None) for t in tasks]
    missing = [i for i, r in enumerate(results) if r is None]
    if missing:
        payload = json.dumps([{"filename": tasks[i].path or f"<task {tasks[i].name}>", "source": tasks[i].source}
                              for i in missing])
        try:
            proc = lifetime.run([sys.executable, "-I", str(PROBE_PATH), "--estimate-batch"], input=payload,
                                text=True, timeout=timeout_s, preexec_fn=_limit_memory(4.0))
            lines = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
        except (subprocess.TimeoutExpired, ValueError):
            lines = []
        for i, line in zip(missing, lines, strict=False):
            results[i] = line
            _write_estimate(tasks[i], line)
    return [_estimate_from(t, r) for t, r in zip(tasks, results, strict=True)]


def estimate_task_memory(task: Task, timeout_s: float = 60, use_cache: bool = True) -> MemoryEstimate | None:
    """The memory the task's reference needs, from its shapes alone (nothing is allocated: the task runs
    on torch's meta device in a child process). None when that cannot be worked out (an operator with no
    meta kernel, data-dependent shapes, a task that moves tensors to a device by hand): then nothing is
    refused up front. Cached per task source."""
    check_task_source(task.source, task.name)
    result = _read_estimate(task) if use_cache else None
    if result is None:
        try:
            result = _run_probe(task, ["--estimate"], timeout_s, 4.0, "building the task on the meta device")
        except TaskError as exc:
            result = {"ok": False, "error": str(exc)}
        _write_estimate(task, result)
    return _estimate_from(task, result)


#: the job directory's plan (`job_dir_mb`): what a verification hands over through it, besides the build
JOB_BUILD_BYTES = 256 << 20  # the candidate's own build (a CPU extension: a few MB; a CUDA one: ~100 MB)
JOB_TRIALS_HELD = 3  # trials whose inputs and outputs can lie there at once (two in flight, the decoy's replay)
JOB_MARGIN = 1.5  # held-out shapes and magnitude probes may be a little larger than the task's own call
JOB_MIN_MB = 512
JOB_STEP_MB = 256  # sizes rounded up to this, so tasks of one size class share a spare sandbox


def job_dir_mb(estimate: MemoryEstimate, timing_memory_mb: float = 256.0) -> int:
    """The job directory's tmpfs (MiB) for a task, from its memory estimate: the build, the weights handed
    over once, `JOB_TRIALS_HELD` trials' inputs and outputs, a timed round's sets (`timing_memory_mb`), all
    with `JOB_MARGIN`; at least `JOB_MIN_MB`. Sized from what the task needs, not from the memory limit
    (a quarter of it, 2 GiB by default, before): a small task's candidate can fill far less host memory,
    and a task with large outputs gets the room its trials need (it did not fit a quarter of the limit)."""
    need = (JOB_BUILD_BYTES + estimate.weights_bytes + JOB_TRIALS_HELD * (estimate.inputs_bytes + estimate.outputs_bytes)
            + timing_memory_mb * 1024**2) * JOB_MARGIN
    mb = math.ceil(need / 1024**2 / JOB_STEP_MB) * JOB_STEP_MB
    return max(JOB_MIN_MB, int(mb))


def known_estimate(task: Task) -> MemoryEstimate | None:
    """The task's memory estimate when one was worked out before (`estimate_task_memory`, which every command
    runs before its first verification), else None; never starts the probe."""
    try:
        return _estimate_from(task, _read_estimate(task))
    except (TaskError, KeyError, TypeError, ValueError):
        return None


AVAILABLE_ENV = "EVOKERNEL_AVAILABLE_GB"


def available_memory_bytes() -> int | None:
    """The memory this machine has available now (bytes), or None when it cannot be read:
    `$EVOKERNEL_AVAILABLE_GB` (a container's own limit, which /proc/meminfo does not show), else psutil
    where it is installed, else MemAvailable of /proc/meminfo."""
    given = os.environ.get(AVAILABLE_ENV)
    if given:
        try:
            return int(float(given) * 1024**3)
        except ValueError:
            pass
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except Exception:  # not installed, or no reading on this platform
        pass
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def memory_refusal(task_name: str, estimate: MemoryEstimate, limit_gb: float, flag: str = "--memory-gb",
                   available_bytes: int | None = None) -> str | None:
    """One line refusing a problem too big for the memory limit or for the memory this machine has available
    (`available_bytes`, read from the machine when None), naming the estimate, the limit and the flag; None
    when it fits. The advice never raises the limit past what the machine has: a task that cannot fit the
    machine at all is said to be so."""
    limit = limit_gb * 1024**3
    available = available_bytes if available_bytes is not None else available_memory_bytes()
    gib = 1024**3
    needs = f"task {task_name} needs {estimate.describe()} for one reference run"
    if available is not None and estimate.bytes > available:
        over = f", over the {limit_gb:g} GiB memory limit," if estimate.bytes > limit else ","
        return (f"{needs}{over} and this machine has only {available / gib:.1f} GiB available: it cannot run "
                "here; use a smaller problem size, free memory, or a machine with more memory")
    if estimate.bytes <= limit:
        return None
    need: float = max(1, math.ceil(estimate.bytes * 1.25 / gib))
    note = ""
    if available is not None and need * gib > available:  # the headroom does not fit: all there is, no more
        need = math.floor(available / gib * 10) / 10
        if need * gib < estimate.bytes:
            return (f"{needs}, over the {limit_gb:g} GiB memory limit, and this machine has only "
                    f"{available / gib:.1f} GiB available: it cannot run here; use a smaller problem size, free "
                    "memory, or a machine with more memory")
        note = f" (about all the {available / gib:.1f} GiB this machine has available)"
    return (f"{needs}, over the {limit_gb:g} GiB memory limit; raise it with {flag} {need:g}{note} or use a smaller "
            "problem size")


#: per process on the card beyond its tensors: a CUDA context and the verifier's 1 GiB L2 flush buffer
DEVICE_OVERHEAD_BYTES = 3 * 1024**3 // 2


def device_memory_plan(estimate: MemoryEstimate) -> dict[str, int]:
    """What one verification holds on the card at its peak, per process, from the meta-device estimate:
    the trusted reference worker runs the reference once (weights, inputs, forward's peak); the candidate's
    process as much again, plus the call's results staged for the device-side comparison (its outputs and
    its inputs as forward left them: `verifier/correctness/shared_device_memory.py`); each with a context
    and the flush buffer. Timing rounds are sized afterwards from what the card has free."""
    staged = estimate.inputs_bytes + estimate.outputs_bytes
    plan = {"reference": estimate.bytes + DEVICE_OVERHEAD_BYTES,
            "candidate": estimate.bytes + staged + DEVICE_OVERHEAD_BYTES}
    plan["total"] = plan["reference"] + plan["candidate"]
    return plan


def device_memory_refusal(task_name: str, estimate: MemoryEstimate, card: str, free_bytes: int,
                          held: str = "free") -> str | None:
    """One line refusing, before anything runs, a GPU verification whose plan (`device_memory_plan`) exceeds
    what the card has free, naming the estimate and the card; None when it fits."""
    plan = device_memory_plan(estimate)
    if plan["total"] <= free_bytes:
        return None
    return (f"task {task_name} needs about {fmt_bytes(plan['total'])} of device memory for one verification "
            f"(the reference {fmt_bytes(plan['reference'])}, the candidate with its staged results "
            f"{fmt_bytes(plan['candidate'])}) and {card or 'the GPU'} has {fmt_bytes(free_bytes)} {held}: "
            "free the card (nvidia-smi shows what holds it) or use a smaller problem size")


def check_device_memory(task: Task, estimate: MemoryEstimate | None) -> None:
    """Refuse (TaskError, one line) a GPU verification the card cannot hold now (nvidia-smi's free memory)."""
    from core.device import gpu_free_bytes

    found = gpu_free_bytes() if estimate is not None else None
    if found is not None and estimate is not None:
        refusal = device_memory_refusal(task.name, estimate, found[0], found[1])
        if refusal:
            raise TaskError(refusal)


def check_task_memory(task: Task, limit_gb: float, flag: str = "--memory-gb", timeout_s: float = 60) -> MemoryEstimate | None:
    """Refuse (TaskError, one line) a task whose reference would not fit in `limit_gb`, before anything runs."""
    estimate = estimate_task_memory(task, timeout_s=timeout_s)
    if estimate is not None:
        refusal = memory_refusal(task.name, estimate, limit_gb, flag)
        if refusal:
            raise TaskError(refusal)
    return estimate


def _arg_name(names: list[str], i: int) -> str:
    return names[i] if i < len(names) else f"in{i}"


def _spec(name: str, data: dict) -> TensorSpec:
    return TensorSpec(name=name, shape=list(data["shape"]), dtype=data["dtype"])


def _last_json_line(stdout: str) -> dict | None:
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:240] if lines else "no error output (killed by a signal?)"


def probe_device(backend: str) -> str:
    """Where the task checks run the reference: on the GPU for the GPU backends, as the verifier will."""
    return "cuda" if backend in ("cuda", "triton") else "cpu"


def is_builtin(task: Task) -> bool:
    """A task of the built-in suite (all small, none degenerate: tests check both)."""
    return bool(task.path and Path(task.path).resolve().parent == BUILTIN_DIR.resolve())


@dataclass(frozen=True)
class Degeneracy:
    """What the probe found trivial about a task: the answers that pass (`found`), and the input
    distributions under which no input handed back unchanged passes (`separating`)."""

    found: list[str]
    separating: list[str]


def task_degeneracy(task: Task, preset: str = "kernelbench", *, memory_gb: float | None = DEFAULT_PROBE_MEMORY_GB,
                    timeout_s: float = 120, use_cache: bool = True, raise_errors: bool = False,
                    device: str = "cpu") -> Degeneracy | None:
    """Which trivial answers (zeros, a constant, a broadcast mean, outputs that ignore the inputs or the
    weights, an input passed through) would pass this task under `preset`; empty for a sound task, None
    when the reference could not be run (with `raise_errors`, its one-line TaskError instead). Runs the
    reference in the probe (under `memory_gb`); cached per task source and preset (a cached answer means
    the task ran). `device="cuda"` runs the reference on the GPU (a gigabyte-sized problem is then
    seconds, not minutes of the host's cores and tens of GB of its memory)."""
    key = hashlib.sha256(f"degenerate-v2\0{preset}\0{task.source}".encode()).hexdigest()[:32]
    from verifier.config import default_build_root

    cache = default_build_root() / "task_estimates" / f"{key}.degenerate.json"
    cached = _read_cache(cache) if use_cache else None
    if isinstance(cached, dict) and isinstance(cached.get("found"), list):
        return Degeneracy([str(f) for f in cached["found"]], [str(d) for d in cached.get("separating") or []])
    try:
        info = validate_task(task, timeout_s=timeout_s, memory_gb=memory_gb, degenerate=preset, device=device)
    except TaskError:
        if raise_errors:
            raise
        return None
    _write_cache(cache, {"found": info.degenerate, "separating": info.separating})
    return Degeneracy(info.degenerate, info.separating)


def task_signature_text(task: Task, info: TaskInfo) -> str:
    """Short shapes string for retrieval and display, e.g. `x: 256x4096 f32`."""
    return "; ".join(spec.short() for spec in info.inputs)
