"""Optional Nsight Compute summary for the refine prompt: achieved occupancy, DRAM throughput and time
of each kernel that one forward launched.

The parent runs the harness once more in "profile-once" mode (one forward, nothing else on the GPU)
under `ncu --csv`, in the same sandbox as every candidate run, and parses ncu's CSV here. It is advice
for the model, never evidence for a gate: a candidate that forges ncu's output only misleads itself.
"""

from __future__ import annotations

import csv
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

METRICS = {
    "sm__warps_active.avg.pct_of_peak_sustained_active": "occupancy_pct",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct",
    "gpu__time_duration.sum": "time_us",
}
_TIME_TO_US = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3,
               "second": 1e6, "s": 1e6}
MAX_KERNELS = 50


@dataclass
class NcuKernel:
    """One profiled kernel launch; a metric ncu did not report is None."""

    kernel: str
    occupancy_pct: float | None = None
    dram_pct: float | None = None
    time_us: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def ncu_path() -> str | None:
    return shutil.which("ncu")


def ncu_install_dirs(ncu: str, opt: Path = Path("/opt/nvidia")) -> list[Path]:
    """What a sandboxed ncu must see, read-only: the CUDA toolkit its wrapper script lives in, and the
    Nsight Compute installation the wrapper looks for (`<toolkit>/nsight-compute-*`, often a link to
    `/opt/nvidia/nsight-compute/<version>`, or `/opt/nvidia` itself), each resolved to its real place."""
    toolkit = Path(ncu).resolve().parent.parent
    found = [toolkit]
    for candidate in (*sorted(toolkit.glob("nsight-compute*")), opt):
        if candidate.exists():
            found.append(candidate.resolve())
    unique: list[Path] = []
    for d in found:
        if not any(d == u or d.is_relative_to(u) for u in unique):
            unique = [u for u in unique if not u.is_relative_to(d)] + [d]
    return unique


def ncu_argv(ncu: str, log_path: Path, argv: list[str]) -> list[str]:
    """`argv` under ncu: only our three metrics, CSV into `log_path`, clocks left as they are."""
    return [ncu, "--metrics", ",".join(METRICS), "--csv", "--clock-control", "none", "--launch-count",
            str(MAX_KERNELS), "--log-file", str(log_path), *argv]


def _number(text: str) -> float | None:
    """ncu writes "1,234.5" (thousands separators) and "n/a"; anything not a number is None."""
    try:
        return float(text.replace(",", "").strip())
    except ValueError:
        return None


def _value(metric: str, unit: str, text: str) -> float | None:
    value = _number(text)
    if value is None or METRICS[metric] != "time_us":
        return value
    scale = _TIME_TO_US.get(unit.strip().lower())
    return None if scale is None else value * scale


def parse_ncu_csv(text: str) -> list[NcuKernel]:
    """Rows of `ncu --csv` (one per kernel launch and metric) -> one `NcuKernel` per launch, in launch order.

    Lines before the header and lines that are not CSV records (`==PROF==` messages, program output) are
    skipped, so the log can be parsed as ncu wrote it.
    """
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if '"Kernel Name"' in ln and '"Metric Name"' in ln), None)
    if start is None:
        return []
    records = [lines[start]] + [ln for ln in lines[start + 1:] if ln.startswith('"')]
    kernels: dict[tuple[str, str], NcuKernel] = {}
    for row in csv.DictReader(records):
        metric = row.get("Metric Name") or ""
        if metric not in METRICS or not row.get("Kernel Name"):
            continue
        key = (row.get("ID") or str(len(kernels)), row["Kernel Name"])
        kernel = kernels.setdefault(key, NcuKernel(row["Kernel Name"]))
        setattr(kernel, METRICS[metric], _value(metric, row.get("Metric Unit") or "", row.get("Metric Value") or ""))
    return list(kernels.values())


def summary_lines(rows: list[dict], limit: int = 6, width: int = 70) -> list[str]:
    """A few lines for the refine prompt, slowest kernels first."""
    ordered = sorted(rows, key=lambda r: r.get("time_us") or 0.0, reverse=True)

    def pct(x) -> str:
        return "?" if x is None else f"{x:.0f}%"

    out = []
    for r in ordered[:limit]:
        name = str(r.get("kernel", "?"))
        name = name if len(name) <= width else name[: width - 3] + "..."
        t = r.get("time_us")
        out.append(f"  {name}: {'?' if t is None else f'{t:.1f} us'}, occupancy {pct(r.get('occupancy_pct'))}, "
                   f"DRAM throughput {pct(r.get('dram_pct'))} of peak")
    return out
