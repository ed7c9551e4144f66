"""Co-use associations (the Shodh seed): Hebbian edges between documents used together, and
spreading activation among the candidates of a rerank (docs/design.md, "Co-use associations").

An edge joins two documents of one namespace that one answer used together. It keeps its
strength ``s`` in [0, 1], how many times it was co-activated ``n`` and when it last was ``t``:

- co-use strengthens it with diminishing returns: ``s <- s' + rate (1 - s')``, ``s'`` the
  strength decayed to now;
- between co-uses it decays: ``s' = s 2^(-dt / h)`` with ``h = half_life (1 + s)``, or
  ``half_life x ltp_slowdown`` once ``n >= ltp_threshold`` (long-term potentiation: an edge
  co-activated often decays that much more slowly);
- an edge below ``floor`` counts as gone and is pruned; a document keeps at most
  ``max_per_doc`` edges and a namespace ``max_edges``, the weakest evicted first.

At rerank time activation spreads along them (:mod:`heaprank.scoring.spreading`).

A namespace's edges are an adjacency map ``doc -> {neighbour: [strength, count, last]}``, each
edge present under both of its documents. The update of one feedback (:func:`update`), in
order, so every state ends with the same edges:

1. every pair the feedback forms (sorted) is strengthened, created at strength 0 when new;
2. every document of those pairs (sorted) drops its edges below the floor, then, past
   ``max_per_doc``, its weakest edges (by strength now, ties by neighbour id);
3. past ``max_edges`` in the namespace, the weakest edges (ties by the pair) are evicted down to
   :attr:`CoUse.evict_to`.

Edges are per-document, so they never leave their namespace and are never pooled.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields

import numpy as np

from .._time import DAY_S
from ..errors import ConfigError
from .evidence import EdgeRows

Pair = tuple[str, str]
Adjacency = dict[str, dict[str, list[float]]]


@dataclass(frozen=True, slots=True, kw_only=True)
class CoUse:
    """How co-use edges are learned and how activation spreads along them.

    Learning (applied by feedback, in the same transaction as the links):

    Args:
        rate: Hebbian step: a co-use moves the strength ``rate`` of the way to 1.
        ltp_threshold: Co-activations after which an edge is potentiated.
        half_life_s: Base half-life of an edge's strength (lengthened by ``1 + s``).
        ltp_slowdown: A potentiated edge's half-life is ``half_life_s`` times this.
        floor: Edges weaker than this count as gone and are pruned.
        max_edges: Edges kept per namespace; past it the weakest are evicted (down to 90%, so
            the eviction's full scan runs once per many feedbacks, not on each).
        max_per_doc: Edges kept per document, the weakest evicted first.
        max_rank: Only used items shown at this rank or better form edges, so one feedback
            forms at most ``max_rank (max_rank - 1) / 2`` of them.

    Spreading (at rerank time, when ``Weights.association > 0``):

    Args:
        seeds: How many of the best candidates by base score spread activation.
        depth: Hops activation may travel from a seed.
        hop_decay: Multiplier per hop (on top of the edge's strength).
        cap: Most activation a candidate may receive: its factor is at most ``1 + cap``.
    """

    rate: float = 0.2
    ltp_threshold: int = 5
    half_life_s: float = 30 * DAY_S
    ltp_slowdown: float = 10.0
    floor: float = 0.02
    max_edges: int = 10_000
    max_per_doc: int = 32
    max_rank: int = 20
    seeds: int = 5
    depth: int = 2
    hop_decay: float = 0.5
    cap: float = 1.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value):
                raise ConfigError(f"co_use.{f.name}: expected a finite number, got {value!r}")
            if f.type == "int" and not isinstance(value, int):
                raise ConfigError(f"co_use.{f.name}: expected an int, got {value!r}")
        for name in ("rate", "hop_decay", "floor"):
            if not 0.0 < getattr(self, name) < 1.0:
                raise ConfigError(f"co_use.{name}: must be in (0, 1), got {getattr(self, name)!r}")
        for name in ("half_life_s", "cap"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"co_use.{name}: must be > 0, got {getattr(self, name)!r}")
        if self.rate <= self.floor:
            raise ConfigError(f"co_use.rate: must be above co_use.floor ({self.floor!r}), or no "
                              f"edge would outlive its first co-use; got {self.rate!r}")
        if self.ltp_slowdown < 1:
            raise ConfigError(f"co_use.ltp_slowdown: must be >= 1, got {self.ltp_slowdown!r}")
        for name in ("ltp_threshold", "max_edges", "max_per_doc", "seeds", "depth"):
            if getattr(self, name) < 1:
                raise ConfigError(f"co_use.{name}: must be >= 1, got {getattr(self, name)!r}")
        if self.max_rank < 2:
            raise ConfigError(f"co_use.max_rank: must be >= 2, got {self.max_rank!r}")

    @property
    def evict_to(self) -> int:
        """How many edges a namespace keeps after an eviction (90% of ``max_edges``)."""
        return max(1, self.max_edges * 9 // 10)


def decayed(strength: float, count: float, last: float, now: float, co_use: CoUse) -> float:
    """An edge's strength at ``now``: ``s 2^(-dt / h)``, ``h`` lengthened by the strength, or
    by ``ltp_slowdown`` once the edge is potentiated. A ``now`` before ``last`` does not decay."""
    half_life = co_use.half_life_s * (co_use.ltp_slowdown if count >= co_use.ltp_threshold
                                      else 1.0 + strength)
    return strength * math.pow(2.0, -max(now - last, 0.0) / half_life)


def decayed_array(strength: np.ndarray, count: np.ndarray, last: np.ndarray, now: float,
                  co_use: CoUse) -> np.ndarray:
    """:func:`decayed` over arrays (the rerank's edge matrix)."""
    half_life = co_use.half_life_s * np.where(count >= co_use.ltp_threshold, co_use.ltp_slowdown,
                                              1.0 + strength)
    return strength * np.power(2.0, -np.maximum(now - last, 0.0) / half_life)


def strengthened(strength: float, count: float, last: float, now: float,
                 co_use: CoUse) -> tuple[float, float, float]:
    """The edge after one more co-use at ``now``: decayed to now, then ``s + rate (1 - s)``."""
    s = decayed(strength, count, last, now, co_use)
    return s + co_use.rate * (1.0 - s), count + 1.0, max(last, now)


def adjacency(rows: Iterable[tuple[str, str, float, float, float]]) -> Adjacency:
    """Edge rows ``(a, b, strength, count, last)`` as an adjacency map, each edge's list shared
    by its two documents."""
    adj: Adjacency = {}
    for a, b, strength, count, last in rows:
        row = [strength, count, last]
        adj.setdefault(a, {})[b] = row
        adj.setdefault(b, {})[a] = row
    return adj


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


def co_use_pairs(shown: Sequence[str], used_before: Iterable[int], newly_used: Iterable[int],
                 max_rank: int) -> list[Pair]:
    """The pairs one feedback strengthens: each item it newly marks used (``newly_used``, shown
    positions from 1), with every other item of the same impression that is used (before it,
    ``used_before``, or in it), both shown at ``max_rank`` or better. A pair is formed when the
    later of its two items is applied, so a retry (whose items are all recorded already) forms
    none, and split feedback forms each pair once."""
    new = {r for r in newly_used if r <= max_rank}
    if not new:
        return []
    used = {r for r in used_before if r <= max_rank} | new
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
