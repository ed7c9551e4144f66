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

At rerank time activation spreads from the strongest candidates by base score (the product of
the other signals) along the edges among the candidates, ``depth`` hops at most, each hop
multiplying by the edge's strength and ``hop_decay``; a candidate's association factor is
``1 + min(cap, activation it received from the other seeds)``, so it is 1 without edges and
never above ``1 + cap``.

Edges are per-document, so they never leave their namespace and are never pooled.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np

from .errors import ConfigError

DAY_S = 86_400.0


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


@dataclass(frozen=True, slots=True)
class Association:
    """The association factor of each candidate and what it came from (for EXPLAIN).

    Attributes:
        factor: ``1 + min(cap, received activation)`` per candidate.
        partner: Per candidate, the index of the seed that gave it the most activation (-1: none).
        hops: Hops from that seed (0 without one).
        count: Co-activations of the direct edge with that partner (0 when it came in 2+ hops).
    """

    factor: np.ndarray
    partner: np.ndarray
    hops: np.ndarray
    count: np.ndarray


def spread(base_log: np.ndarray, strength: np.ndarray, count: np.ndarray,
           co_use: CoUse) -> Association:
    """Spread activation from the best candidates along the edges among the candidates.

    Args:
        base_log: Each candidate's log score without association (``-inf``: dropped by a rule).
        strength: ``(n, n)`` symmetric matrix of edge strengths now (0: no edge), zero diagonal.
        count: ``(n, n)`` co-activations of each edge.
        co_use: ``seeds``, ``depth``, ``hop_decay`` and ``cap``.

    The seeds are the ``seeds`` best candidates by base score; seed ``k`` starts with activation
    ``exp(base_log[k] - best)`` (1 for the best, less for weaker seeds), so a candidate gains most
    from being co-used with candidates that rank high on their own. Each seed's activation of a
    candidate is the best product over paths of at most ``depth`` hops (as in Shodh's breadth-first
    spreading); a candidate receives the sum over the *other* seeds, capped at ``cap``.
    """
    n = base_log.shape[0]
    none = Association(np.ones(n), np.full(n, -1), np.zeros(n, dtype=np.int64), np.zeros(n))
    alive = np.flatnonzero(np.isfinite(base_log))
    if n < 2 or len(alive) < 2 or not strength.any():
        return none
    order = alive[np.lexsort((alive, -base_log[alive]))]
    seeds = order[:co_use.seeds]
    m = len(seeds)
    start = np.exp(base_log[seeds] - base_log[seeds[0]])
    frontier = np.zeros((m, n))
    frontier[np.arange(m), seeds] = start
    best = np.zeros((m, n))
    hops = np.zeros((m, n), dtype=np.int64)
    for hop in range(1, co_use.depth + 1):
        # Best product over paths of exactly `hop` hops: max over the previous node.
        frontier = (frontier[:, :, None] * strength[None, :, :]).max(axis=1) * co_use.hop_decay
        better = frontier > best
        best = np.where(better, frontier, best)
        hops = np.where(better, hop, hops)
    best[np.arange(m), seeds] = 0.0  # a seed is not boosted by its own activation coming back
    received = best.sum(axis=0)
    factor = 1.0 + np.minimum(received, co_use.cap)
    top = best.argmax(axis=0)
    got = received > 0.0
    partner = np.where(got, seeds[top], -1)
    hop_of = np.where(got, hops[top, np.arange(n)], 0)
    direct = np.where(got & (hop_of == 1), count[np.where(got, partner, 0), np.arange(n)], 0.0)
    return Association(factor, partner, hop_of, direct)
