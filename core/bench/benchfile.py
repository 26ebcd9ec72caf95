"""`OUT/bench.json`: loading and checking one, and `BenchFile`, which rewrites it atomically as tasks
finish (settings, task order, outcomes, summary); plus the resume check and the anti-hacking policy a
bench ran under (two benches judged under different policies do not compare).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from core.bench.metrics import learning_metrics, summarise_levels
from core.bench.records import BenchError, TaskOutcome

BENCH_FORMAT = 1
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


def policy_mismatch(a: dict[str, object], b: dict[str, object]) -> str | None:
    """Why two bench runs cannot be compared (judged under different policies), or None."""
    pa, pb = bench_policy(a), bench_policy(b)
    if pa == pb:
        return None

    def label(p: tuple[str, tuple[str, ...]]) -> str:
        return p[0] + (f" allowing {', '.join(p[1])}" if p[1] else "")

    return (f"A was judged under the {label(pa)} policy and B under {label(pb)}: their figures do not compare; "
            "rerun one with the other's --policy")


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


def atomic_write(path: Path, text: str) -> None:
    from core.fsutil import atomic_write_text

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text)


class BenchFile:
    """The bench.json of one run: settings, the task order, and outcomes as tasks finish (thread-safe)."""

    def __init__(self, out: Path, settings: dict[str, object], order: list[str]):
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

    def to_dict(self) -> dict[str, object]:
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
        atomic_write(self.path, json.dumps(self.to_dict(), indent=2, default=str))

    def flush(self) -> dict[str, object]:
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
    cards = sorted({d for o in outcomes for d in o.devices if d})
    return {"python": platform.python_version(), "platform": platform.platform(), "devices": devices,
            "verdict_devices": cards}
