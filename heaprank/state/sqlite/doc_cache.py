"""Documents' stats read from a shared store before, kept while the store has not changed.

A rerank reads the stats (last use, use count) of every candidate; on SQLite that is one seek
per id, the largest part of what a rerank costs there beyond the memory backend. Reranks
between two feedbacks mostly see documents seen before (the same corpus, the same popular
memories), and only a commit changes a document's row. So the backend keeps the rows it read,
per namespace (``None`` for an id with no row), under a key it derives from its own version
of the store (for SQLite: its connection and ``PRAGMA data_version``, which changes with every
other connection's commit); a read under another key starts again from nothing. What this
process writes itself it drops by id (:meth:`DocCache.drop`), and whatever deletes documents
(forgetting a namespace, an import) clears it all (:meth:`DocCache.clear`).

Bounded in entries and in age: an entry is never older than :data:`MAX_AGE_S`, so a namespace
forgotten through another process leaves this one at its next read at the latest.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Hashable, Iterable, Sequence

import numpy as np

from ...model.evidence import DocStats

MAX_ENTRIES = 32_768
MAX_AGE_S = 600.0
#: What an id without a row reads as: never used
NO_ROW = (math.nan, 0.0)


class DocCache:
    """Per-namespace ``id -> (last used, use count)`` (:data:`NO_ROW` for no row), valid under
    one key. Not thread-safe: its backend calls it under its own lock."""

    __slots__ = ("_key", "_rows", "_size", "_born")

    def __init__(self) -> None:
        self._key: Hashable = None
        self._rows: dict[str, dict[str, tuple[float, float]]] = {}
        self._size = 0
        self._born = 0.0

    def __len__(self) -> int:
        return self._size

    def namespaces(self) -> list[str]:
        """The namespaces with an entry (for tests and audits)."""
        return sorted(ns for ns, rows in self._rows.items() if rows)

    def clear(self) -> None:
        self._rows, self._size = {}, 0

    def get(self, key: Hashable, namespace: str, ids: Sequence[str]) -> DocStats | None:
        """The stats of ``ids`` if every one is kept under ``key``, else None (the caller reads
        them all and :meth:`put` s them)."""
        if key != self._key or time.monotonic() - self._born > MAX_AGE_S:
            self.clear()
            self._key, self._born = key, time.monotonic()
            return None
        rows = self._rows.get(namespace)
        if rows is None or not all(map(rows.__contains__, ids)):
            return None
        # (last used, use count) of each id, flat: one C-level pass, no list of pairs
        flat = np.fromiter(itertools.chain.from_iterable(map(rows.__getitem__, ids)),
                           dtype=np.float64, count=2 * len(ids))
        return DocStats(flat[0::2].copy(), flat[1::2].copy())

    def put(self, key: Hashable, namespace: str, ids: Sequence[str], stats: DocStats) -> None:
        """Keep what a read under ``key`` found for ``ids``."""
        if key != self._key:
            return  # read under another key than the cache holds: not kept
        if self._size + len(ids) > MAX_ENTRIES:
            self.clear()
        rows = self._rows.setdefault(namespace, {})
        before = len(rows)
        rows.update(zip(ids, zip(stats.last_used.tolist(), stats.use_count.tolist())))
        self._size += len(rows) - before

    def drop(self, namespace: str, ids: Iterable[str]) -> None:
        """Forget these ids of ``namespace`` (their rows are being written)."""
        rows = self._rows.get(namespace)
        if rows:
            for d in ids:
                if rows.pop(d, None) is not None:
                    self._size -= 1
