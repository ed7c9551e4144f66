"""A bounded memory of recent entries, oldest dropped first: the rankings ``why_not`` explains
and the answers ``feedback`` gives again for a repeated ``feedback_id``.

The state keeps an impression's shown ids, not the ranking of every candidate, so ``why_not``
for a candidate that was not shown needs the :class:`~heaprank.Ranking` itself: each server
keeps its most recent ones. It is touched from the server's event loop only.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Recent(Generic[K, V]):
    """The last ``size`` entries put, each found by its key (a hit makes it recent again)."""

    def __init__(self, size: int) -> None:
        if size < 0:
            raise ValueError(f"size: must be >= 0, got {size}")
        self.size = size
        self._entries: OrderedDict[K, V] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> V | None:
        value = self._entries.get(key)
        if value is not None:
            self._entries.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        if self.size == 0:
            return
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def drop(self, matches: Callable[[K, V], bool]) -> None:
        """Forget every entry ``matches`` is true of (a forgotten namespace's)."""
        for key in [k for k, v in self._entries.items() if matches(k, v)]:
            del self._entries[key]
