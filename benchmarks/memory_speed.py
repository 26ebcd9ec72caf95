"""Speed of the memory bank at 100,000 items: load, top-k retrieval, one value update.

Targets (issue 3): retrieval <= 50 ms, load <= 2 s, one value update <= 5 ms. "Load" is opening a
bank file until items are usable. The BM25 index is built on the first retrieval after a load and
saved next to the bank, so that first retrieval is reported twice: cold (no saved index) and warm
(the saved index is reused). Value updates are durable (journal append with fsync); the amortised
cost of the occasional compaction is reported too. Every measurement is repeated `--repeats` times
in fresh stores and the median is reported, with the load average, since the machine may be shared.
Writes benchmarks/results/memory_speed.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from memory import MemoryItem, MemoryStore, RetrievalPolicy, TaskSignature

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, run as a script
from benchmarks.memory_simulation import CATEGORIES, FILLER  # noqa: E402

BACKENDS = ("cpu", "cuda", "triton")
RESULTS = Path(__file__).parent / "results"


def make_items(n: int, seed: int = 0, prefix: str = "bench") -> list[MemoryItem]:
    rng = random.Random(seed)
    vocab = FILLER + [f"term{i}" for i in range(3000)]
    return [
        MemoryItem(
            id=f"{prefix}-{i}",
            kind="trajectory",
            backends=[rng.choice(BACKENDS)],
            category=(cat := rng.choice(CATEGORIES)),
            title=f"{cat} attempt {i}",
            text=" ".join(rng.choices(vocab, k=40)),
            tags=[cat, "draft"],
        )
        for i in range(n)
    ]


def timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def one_round(path: Path, sigs: list[TaskSignature], cold: bool) -> dict[str, float]:
    """One fresh store on the bank: load, first retrieval, 60 retrievals, 200 updates, one added item."""
    if cold:
        shutil.rmtree(path.with_name(path.name + ".bm25"), ignore_errors=True)
    out: dict[str, float] = {}
    t = time.perf_counter()
    store = MemoryStore(path, seed=False)
    out["load"] = time.perf_counter() - t
    policy = RetrievalPolicy(mode="value", k=5, seed=0)
    out["first retrieval (cold)" if cold else "first retrieval (saved index)"] = timed(
        lambda: policy.retrieve(store, sigs[0], "draft")
    )
    times = [timed(lambda s=s: policy.retrieve(store, s, "draft")) for s in sigs * 3]
    out["retrieval median"] = statistics.median(times)
    out["retrieval worst"] = max(times)
    ids = [h.item.id for h in policy.retrieve(store, sigs[0], "draft")]
    updates = sorted(timed(lambda: store.credit(ids, "draft", 1.0)) for _ in range(200))
    out["update median"] = statistics.median(updates)
    out["update p95"] = updates[int(0.95 * len(updates))]
    store.add(make_items(1, seed=99, prefix=f"new{time.time_ns()}")[0])
    out["retrieval after adding one item"] = timed(lambda: policy.retrieve(store, sigs[1], "draft"))
    store.close()
    return out


TARGETS = {
    "load": 2.0,
    "retrieval median": 0.050,
    "retrieval worst": 0.050,
    "retrieval after adding one item": 0.050,
    "update median": 0.005,
    "update p95": 0.005,
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--items", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    sigs = [
        TaskSignature(task=f"{c}_task", category=c, backend=b, text=f"{c} kernel tile loop")
        for c in CATEGORIES
        for b in BACKENDS
    ]
    rounds: list[dict[str, float]] = []
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.json"
        store = MemoryStore(path, seed=False)
        build = timed(lambda: (store.add_many(make_items(args.items)), store.flush()))
        compaction = timed(store.flush)
        per_compaction = max(store.compact_min_bytes, store.stats()["snapshot_bytes"] // 2) // 120
        store.close()
        size_mb = path.stat().st_size / 1e6
        for _ in range(args.repeats):
            rounds.append(one_round(path, sigs, cold=True))
            rounds.append(one_round(path, sigs, cold=False))
    load_after = os.getloadavg()

    names = list(dict.fromkeys(k for r in rounds for k in r))
    lines = [
        f"# Memory bank speed at {args.items:,} items",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; shared with",
        f"other builds: load average {load_before[0]:.2f} before, {load_after[0]:.2f} after. "
        f"Bank file {size_mb:.1f} MB, built in {build:.1f} s.",
        f"Each row is the median over {args.repeats * 2} fresh stores (cold first retrieval: over {args.repeats};",
        "its index is then saved and the other stores reuse it). Reproduce: `python benchmarks/memory_speed.py`.",
        "",
        "| measurement | median ms | all runs (ms) | target ms | verdict |",
        "|---|---|---|---|---|",
    ]
    for name in names:
        xs = [r[name] for r in rounds if name in r]
        med = statistics.median(xs)
        target = TARGETS.get(name)
        verdict = ("ok" if med <= target else "OVER") if target else "one-off"
        runs = ", ".join(f"{x * 1000:.1f}" for x in xs)
        target_cell = f"{target * 1000:.0f}" if target else "-"
        lines.append(f"| {name} | {med * 1000:.1f} | {runs} | {target_cell} | {verdict} |")
    lines += [
        "",
        f"Compaction (whole-bank snapshot rewrite, fsynced): {compaction * 1000:.0f} ms, about every "
        f"{per_compaction} updates, i.e. {compaction / per_compaction * 1000:.3f} ms per update amortised.",
        "'retrieval worst' is the slowest of 36 queries over 4 categories x 3 backends right after a load.",
        "",
    ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "memory_speed.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
