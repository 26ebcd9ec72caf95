"""Speed of the memory bank at 100,000 items: load, top-k retrieval, one value update.

Targets (issue 3): retrieval <= 50 ms, load <= 2 s, one value update <= 5 ms. "Load" is opening a
bank file until items are usable; the BM25 index is built lazily on the first retrieval, which is
reported separately. Value updates are durable (journal append with fsync); the amortised cost of
the occasional compaction is reported too.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from memory import MemoryItem, MemoryStore, RetrievalPolicy, TaskSignature
from memory.simulation import CATEGORIES, FILLER

BACKENDS = ("cpu", "cuda", "triton")


def make_items(n: int, seed: int = 0) -> list[MemoryItem]:
    rng = random.Random(seed)
    vocab = FILLER + [f"term{i}" for i in range(3000)]
    return [
        MemoryItem(
            id=f"bench-{i}",
            kind="trajectory",
            backends=[rng.choice(BACKENDS)],
            category=(cat := rng.choice(CATEGORIES)),
            title=f"{cat} attempt {i}",
            text=" ".join(rng.choices(vocab, k=40)),
            tags=[cat, "draft"],
        )
        for i in range(n)
    ]


def report(name: str, seconds: float, target: float) -> None:
    verdict = "ok" if seconds <= target else "OVER"
    print(f"{name:<40} {seconds * 1000:10.2f} ms   target {target * 1000:8.1f} ms   ratio {seconds / target:5.2f}  {verdict}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--items", type=int, default=100_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.json"
        t = time.perf_counter()
        store = MemoryStore(path, seed=False)
        store.add_many(make_items(args.items))
        store.flush()
        store.close()
        print(f"built a {args.items}-item bank in {time.perf_counter() - t:.1f} s ({path.stat().st_size / 1e6:.1f} MB)")

        t = time.perf_counter()
        store = MemoryStore(path, seed=False)
        report("load bank (open until usable)", time.perf_counter() - t, 2.0)

        policy = RetrievalPolicy(mode="value", k=5, seed=0)
        sigs = [TaskSignature(task=f"{c}_task", category=c, backend=b, text=f"{c} kernel tile loop")
                for c in CATEGORIES for b in BACKENDS]
        t = time.perf_counter()
        policy.retrieve(store, sigs[0], "draft")
        print(f"{'first retrieval (builds BM25 index)':<40} {(time.perf_counter() - t) * 1000:10.2f} ms   (one-off)")
        times = []
        for i in range(60):
            t = time.perf_counter()
            hits = policy.retrieve(store, sigs[i % len(sigs)], "draft")
            times.append(time.perf_counter() - t)
        report("top-5 retrieval, median of 60", statistics.median(times), 0.050)
        report("top-5 retrieval, worst of 60", max(times), 0.050)

        ids = [h.item.id for h in hits]
        times = []
        for _ in range(200):
            t = time.perf_counter()
            store.credit(ids, "draft", 1.0)
            times.append(time.perf_counter() - t)
        report("value update (5 items), median of 200", statistics.median(times), 0.005)
        report("value update, p95", sorted(times)[int(0.95 * len(times))], 0.005)
        t = time.perf_counter()
        store.flush()
        compaction = time.perf_counter() - t
        journal_per_compaction = max(store.compact_min_bytes, store.stats()["snapshot_bytes"] // 2) // 120
        print(f"{'compaction (whole bank rewrite)':<40} {compaction * 1000:10.2f} ms   "
              f"(about every {journal_per_compaction} updates: amortised "
              f"{compaction / journal_per_compaction * 1000:.3f} ms per update)")

        store.add(make_items(1, seed=99)[0].__class__(**{**make_items(1, seed=99)[0].__dict__, "id": "new-1"}))
        t = time.perf_counter()
        policy.retrieve(store, sigs[1], "draft")
        report("retrieval after adding one item", time.perf_counter() - t, 0.050)


if __name__ == "__main__":
    main()
