"""A bounded map that forgets its least recently used entries: the dupefilter's
fingerprints, the robots rules cache, the hosts a cluster worker is connected to and
the links the ledger of discovered URLs has just recorded each keep one."""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class LRU(Generic[K, V]):
    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"an LRU holds at least 1 entry, not {capacity}")
        self.capacity = capacity
        self.entries: OrderedDict[K, V] = OrderedDict()

    def __contains__(self, key: object) -> bool:
        """Whether ``key`` is held; it is not made more recent by being asked."""
        return key in self.entries

    def __len__(self) -> int:
        return len(self.entries)

    def touch(self, key: K) -> bool:
        """Whether ``key`` is held, which makes it the most recent."""
        if key in self.entries:
            self.entries.move_to_end(key)
            return True
        return False

    def get(self, key: K) -> V | None:
        """``key``'s value (now the most recent), or None."""
        if key in self.entries:
            self.entries.move_to_end(key)
            return self.entries[key]
        return None

    def put(self, key: K, value: V) -> int:
        """Hold ``key`` as the most recent; how many of the least recent were forgotten."""
        self.entries[key] = value
        self.entries.move_to_end(key)
        evicted = 0
        while len(self.entries) > self.capacity:
            self.entries.popitem(last=False)
            evicted += 1
        return evicted
