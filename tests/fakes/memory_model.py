"""An OpenAI-compatible model on 127.0.0.1 whose success depends on the memories it is shown.

`MemoryAwareModel` serves `/v1/chat/completions` (streamed or not), so `evokernel bench --model
openai/<name> --api-base URL` drives it through the real litellm path. Each kernel request is
judged by its prompt: when the prompt shows one of the `helpful` memories (a `### <title>` heading,
as `core.prompting.render_memories` writes it) the reply is a good kernel with probability
`p_good`, otherwise with probability `p_base`; the rest fail. Kernels carry their verdict for
`tests.fakes.verdicts.fake_verify`: a good draft is feasible at `draft_ms`; a good refinement is
feasible at `gain` times the latency of the prompt's kernel to refine. Lesson and insight
requests get plain prose that names no memory.

The draw for a task's n-th kernel request depends only on (seed, task, n), so two retrieval modes
run against the same luck and differ only in what they show. Every kernel request is logged in
`requests` (task, stage, which helpful titles it showed, whether the reply was good).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fakes.verdicts import reply

#: seed items that help on every CPU task in the default world: similar enough to be in value
#: retrieval's pool (K = 25) for the built-in CPU tasks, never in similarity's top 5
HELPFUL_TITLES = ("Loop unrolling and instruction-level parallelism", "CPU build flags for load_inline")
HELPFUL_IDS = ("seed-opt-loop-unrolling", "seed-cpu-build-flags")

_TASK = re.compile(r"^# Task: (?:make )?(\S+)", re.M)
_BEST = re.compile(r"## Kernel to refine.*?# verdict: feasible ([\d.]+)", re.S)


@dataclass
class Request:
    task: str
    stage: str
    n: int
    shown: list[str]
    good: bool


@dataclass
class MemoryAwareModel:
    helpful: tuple[str, ...] = HELPFUL_TITLES
    p_good: float = 0.8
    p_base: float = 0.15
    seed: int = 0
    draft_ms: float = 2.0
    gain: float = 0.8
    requests: list[Request] = field(default_factory=list)
    calls: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> MemoryAwareModel:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    # ----------------------------------------------------------------- replies

    def answer(self, body: dict[str, Any]) -> str:
        text = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
        if "failed with the outcome" in text and "No code." in text:
            return ("The kernel did not pass the checks because its indexing and loop bounds were not verified; "
                    "next time check every index against the tensor shape before replying.")
        if "faster after a refinement" in text:
            return ("Keep partial results in registers\nAccumulating in local variables and writing each output "
                    "once removes redundant memory traffic from the inner loop of the kernel.")
        m = _TASK.search(text)
        task = m.group(1) if m else "?"
        stage = "refine" if "## Kernel to refine" in text else "draft"
        shown = [t for t in self.helpful if f"### {t}\n" in text]
        with self._lock:
            n = self.calls.get(task, 0)
            self.calls[task] = n + 1
        digest = hashlib.sha256(f"{self.seed}/{task}/{n}".encode()).digest()
        good = random.Random(int.from_bytes(digest[:8], "big")).random() < (self.p_good if shown else self.p_base)
        with self._lock:
            self.requests.append(Request(task, stage, n, shown, good))
        tag = f"{task} request {n}"
        if not good:
            return reply("incorrect", tag=tag)
        if stage == "draft":
            return reply("feasible", self.draft_ms, tag=tag)
        best = _BEST.search(text)
        base = float(best.group(1)) if best else self.draft_ms
        return reply("feasible", round(base * self.gain, 6), tag=tag)


def _handler(model: MemoryAwareModel):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            body = json.loads(self.rfile.read(length) or b"{}")
            text = model.answer(body)
            name = body.get("model", "memory-aware")
            if not body.get("stream"):
                self._send(200, "application/json", json.dumps(_completion(name, text)).encode())
                return
            events = [_chunk(name, {"role": "assistant", "content": text}, None), _chunk(name, {}, "stop"),
                      {**_chunk(name, {}, None), "choices": [],
                       "usage": {"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150}}]
            data = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"
            self._send(200, "text/event-stream", data)

        def _send(self, code: int, kind: str, data: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()

    return Handler


def _chunk(model: str, delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    return {"id": "chatcmpl-memory", "object": "chat.completion.chunk", "created": 0, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _completion(model: str, text: str) -> dict[str, Any]:
    return {"id": "chatcmpl-memory", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150}}
