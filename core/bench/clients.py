"""The model side of a bench: `ModelSource` gives each task its model (one litellm config, or canned
`scripted:` replies per task) and `BoundedClient` caps the calls in flight across concurrent tasks.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from core.bench.records import BenchError
from core.llm import SCRIPTED_PREFIX, ModelConfig, ScriptedModel, make_client

if TYPE_CHECKING:
    from core.llm import Completion, Messages, ModelClient, TokenSink


class BoundedClient:
    """A model client whose calls wait on a shared semaphore: many tasks, at most N calls in flight."""

    def __init__(self, client: ModelClient, slots: threading.Semaphore):
        self.client, self.slots = client, slots
        self.name = getattr(client, "name", type(client).__name__)

    @property
    def inner(self) -> ModelClient:
        """The wrapped client (sessions ask it what kind of model they talk to)."""
        return self.client

    def complete(self, messages: Messages, on_token: TokenSink | None = None) -> Completion:
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
        # a config or a ScriptedModel, never None: make_client gives a client back
        return BoundedClient(cast("ModelClient", make_client(self.for_task(task, position))), self.slots)
