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

Edges are per-document, so they never leave their namespace and are never pooled.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np

from .._time import DAY_S
from ..errors import ConfigError


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
