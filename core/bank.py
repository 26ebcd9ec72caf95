"""The memory bank as the app sees it, through core: the store, its damage error and the retrieval terms.

The app (evokernel_tui) reaches the memory bank only through core (docs/ARCHITECTURE.md; an import-linter
contract in pyproject.toml holds it). The app imports this module only where it opens a bank, as it imported
`memory` before, so a session without memory pays nothing for it.
"""

from __future__ import annotations

from memory import MemoryCorrupt, MemoryStore, RetrievalPolicy, TaskSignature

__all__ = ["MemoryCorrupt", "MemoryStore", "RetrievalPolicy", "TaskSignature"]
