"""The shipped seed bank: cold-start knowledge for the CPU C++, CUDA and Triton backends."""

from __future__ import annotations

from memory.items import INITIAL_Q1, INITIAL_Q2, MemoryItem
from memory.seeds.bank import SEEDS


def seed_items() -> list[MemoryItem]:
    """Fresh copies of every seed item, with neutral values and stable ids."""
    return [
        MemoryItem(
            id=f"seed-{slug}",
            kind="seed",
            backends=list(backends),
            category=category,
            title=title,
            text=text.strip(),
            tags=list(tags),
            q1=INITIAL_Q1,
            q2=INITIAL_Q2,
            created=0.0,
            updated=0.0,
            provenance="seed",
        )
        for slug, backends, category, title, tags, text in SEEDS
    ]
