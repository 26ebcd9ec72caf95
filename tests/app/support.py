"""Doubles for app tests: a verifier that reads its verdict from the kernel, and a fixed recorded session.

`verdict_verify` lets a scripted model's kernel say what the gates will find (`# verdict: feasible
0.5`), so control tests drive a real `core.session.Session` without paying for C++ builds; the real
verifier gets its own test. `StaticSession` is a frozen session (fixed events on disk) for snapshots.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from tests.fakes.verdicts import DETAIL, fake_verify
from verifier.result import GATE_ORDER


def kernel(verdict: str, ms: float | None = None, tag: str = "") -> str:
    tail = f" {ms}" if ms is not None else ""
    return (
        "import torch\n\n\nclass ModelNew(torch.nn.Module):\n"
        f"    # verdict: {verdict}{tail}\n    # {tag}\n    def forward(self, x):\n        return x.clamp_min(0)\n"
    )


def reply(verdict: str, ms: float | None = None, tag: str = "") -> str:
    return f"Plan: clamp in one pass.\n\n```python\n{kernel(verdict, ms, tag)}```\n"


class VerdictVerifier:
    """A verify_fn that obeys `# verdict:` comments, counts calls, and can hold at the compile gate."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.hold: threading.Event | None = None
        self.entered = threading.Event()

    def block(self) -> threading.Event:
        self.hold = threading.Event()
        self.entered.clear()
        return self.hold

    def __call__(self, reference_source, candidate_source, backend="cpu", config=None, on_gate=None):
        self.calls.append(candidate_source)
        return fake_verify(reference_source, candidate_source, backend, config, on_gate, before_gate=self._maybe_hold)

    def _maybe_hold(self, gate: str) -> None:
        if gate == "compile" and self.hold is not None:
            self.entered.set()
            self.hold.wait(timeout=30)


# ----- a frozen session for snapshots ---------------------------------------------------------------

def _gates(fail: str | None, ms: float | None) -> list[dict[str, Any]]:
    out, failed = [], False
    for name in GATE_ORDER:
        status = "skip" if failed else ("fail" if name == fail else "pass")
        failed = failed or status == "fail"
        out.append({"name": name, "status": status, "seconds": {"compile": 21.4}.get(name, 0.12),
                    "reason": "build failed: expected ';'" if status == "fail" else "",
                    "detail": DETAIL.get(name, {}) if status == "fail" else {}})
    return out


def _verification(version: int, fail: str | None, ms: float | None) -> dict[str, Any]:
    feasible = fail is None
    return {"version": version, "reverify": False, "result": {
        "backend": "cpu", "gates": _gates(fail, ms), "latency_ms": ms if feasible else None,
        "reference_ms": 2.0, "compiled_ms": 1.6, "feasible": feasible,
        "outcome": "feasible" if feasible else "compile_fail", "speedup": (2.0 / ms) if feasible and ms else None}}


SNAPSHOT_ITEMS = [
    {"id": "seed-vec", "kind": "seed", "title": "Vectorise the inner loop", "text": "Use at::vec::Vectorized<float> over the last dim.",
     "q1": 0.42, "q2": 0.10, "visits1": 3, "visits2": 1, "similarity": 0.81, "score": 0.74},
    {"id": "ins-fuse", "kind": "insight", "title": "Fuse elementwise ops", "text": "One pass over memory beats two.",
     "q1": 0.20, "q2": 0.35, "visits1": 1, "visits2": 2, "similarity": 0.64, "score": 0.55},
    {"id": "traj-omp", "kind": "trajectory", "title": "OpenMP over rows", "text": "parallel for over rows; 1.4x.",
     "q1": 0.05, "q2": 0.0, "visits1": 1, "visits2": 0, "similarity": 0.52, "score": 0.31},
]


def snapshot_events() -> list[dict[str, Any]]:
    k1, k2 = kernel("compile_fail", tag="first try"), kernel("feasible", 1.25, tag="clamp")
    ev = [
        ("session_started", {"task": "relu", "backend": "cpu", "model": "scripted", "manual": False}, 0),
        ("retrieved", {"stage": "draft", "items": [dict(i) for i in SNAPSHOT_ITEMS]}, 1),  # as a session records them
        ("prompt", {"stage": "draft", "messages": []}, 1),
        ("model_reply", {"stage": "draft", "purpose": "kernel", "text": "…", "prompt_tokens": 900, "completion_tokens": 300, "cost": 0.0012}, 1),
        ("kernel", {"version": 1, "stage": "draft", "author": "model", "file": "kernels/0001.py", "source": k1}, 1),
        ("verification", _verification(1, "compile", None), 1),
        ("reward", {"version": 1, "stage": "draft", "value": 0.1, "outcome": "compile_fail"}, 1),
        ("q_update", {"stage": "draft", "changes": [{"item_id": "seed-vec", "stage": "draft", "old": 0.42, "new": 0.30, "visits": 4}]}, 1),
        ("step_done", {"stage": "draft", "counts": True, "outcome": "compile_fail", "seconds": 22.0}, 1),
        ("kernel", {"version": 2, "stage": "draft", "author": "model", "file": "kernels/0002.py", "source": k2}, 2),
        ("verification", _verification(2, None, 1.25), 2),
        ("q_update", {"stage": "draft", "changes": [{"item_id": "ins-fuse", "stage": "draft", "old": 0.20, "new": 0.32, "visits": 2}]}, 2),
        ("accepted", {"version": 2, "by": "loop", "reason": "first feasible kernel"}, 2),
        ("stage_changed", {"from": "draft", "to": "refine", "reason": "feasible kernel found"}, 2),
    ]
    return [{"kind": k, "data": d, "step": s, "ts": 1700000000.0 + i} for i, (k, d, s) in enumerate(ev)]


class StaticSession:
    """A session frozen after two draft steps: the attributes the app reads, and a fixed events.jsonl."""

    def __init__(self, path: Path, manual: bool = False) -> None:
        from memory.items import MemoryItem
        from memory.retrieval import Retrieved

        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        events = snapshot_events()
        if manual:
            events[0]["data"]["manual"] = True
        (self.path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
        self.id, self.backend, self.stage, self.manual = "snapshot", "cpu", "refine", manual
        self.task = type("Task", (), {"name": "relu"})()
        self.current_source = kernel("feasible", 1.25, tag="clamp")
        self.kernel_path = self.path / "current_kernel.py"
        self.kernel_path.write_text(self.current_source)
        self.pending, self.best, self.history, self.busy = None, None, [], False
        self.tokens, self.cost = 1200, 0.0012
        self.retrieved = [
            Retrieved(MemoryItem.from_dict({**{k: v for k, v in i.items() if k not in ("similarity", "score")}, "backends": ["cpu"], "category": "elementwise"}),
                      i["similarity"], 0.0, 0.0, i["score"])
            for i in SNAPSHOT_ITEMS
        ]
