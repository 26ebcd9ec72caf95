"""The bank's running tally: near-duplicate trajectory groups and the value sums behind
`MemoryStore.neutral_values`.

Kept current operation by operation (`bank` applies every put, remove and credit to it), so adding
a trajectory costs no scan of the bank; built on first use, so loading a bank does not pay for it.
"""

from __future__ import annotations

from collections.abc import Iterable

from memory.items import MemoryItem


class Tally:
    """Near-duplicate groups and the value sums behind `neutral_values`, kept current by `Bank.apply` so
    a new trajectory costs no scan of the bank (built on first use: loading a bank does not pay for it)."""

    def __init__(self, items: Iterable[MemoryItem] = ()) -> None:
        # Ids per group in the order they joined the bank (a dict as an ordered set; `replace` keeps an
        # item's place): a set of ids would iterate in an order set by the ids' hashes, and
        # `add_trajectory` breaks ties (merge target, which items the cap drops) by this order.
        self.groups: dict[tuple[str, str, str], dict[str, None]] = {}
        self.sums = {"draft": [0.0, 0], "refine": [0.0, 0]}
        for item in items:
            self.add(item)

    def add(self, item: MemoryItem) -> None:
        key = item.duplicate_key()
        if key is not None:
            self.groups.setdefault(key, {})[item.id] = None
        self.count(item, 1)

    def remove(self, item: MemoryItem) -> None:
        key = item.duplicate_key()
        if key is not None and key in self.groups:
            self.groups[key].pop(item.id, None)
            if not self.groups[key]:
                del self.groups[key]
        self.count(item, -1)

    def replace(self, old: MemoryItem, new: MemoryItem) -> None:
        """`old` became `new` (same id): its values change, its place in its group stays."""
        if old.duplicate_key() != new.duplicate_key():
            self.remove(old)
            self.add(new)
            return
        self.count(old, -1)
        self.count(new, 1)

    def count(self, item: MemoryItem, sign: int) -> None:
        """Add (sign 1) or take away (-1) the item's visited values in the sums behind the mean."""
        for stage, q, n in (("draft", item.q1, item.visits1), ("refine", item.q2, item.visits2)):
            if n:
                self.sums[stage][0] += sign * q
                self.sums[stage][1] += sign

    def mean(self, stage: str, default: float) -> float:
        total, n = self.sums[stage]
        return total / n if n > 0 else default
