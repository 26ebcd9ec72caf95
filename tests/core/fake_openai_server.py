"""A tiny OpenAI-compatible chat server on 127.0.0.1 for testing the real litellm path offline.

Behaviours are queued per request: ("reply", text), ("status", code), ("hang", seconds).
When the queue is empty the default behaviour is used.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeOpenAI:
    def __init__(self, default: tuple[str, Any] = ("reply", "hello")):
        self.queue: list[tuple[str, Any]] = []
        self.default = default
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        handler = _make_handler(self)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def push(self, *behaviours: tuple[str, Any]) -> None:
        with self._lock:
            self.queue.extend(behaviours)

    def next_behaviour(self) -> tuple[str, Any]:
        with self._lock:
            return self.queue.pop(0) if self.queue else self.default

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self.server.shutdown()
        self.server.server_close()


def _make_handler(fake: FakeOpenAI):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            body = json.loads(self.rfile.read(length) or b"{}")
            fake.requests.append(body)
            kind, arg = fake.next_behaviour()
            if kind == "hang":
                fake._stop.wait(float(arg))
                return
            if kind == "status":
                self._send_json(int(arg), {"error": {"message": f"fake status {arg}", "type": "server_error", "code": arg}})
                return
            if body.get("stream"):
                self._stream(str(arg), body)
            else:
                self._send_json(200, _completion(str(arg), body))

        def _send_json(self, code: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if code == 429:
                self.send_header("Retry-After", "0")
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, text: str, body: dict[str, Any]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            model = body.get("model", "test-model")
            pieces = [text[i : i + 7] for i in range(0, len(text), 7)] or [""]
            for i, piece in enumerate(pieces):
                delta = {"content": piece}
                if i == 0:
                    delta["role"] = "assistant"
                self._event(_chunk(model, delta, None))
            self._event(_chunk(model, {}, "stop"))
            usage = {"prompt_tokens": 11, "completion_tokens": len(pieces), "total_tokens": 11 + len(pieces)}
            self._event({**_chunk(model, {}, None), "choices": [], "usage": usage})
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

        def _event(self, payload: dict[str, Any]) -> None:
            self.wfile.write(b"data: " + json.dumps(payload).encode() + b"\n\n")
            self.wfile.flush()
            time.sleep(0.001)

    return Handler


def _chunk(model: str, delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _completion(text: str, body: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "test-model"),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14},
    }
