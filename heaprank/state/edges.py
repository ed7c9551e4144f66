"""Co-use edges in a state: which pairs a feedback forms, and the one update rule every backend
applies (memory and SQLite here; Redis runs the same rule in Lua, ``state/redis/edges.py``).

A namespace's edges are an adjacency map ``doc -> {neighbour: [strength, count, last]}``, each
edge present under both of its documents (memory shares one list between the two). The update of
one feedback, in order, so every backend ends with the same edges:

1. every pair the feedback forms (sorted) is strengthened, created at strength 0 when new;
2. every document of those pairs (sorted) drops its edges below the floor, then, past
   ``max_per_doc``, its weakest edges (by strength now, ties by neighbour id);
3. past ``max_edges`` in the namespace, the weakest edges (ties by the pair) are evicted down to
   :attr:`~heaprank.learning.co_use.CoUse.evict_to`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..learning.co_use import CoUse, decayed, strengthened
from . import codec

Pair = tuple[str, str]
Adjacency = dict[str, dict[str, list[float]]]


@dataclass(frozen=True, slots=True)
class EdgeRows:
    """The edges among some documents, as stored: positions ``i < j`` into the ids that were
    read, and each edge's ``strength`` (at ``last``), co-activation ``count`` and ``last`` time."""

    i: np.ndarray
    j: np.ndarray
    strength: np.ndarray
    count: np.ndarray
    last: np.ndarray

    @classmethod
    def empty(cls) -> EdgeRows:
        return cls.from_rows([])

    @classmethod
    def from_rows(cls, rows: Sequence[tuple[int, int, float, float, float]]) -> EdgeRows:
        arr = np.array(rows, dtype=np.float64).reshape(-1, 5)
        return cls(arr[:, 0].astype(np.int64), arr[:, 1].astype(np.int64), arr[:, 2].copy(),
                   arr[:, 3].copy(), arr[:, 4].copy())

    def __len__(self) -> int:
        return len(self.i)


def among(ids: Sequence[str], neighbours: Callable[[str], dict[str, list[float]] | None]) -> EdgeRows:
    """The edges whose two documents are both in ``ids``, from each document's adjacency."""
    where: dict[str, int] = {}
    for k, d in enumerate(ids):
        where.setdefault(d, k)
    rows = []
    for a, i in where.items():
        for b, (s, n, t) in (neighbours(a) or {}).items():
            j = where.get(b)
            if j is not None and a < b:
                rows.append((i, j, s, n, t) if i < j else (j, i, s, n, t))
    return EdgeRows.from_rows(rows)


def co_use_pairs(shown: Sequence[str], verdicts: Sequence[int], todo: Sequence[object],
                 max_rank: int) -> list[Pair]:
    """The pairs one feedback strengthens: each item it newly marks used, with every other item of
    the same impression that is used (before or in this feedback), both shown at ``max_rank`` or
    better. A pair is formed when the later of its two items is applied, so a retry (whose items
    are all recorded already) forms none, and split feedback forms each pair once."""
    new = {item.rank for item in todo if item.used and item.rank <= max_rank}  # type: ignore[attr-defined]
    if not new:
        return []
    used = {r for r in range(1, min(len(verdicts), max_rank) + 1)
            if verdicts[r - 1] == codec.USED} | new
    pairs = {(min(shown[x - 1], shown[y - 1]), max(shown[x - 1], shown[y - 1]))
             for x in new for y in used if x != y and shown[x - 1] != shown[y - 1]}
    return sorted(pairs)


def _drop(adj: Adjacency, a: str, b: str, deleted: set[Pair]) -> None:
    for x, y in ((a, b), (b, a)):
        nbrs = adj.get(x)
        if nbrs is not None:
            nbrs.pop(y, None)
            if not nbrs:  # a document without edges keeps no entry
                del adj[x]
    deleted.add((min(a, b), max(a, b)))


def update(adj: Adjacency, count: int, pairs: Sequence[Pair], now: float, co_use: CoUse,
           everything: Callable[[], Adjacency]) -> tuple[int, set[Pair], set[Pair]]:
    """Apply one feedback's co-use to ``adj`` in place; returns the namespace's new edge count,
    the pairs written and the pairs deleted.

    ``adj`` must hold the complete adjacency of every document in ``pairs`` (a backend that
    loads lazily reads those); ``everything()`` returns the whole namespace's adjacency as
    stored before this feedback (or ``adj`` itself when that is the whole), asked only when the
    namespace is over ``max_edges``.
    """
    written: set[Pair] = set()
    deleted: set[Pair] = set()
    for a, b in pairs:
        row = adj.setdefault(a, {}).get(b)
        if row is None:
            row = [0.0, 0.0, now]
            adj[a][b] = row
            adj.setdefault(b, {})[a] = row
            count += 1
        row[:] = strengthened(row[0], row[1], row[2], now, co_use)
        written.add((a, b))
    for d in sorted({x for pair in pairs for x in pair}):
        edges = adj.get(d, {})
        strength = {b: decayed(row[0], row[1], row[2], now, co_use) for b, row in edges.items()}
        weak = [b for b in sorted(edges) if strength[b] < co_use.floor]
        excess = len(edges) - len(weak) - co_use.max_per_doc
        if excess > 0:
            kept = sorted((b for b in edges if strength[b] >= co_use.floor),
                          key=lambda b: (strength[b], b))
            weak += kept[:excess]
        for b in weak:
            _drop(adj, d, b, deleted)
            count -= 1
    if count > co_use.max_edges:
        full = everything()
        if full is not adj:  # as stored before this feedback: bring this feedback's changes in
            for a, b in deleted:
                full.get(a, {}).pop(b, None)
                full.get(b, {}).pop(a, None)
            for a, nbrs in adj.items():
                for b, row in nbrs.items():
                    full.setdefault(a, {})[b] = row
                    full.setdefault(b, {})[a] = row
        ranked = sorted((decayed(row[0], row[1], row[2], now, co_use), a, b)
                        for a, nbrs in full.items() for b, row in nbrs.items() if a < b)
        for _, a, b in ranked[:count - co_use.evict_to]:
            _drop(full, a, b, deleted)
            if full is not adj:
                _drop(adj, a, b, deleted)
        count = min(count, co_use.evict_to)
    return count, written - deleted, deleted
