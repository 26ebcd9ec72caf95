"""Memory bank: items, store, value-driven retrieval and value updates. Imports neither verifier nor app."""

from memory.items import KINDS, STAGES, MemoryItem, TaskSignature, ValueChange
from memory.retrieval import RetrievalPolicy, Retrieved
from memory.schema import SCHEMA_VERSION, MemoryCorrupt
from memory.store import ENV_VAR, MemoryStore, default_path

__all__ = [
    "ENV_VAR",
    "KINDS",
    "SCHEMA_VERSION",
    "STAGES",
    "MemoryCorrupt",
    "MemoryItem",
    "MemoryStore",
    "RetrievalPolicy",
    "Retrieved",
    "TaskSignature",
    "ValueChange",
    "default_path",
]
