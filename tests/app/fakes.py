"""A stand-in with the Session contract's attributes and methods, for layout and control tests.

It records every call, emits contract-shaped events, and can be made to block (to test that the UI
stays live and refuses a second call) via `gate_event`.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verifier.result import GATE_ORDER

SEED = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
'''

REFINED = SEED.replace("torch.relu(x)", "x.clamp_min(0)")


@dataclass
class FakeEvent:
    kind: str
    data: dict[str, Any]
    step: int
    ts: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "data": self.data, "step": self.step, "ts": self.ts}


@dataclass
class FakeItem:
    id: str
    kind: str
    title: str
    text: str
    q1: float = 0.0
    q2: float = 0.0
    visits1: int = 0
    visits2: int = 0


@dataclass
class FakeRetrieved:
    item: FakeItem
    similarity: float
    value: float
    exploration: float
    score: float


def verification(step_ms: float | None, fail: str | None = None) -> dict[str, Any]:
    gates = []
    for name in GATE_ORDER:
        if fail and GATE_ORDER.index(name) > GATE_ORDER.index(fail):
            gates.append({"name": name, "status": "skip", "seconds": 0.0, "reason": "", "detail": {}})
        elif name == fail:
            detail = {"diagnostics": ["kernel.cpp:12: error: expected ';'"]} if fail == "compile" else {}
            gates.append({"name": name, "status": "fail", "seconds": 1.5, "reason": "build failed", "detail": detail})
        else:
            gates.append({"name": name, "status": "pass", "seconds": 0.25, "reason": "", "detail": {}})
    feasible = fail is None
    return {
        "backend": "cpu", "gates": gates, "latency_ms": step_ms if feasible else None, "reference_ms": 2.0,
        "compiled_ms": None, "feasible": feasible, "outcome": "feasible" if feasible else "compile_fail",
        "speedup": (2.0 / step_ms) if feasible and step_ms else None,
    }


@dataclass
class FakeSession:
    path: Path
    manual: bool = False
    stage: str = "draft"
    backend: str = "cpu"
    busy: bool = False
    tokens: int = 0
    cost: float | None = None
    pending: Any = None
    best: Any = None
    history: list = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    step_delay: float = 0.0
    gate_event: threading.Event | None = None

    def __post_init__(self) -> None:
        self.task = type("Task", (), {"name": "relu", "description": "ReLU"})()
        self.id = "fake"
        self.kernel_path = self.path / "kernel.py"
        self.path.mkdir(parents=True, exist_ok=True)
        self.current_source = SEED
        self.kernel_path.write_text(SEED)
        self._step = 0
        self.retrieved = [
            FakeRetrieved(FakeItem("m1", "seed", "Vectorise the inner loop", "Use at::vec::Vectorized.", 0.4, 0.1, 3, 1), 0.8, 0.4, 0.1, 0.72),
            FakeRetrieved(FakeItem("m2", "insight", "Fuse elementwise ops", "One pass over memory.", 0.2, 0.3, 1, 2), 0.6, 0.2, 0.2, 0.51),
        ]

    def _ev(self, kind: str, **data: Any) -> FakeEvent:
        return FakeEvent(kind, data, self._step, time.time())

    def _verify(self, on_event, ms: float | None = 1.0, fail: str | None = None) -> list[FakeEvent]:
        events = []
        for name in GATE_ORDER:
            events.append(self._ev("gate", name=name, status="running"))
            if on_event:
                on_event(events[-1])
            if self.gate_event is not None and name == "compile":
                self.gate_event.wait(timeout=20)
        events.append(self._ev("verification", **verification(ms, fail)))
        return events

    def step(self, on_event=None, on_token=None) -> list[FakeEvent]:
        if self.busy:
            raise RuntimeError("a step is already running")
        self.busy = True
        try:
            self.calls.append("step")
            self._step += 1
            if on_token:
                for chunk in ("```python\n", "class ModelNew", "(nn.Module): ...\n```"):
                    on_token(chunk)
            time.sleep(self.step_delay)
            self.tokens += 100
            events = [self._ev("model_reply", text="ok", tokens=100)]
            if self.stage == "refine":
                self.pending = REFINED
                events += self._verify(on_event, 0.8)
                events.append(self._ev("pending_refinement", source=REFINED))
            else:
                self.current_source = SEED + f"\n# step {self._step}\n"
                self.kernel_path.write_text(self.current_source)
                events.append(self._ev("kernel", source=self.current_source, author="model"))
                events += self._verify(on_event, 1.0 + self._step * 0.1)
                self.retrieved[0].item.q1 += 0.1
                events.append(self._ev("q_update", changes=[{"item_id": "m1", "stage": "draft", "old": self.retrieved[0].item.q1 - 0.1, "new": self.retrieved[0].item.q1, "visits": 4}]))
            return events
        finally:
            self.busy = False

    def submit_human_edit(self, source: str) -> list[FakeEvent]:
        self.calls.append("human_edit")
        self._step += 1
        self.current_source = source
        self.kernel_path.write_text(source)
        return [self._ev("human_edit", source=source)] + self._verify(None, 0.9)

    def accept_pending(self) -> list[FakeEvent]:
        self.calls.append("accept")
        self.current_source, self.pending = self.pending, None
        self.kernel_path.write_text(self.current_source)
        return [self._ev("accepted", source=self.current_source)]

    def reject_pending(self) -> list[FakeEvent]:
        self.calls.append("reject")
        self.pending = None
        return [self._ev("rejected")]

    def reverify(self) -> list[FakeEvent]:
        self.calls.append("reverify")
        return self._verify(None, 1.0)

    def set_stage(self, stage: str) -> list[FakeEvent]:
        self.calls.append(f"stage:{stage}")
        self.stage = stage
        return [self._ev("stage_changed", stage=stage)]
