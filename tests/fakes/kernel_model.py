"""An OpenAI-compatible model on 127.0.0.1 that replies to each task with a kernel written for it.

`KernelModel(kernels)` serves `/v1/chat/completions` (streamed or not, through `tests.fakes.memory_model`'s
handler), so `evokernel bench --model openai/<name> --api-base URL` drives it through the real litellm path
with no network. A kernel request (a prompt whose first line is `# Task: NAME ...` or `# Task: make NAME
faster ...`) gets `kernels[NAME]` in a fenced python block; a task it has no kernel for gets a reply with no
code (the loop records that as a failed step, as it would a model's); lesson and insight requests get plain
prose. Every request is counted per task (`calls`), so a run can check the model saw every task once.

`scripted_replies(kernels)` gives the same replies as a `scripted:` file's content, for a machine where
litellm is not installed (the bench then never opens a socket; the verification it measures is the same).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any

from tests.fakes.memory_model import _handler

_TASK = re.compile(r"^# Task: (?:make )?(\S+)", re.M)


def kernel_reply(source: str) -> str:
    """A model's reply carrying `source` as its one kernel."""
    return f"A CUDA kernel for this task.\n\n```python\n{source.rstrip()}\n```\n"


def scripted_replies(kernels: dict[str, str], per_task: int = 1) -> dict[str, Any]:
    """The `scripted:` file content that replies to each task with its kernel (`per_task` times)."""
    return {"tasks": {name: [kernel_reply(src)] * per_task for name, src in kernels.items()}}


@dataclass
class KernelModel:
    kernels: dict[str, str]
    calls: dict[str, int] = field(default_factory=dict)
    other: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> KernelModel:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def answer(self, body: dict[str, Any]) -> str:
        text = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
        m = _TASK.search(text)
        if m is None:  # a lesson or an insight: prose naming no memory
            with self._lock:
                self.other += 1
            return ("Check every index against the tensor's shape and keep each thread's loads coalesced; "
                    "measure before and after each change.")
        task = m.group(1)
        with self._lock:
            self.calls[task] = self.calls.get(task, 0) + 1
        source = self.kernels.get(task)
        if source is None:
            return f"I have no kernel for {task}."
        return kernel_reply(source)
