"""Spreading activation along co-use edges (the Shodh seed), at rerank time.

Activation spreads from the strongest candidates by base score (the product of the other
signals) along the edges among the candidates, ``depth`` hops at most, each hop multiplying by
the edge's strength and ``hop_decay``; a candidate's association factor is
``1 + min(cap, activation it received from the other seeds)``, so it is 1 without edges and
never above ``1 + cap``. How the edges are learned: :mod:`heaprank.model.co_use`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model.co_use import CoUse, decayed_array
from ..model.evidence import EdgeRows


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


def associate(base_log: np.ndarray, rows: EdgeRows | None, now: float,
              co_use: CoUse) -> Association:
    """The association factor of each candidate from the edges read among them, decayed to
    ``now`` (``rows`` None: the state could not be read, so no edges)."""
    n = base_log.shape[0]
    strength, count = np.zeros((n, n)), np.zeros((n, n))
    if rows is not None and len(rows):
        now_s = decayed_array(rows.strength, rows.count, rows.last, now, co_use)
        live = now_s >= co_use.floor  # a pruned edge is gone even before it is deleted
        i, j = rows.i[live], rows.j[live]
        strength[i, j] = strength[j, i] = now_s[live]
        count[i, j] = count[j, i] = rows.count[live]
    return spread(base_log, strength, count, co_use)


def co_used_with(ids: tuple[str, ...], linked: Association, i: int) -> str:
    """EXPLAIN's note on candidate ``i``'s association factor: the seed it came from most."""
    partner = int(linked.partner[i])
    if linked.hops[i] == 1:
        return f"co-used with {ids[partner]} x{linked.count[i]:g}"
    return f"co-used via {ids[partner]}, {int(linked.hops[i])} hops"
