"""Lexical recall: a BM25 index (bm25s) over item text, kept in memory and rebuilt lazily.

Building BM25 over 100,000 items takes seconds, while the loop adds one trajectory per attempt.
So items added since the last build live in a small second index ("delta") that is scored next to
the main one; the main index is rebuilt when the delta or the removals grow past a fraction of the
bank. Scores of the delta use its own statistics, an approximation that lasts until the next build.
Backend masks (which items apply to a backend) are computed once per build as numpy arrays, so a
query never walks the bank in Python. For large banks the main index is also saved next to the
bank (``memory.json.bm25/``) under a digest of the exact ids and texts, so the next process that
opens the same bank loads it in a fraction of a second instead of re-tokenising everything.
"""

from __future__ import annotations

import hashlib
import logging
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import bm25s
import numpy as np
import orjson

from memory.storage import gc_paused

_TOKEN = re.compile(r"[a-z][a-z0-9]*|[0-9]+(?:x[0-9]+)*")
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "in",
        "into",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "with",
        "when",
        "you",
        "your",
        "use",
        "using",
        "not",
        "no",
        "do",
        "does",
        "can",
    ]
)


def tokenize(text: str) -> list[str]:
    """Lowercase words and numbers; snake_case and CamelCase are split so `softmax_rows` finds `softmax`."""
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", text).replace("_", " ").lower()
    return [t for t in _TOKEN.findall(spaced) if t not in _STOP]


def _text(doc: Any) -> str:
    return doc if isinstance(doc, str) else doc.lexical_text()


def _backends(doc: Any) -> tuple[str, ...]:
    return () if isinstance(doc, str) else tuple(doc.backends)


log = logging.getLogger(__name__)

#: Banks smaller than this build their index in well under a second; they are not cached on disk.
CACHE_MIN_ITEMS = 5000
_KEYS_FILE = "items.json"


def text_digest(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def _load_cached(cache_dir: Path) -> tuple[bm25s.BM25, list[str], list[str]] | None:
    """(index, ids, text digests) saved by `_save_cached`, or None (the cache is disposable)."""
    try:
        keys = orjson.loads((cache_dir / _KEYS_FILE).read_bytes())
        ids, digests = list(keys["ids"]), list(keys["digests"])
        index = bm25s.BM25.load(str(cache_dir), show_progress=False)
        if len(ids) != len(digests) or index.scores["num_docs"] != len(ids):
            raise ValueError("ids and index disagree")
        return index, ids, digests
    except FileNotFoundError:
        return None
    except Exception as exc:  # a damaged or foreign cache only costs a rebuild
        log.debug("ignoring the BM25 cache in %s: %s", cache_dir, exc)
        return None


def _save_cached(cache_dir: Path, index: bm25s.BM25, ids: list[str], digests: list[str]) -> None:
    """Write the index to a temp folder, then swap it in, so readers never see half a cache."""
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{cache_dir.name}.", dir=cache_dir.parent))
        index.save(str(tmp), show_progress=False)
        (tmp / _KEYS_FILE).write_bytes(orjson.dumps({"ids": ids, "digests": digests}))
        old = cache_dir.with_name(f".{cache_dir.name}.old-{tmp.name}")
        if cache_dir.exists():
            cache_dir.rename(old)
        tmp.rename(cache_dir)
        shutil.rmtree(old, ignore_errors=True)
    except OSError as exc:
        log.debug("could not save the BM25 cache to %s: %s", cache_dir, exc)


def _build(docs: list[list[str]]) -> bm25s.BM25 | None:
    if not docs:
        return None
    index = bm25s.BM25()
    index.index(docs, show_progress=False)
    return index


def _score(index: bm25s.BM25 | None, query: list[str], size: int) -> np.ndarray:
    if index is None or size == 0:
        return np.zeros(size, dtype=np.float32)
    known = [t for t in query if t in index.vocab_dict]
    if not known:
        return np.zeros(size, dtype=np.float32)
    return np.asarray(index.get_scores(known), dtype=np.float32)


class LexicalIndex:
    """BM25 scores of every live item for a query; not thread-safe (the store serialises access)."""

    def __init__(
        self,
        rebuild_fraction: float = 0.02,
        min_rebuild: int = 256,
        cache_dir: Path | None = None,
        cache_min_items: int = CACHE_MIN_ITEMS,
    ) -> None:
        self.cache_dir = cache_dir
        self.cache_min_items = cache_min_items
        self.cache_hits = 0
        self.rebuild_fraction = rebuild_fraction
        self.min_rebuild = min_rebuild
        self._texts: dict[str, Any] = {}
        self._backends: dict[str, tuple[str, ...]] = {}
        self._masks: dict[str, np.ndarray] = {}
        self._any = np.zeros(0, dtype=bool)
        self._main: bm25s.BM25 | None = None
        self._main_ids: list[str] = []
        self._main_rows: dict[str, int] = {}
        self._dead = np.zeros(0, dtype=bool)
        self._dead_count = 0
        self._delta_ids: list[str] = []
        self._delta: bm25s.BM25 | None = None
        self._delta_stale = False
        self.builds = 0

    def __len__(self) -> int:
        return len(self._texts)

    def reset(self, texts: dict[str, Any]) -> None:
        """Replace everything (after a full reload); values are strings or objects with
        `lexical_text()`, turned into text only when the index is built, to keep loading fast."""
        self._texts = dict(texts)
        self._backends = {}
        self._main = None
        self._main_ids, self._main_rows = [], {}
        self._dead = np.zeros(0, dtype=bool)
        self._dead_count = 0
        self._delta_ids, self._delta, self._delta_stale = [], None, False

    def put(self, item_id: str, text: str, backends: tuple[str, ...] | list[str] = ()) -> None:
        """Add an item or change its text or backends (a value change never needs this)."""
        old = self._texts.get(item_id)
        if old is not None and _text(old) == text and self.backends_of(item_id) == tuple(backends):
            return
        self._kill(item_id)
        self._texts[item_id] = text
        self._backends[item_id] = tuple(backends)
        if self._main is not None:
            self._delta_ids.append(item_id)
            self._delta_stale = True

    def remove(self, item_id: str) -> None:
        self._backends.pop(item_id, None)
        if self._texts.pop(item_id, None) is not None:
            self._kill(item_id)

    def backends_of(self, item_id: str) -> tuple[str, ...]:
        found = self._backends.get(item_id)
        return found if found is not None else _backends(self._texts.get(item_id, ""))

    def _kill(self, item_id: str) -> None:
        row = self._main_rows.pop(item_id, None)
        if row is not None:
            self._dead[row] = True
            self._dead_count += 1
        if item_id in self._delta_ids:
            self._delta_ids.remove(item_id)
            self._delta_stale = True

    def _needs_rebuild(self) -> bool:
        if self._main is None:
            return bool(self._texts)
        pending = self._dead_count + len(self._delta_ids)
        return pending > max(self.min_rebuild, self.rebuild_fraction * len(self._texts))

    def build(self) -> None:
        """Rebuild the main index over all items now (otherwise done lazily on the next query).

        A large bank first tries the index saved on disk: items whose text is unchanged keep their
        saved rows, the others go to the delta, as if they had been added since that build.
        """
        ids = list(self._texts)
        texts = [_text(self._texts[i]) for i in ids]
        use_cache = self.cache_dir is not None and len(ids) >= self.cache_min_items
        with gc_paused():
            digests = [text_digest(t) for t in texts] if use_cache else []
            if use_cache and self._adopt_cached(ids, digests):
                self.cache_hits += 1
            else:
                self._set_main(ids, _build([tokenize(t) for t in texts]), delta=[])
                if use_cache and self._main is not None and self.cache_dir is not None:
                    _save_cached(self.cache_dir, self._main, ids, digests)
        self.builds += 1

    def _set_main(self, ids: list[str], index: bm25s.BM25 | None, delta: list[str]) -> None:
        self._main, self._main_ids = index, ids
        self._main_rows = {item_id: row for row, item_id in enumerate(ids)}
        self._dead = np.zeros(len(ids), dtype=bool)
        self._dead_count = 0
        self._delta_ids, self._delta, self._delta_stale = delta, None, bool(delta)
        self._build_masks()

    def _adopt_cached(self, ids: list[str], digests: list[str]) -> bool:
        """Use the saved index when few enough items changed since it was saved."""
        cached = _load_cached(self.cache_dir) if self.cache_dir is not None else None
        if cached is None:
            return False
        index, saved_ids, saved_digests = cached
        current = dict(zip(ids, digests, strict=True))
        live = [current.get(i) == d for i, d in zip(saved_ids, saved_digests, strict=True)]
        kept = {i for i, ok in zip(saved_ids, live, strict=True) if ok}
        delta = [i for i in ids if i not in kept]
        dead = len(saved_ids) - len(kept)
        if dead + len(delta) > max(self.min_rebuild, self.rebuild_fraction * len(ids)):
            return False
        self._set_main(saved_ids, index, delta)
        for row, ok in enumerate(live):
            if not ok:
                self._main_rows.pop(saved_ids[row], None)
                self._dead[row] = True
        self._dead_count = dead
        return True

    def _build_masks(self) -> None:
        """Per backend, which main rows apply to it: items of that backend or of none in particular."""
        rows: dict[str, list[int]] = {}
        generic: list[int] = []
        for row, item_id in enumerate(self._main_ids):
            backends = self.backends_of(item_id)
            if not backends:
                generic.append(row)
            for b in backends:
                rows.setdefault(b, []).append(row)
        self._any = np.zeros(len(self._main_ids), dtype=bool)
        self._any[generic] = True
        self._masks = {}
        for b, rs in rows.items():
            mask = self._any.copy()
            mask[rs] = True
            self._masks[b] = mask

    def backend_mask(self, backend: str) -> np.ndarray:
        """1.0 where an item applies to `backend`, aligned with the ids of the last `scores` call."""
        main = self._masks.get(backend, self._any).astype(np.float32)
        if not self._delta_ids:
            return main
        delta = [not (b := self.backends_of(i)) or backend in b for i in self._delta_ids]
        return np.concatenate([main, np.asarray(delta, dtype=np.float32)])

    def scores(self, query: str) -> tuple[list[str], np.ndarray]:
        """(ids, BM25 scores) over all live items; removed items score -1 so callers can drop them."""
        if self._needs_rebuild():
            self.build()
        if self._delta_stale:
            self._delta = _build([tokenize(_text(self._texts[i])) for i in self._delta_ids])
            self._delta_stale = False
        tokens = tokenize(query)
        main = _score(self._main, tokens, len(self._main_ids))
        if self._dead_count:
            main = np.where(self._dead, np.float32(-1.0), main)
        if not self._delta_ids:
            return self._main_ids, main
        delta = _score(self._delta, tokens, len(self._delta_ids))
        return self._main_ids + self._delta_ids, np.concatenate([main, delta])
