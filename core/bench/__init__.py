"""`evokernel bench`: the draft -> refine loop over a suite of tasks, with one shared memory bank.

Each task is its own session under `OUT/sessions/`, named by its position in the (fixed) task order,
so a rerun with the same `OUT` finds them: recorded tasks are skipped and a task that was running
when the bench stopped is reopened and continued. `OUT/bench.json` (settings + one `TaskOutcome` per
finished task) is rewritten atomically after every task.

The metrics are pure functions over `TaskOutcome` records (KernelBench's compile rate, correctness
and fast_p, a geometric-mean speedup, and the median in-task refine speedup of EvoKernel), so a
report can be recomputed from `bench.json` alone, and `replay_bench` recomputes one on this
machine's hardware from recorded sessions without any model.

The package holds one concern per module:

- `records`: records of a run: TaskOutcome, LevelSummary, BenchError
- `metrics`: pure scoring functions (compile/correct rates, fast_p, geomean, refine median, comparison)
- `selection`: which tasks, in which order, and which cannot run here
- `clients`: model clients: ModelSource, BoundedClient
- `benchfile`: bench.json: load, write as tasks finish, resume and policy checks
- `config`: BenchConfig, the settings of a run
- `run`: run_bench: one session per task on a thread pool, jobs to an executor
- `replay`: replay_bench: recorded kernels verified again here
- `plot`: the speedup plot (matplotlib or text)
- `report`: display strings of a level row and report.md

`from core.bench import X` reaches every name the modules export.
"""

from __future__ import annotations

from core.bench.benchfile import (
    BENCH_FORMAT,
    LEGACY_POLICY,
    RESUME_DEFAULTS,
    RESUME_KEYS,
    BenchFile,
    bench_path,
    bench_policy,
    load_bench,
    outcomes_of,
    policy_mismatch,
)
from core.bench.clients import BoundedClient, ModelSource
from core.bench.config import MEMORY_MODES, RETRIEVAL_MODES, BenchConfig
from core.bench.metrics import (
    FAST_PS,
    ComparedTask,
    compare_outcomes,
    compile_rate,
    correct_rate,
    fast_p,
    geomean,
    geomean_speedup,
    learning_metrics,
    median_refine_speedup,
    median_refine_speedup_paper,
    rejected_rate,
    summarise,
    summarise_levels,
    total_cost,
)
from core.bench.plot import text_plot, write_plot
from core.bench.records import (
    BenchError,
    LevelSummary,
    TaskOutcome,
    best_attempt,
    outcome_from_results,
    short_device,
    verdict_device,
)
from core.bench.replay import replay_bench, session_dirs
from core.bench.report import (
    SUMMARY_COLUMNS,
    best_device_cell,
    device_counts,
    devices_line,
    fmt_cost,
    fmt_fraction,
    fmt_rate,
    fmt_speed,
    fmt_x,
    level_name,
    noise_note,
    render_markdown,
    summary_cells,
    write_report,
)
from core.bench.run import ProgressFn, accepted_index, retrieval_slots, run_bench, session_id, task_memory
from core.bench.selection import (
    ORDERS,
    order_tasks,
    parse_levels,
    parse_names,
    reference_skip_reason,
    select_tasks,
)

__all__ = [
    "BENCH_FORMAT",
    "BenchConfig",
    "BenchError",
    "BenchFile",
    "BoundedClient",
    "ComparedTask",
    "FAST_PS",
    "LEGACY_POLICY",
    "LevelSummary",
    "MEMORY_MODES",
    "ModelSource",
    "ORDERS",
    "ProgressFn",
    "RESUME_DEFAULTS",
    "RESUME_KEYS",
    "RETRIEVAL_MODES",
    "SUMMARY_COLUMNS",
    "TaskOutcome",
    "accepted_index",
    "bench_path",
    "bench_policy",
    "best_attempt",
    "best_device_cell",
    "compare_outcomes",
    "compile_rate",
    "correct_rate",
    "device_counts",
    "devices_line",
    "fast_p",
    "fmt_cost",
    "fmt_fraction",
    "fmt_rate",
    "fmt_speed",
    "fmt_x",
    "noise_note",
    "geomean",
    "geomean_speedup",
    "learning_metrics",
    "level_name",
    "load_bench",
    "median_refine_speedup",
    "median_refine_speedup_paper",
    "order_tasks",
    "outcome_from_results",
    "outcomes_of",
    "parse_levels",
    "parse_names",
    "policy_mismatch",
    "reference_skip_reason",
    "rejected_rate",
    "render_markdown",
    "replay_bench",
    "retrieval_slots",
    "run_bench",
    "select_tasks",
    "session_dirs",
    "session_id",
    "short_device",
    "summarise",
    "summarise_levels",
    "summary_cells",
    "task_memory",
    "text_plot",
    "total_cost",
    "verdict_device",
    "write_plot",
    "write_report",
]
