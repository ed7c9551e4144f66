"""Beta links with a pooled prior, noisy-OR usefulness and EM credit (docs/design.md, "Learning").

For feature ``f`` in namespace ``n`` the state keeps evidence ``(pos, neg)``; the global layer
keeps the sums over all namespaces ``(G+, G-)``. With ``G+'``, ``G-'`` the pooled counts leaving
this namespace's own evidence out and ``c = min(1, kappa / (G+' + G-'))``::

    alpha = a0 + c * G+' + pos        beta = b0 + c * G-' + neg        p_f = alpha / (alpha + beta)

Usefulness is the noisy-OR ``U = 1 - prod_f (1 - p_f)``. A confirmed (used) candidate credits
each feature ``r_f = min(1, p_f / U)`` (EM for noisy-OR): ``pos += r_f``, ``neg += 1 - r_f``;
an ignored one adds ``neg += d`` to every feature, ``d`` the position discount (1 without one).
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import numpy as np

from ..errors import ConfigError
from ..records import FeedbackItem, LinkCounts

K = TypeVar("K")


@dataclass(frozen=True, slots=True)
class Prior:
    """The sceptical Beta prior ``(a0, b0)`` and how much a namespace borrows from the pool.

    Args:
        mean: Prior P(useful) of a link, ``a0 / (a0 + b0)``. Small, so a noisy-OR over ~20
            features does not saturate.
        strength: ``a0 + b0``, in pseudo-observations.
        kappa: At most this many pseudo-observations are borrowed from the pooled layer.
    """

    mean: float = 0.01
    strength: float = 2.0
    kappa: float = 50.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.mean) and 0.0 < self.mean < 1.0):
            raise ConfigError(f"prior.mean: must be in (0, 1), got {self.mean!r}")
        if not (math.isfinite(self.strength) and self.strength > 0.0):
            raise ConfigError(f"prior.strength: must be > 0, got {self.strength!r}")
        if not (math.isfinite(self.kappa) and self.kappa >= 0.0):
            raise ConfigError(f"prior.kappa: must be >= 0, got {self.kappa!r}")

    @property
    def a0(self) -> float:
        return self.mean * self.strength

    @property
    def b0(self) -> float:
        return (1.0 - self.mean) * self.strength


class Learning(Protocol):
    """The settings the posterior reads: a :class:`Prior`, or a feedback batch carrying them."""

    @property
    def a0(self) -> float: ...

    @property
    def b0(self) -> float: ...

    @property
    def kappa(self) -> float: ...


def posterior(counts: LinkCounts, prior: Learning, *,
              pooled: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """``(alpha, beta)`` of each link in a namespace, borrowing at most ``kappa`` from the pool."""
    alpha = prior.a0 + counts.pos
    beta = prior.b0 + counts.neg
    if pooled:
        # Leave the namespace's own evidence out of the pool it borrows from.
        gpos = np.maximum(counts.gpos - counts.pos, 0.0)
        gneg = np.maximum(counts.gneg - counts.neg, 0.0)
        total = gpos + gneg
        share = np.where(total > 0.0, np.minimum(1.0, prior.kappa / np.maximum(total, 1e-300)), 0.0)
        alpha = alpha + share * gpos
        beta = beta + share * gneg
    return alpha, beta


def global_posterior(gpos: np.ndarray, gneg: np.ndarray, prior: Prior) -> tuple[np.ndarray, np.ndarray]:
    """``(alpha, beta)`` of the pooled layer alone."""
    return prior.a0 + gpos, prior.b0 + gneg


def posterior_mean(alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
    return alpha / (alpha + beta)


def noisy_or(p: np.ndarray) -> np.ndarray:
    """``1 - prod(1 - p)`` along the last axis, computed in log space for accuracy.

    A link that rounded to exactly 1 contributes ``log(0) = -inf`` and makes ``U = 1``, which is
    right; it is written in directly rather than computed, so no floating-point warning needs
    silencing on the hot path.
    """
    terms = np.full(p.shape, -np.inf)
    np.log1p(-p, out=terms, where=p < 1.0)
    return -np.expm1(terms.sum(axis=-1))


def interval(alpha: np.ndarray, beta: np.ndarray, level: float = 0.9) -> tuple[np.ndarray, np.ndarray]:
    """Equal-tailed Beta credible interval."""
    from scipy.stats import beta as beta_dist

    tail = (1.0 - level) / 2.0
    return beta_dist.ppf(tail, alpha, beta), beta_dist.ppf(1.0 - tail, alpha, beta)


ReadLinks = Callable[[Sequence[str]], LinkCounts]


def _split(items: Sequence[FeedbackItem]) -> tuple[dict[tuple[str, ...], float],
                                                   list[FeedbackItem]]:
    """The ignored items' summed reject weights by feature row (items with the same row add
    their weights once, in item order), and the used items in order."""
    rejected: dict[tuple[str, ...], float] = {}
    used = []
    for item in items:
        if item.used:
            used.append(item)
        else:
            rejected[item.features] = rejected.get(item.features, 0.0) + item.reject_weight
    return rejected, used


def means_of(counts: LinkCounts, prior: Learning) -> list[float]:
    """:func:`posterior_mean` of :func:`posterior` (pooled), link by link in plain Python: the
    same IEEE operations in the same order, so the same floats to the last bit (a property test
    holds them to it), without a dozen numpy calls on the few dozen links of one feedback."""
    a0, b0, kappa = prior.a0, prior.b0, prior.kappa
    out = []
    for pos, neg, gpos, gneg in zip(counts.pos.tolist(), counts.neg.tolist(),
                                    counts.gpos.tolist(), counts.gneg.tolist()):
        gpos = gpos - pos if gpos > pos else 0.0
        gneg = gneg - neg if gneg > neg else 0.0
        total = gpos + gneg
        share = min(1.0, kappa / (total if total > 1e-300 else 1e-300)) if total > 0.0 else 0.0
        alpha = (a0 + pos) + share * gpos
        beta = (b0 + neg) + share * gneg
        out.append(alpha / (alpha + beta))
    return out


def credit(read: ReadLinks, items: Sequence[FeedbackItem], prior: Prior,
           *, em: bool = True) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Evidence increments for one feedback: ``(features, dpos, dneg)``, summed per feature.

    The credit of a used item is computed from the links as they were before this feedback, so
    the result does not depend on the order of the items; only the used items' links are read.
    ``em=False`` gives uniform credit ``1 / n_features`` instead of ``p_f / U``. Plain Python on
    purpose: a feedback touches a few dozen features, where numpy's per-call overhead costs more
    than the arithmetic (measured: twice as slow vectorised).
    """
    features = sorted({f for item in items for f in item.features})
    dpos = dict.fromkeys(features, 0.0)
    dneg = dict.fromkeys(features, 0.0)
    rejected, used = _split(items)
    for row, weight in rejected.items():
        for f in row:
            dneg[f] += weight
    if used:
        p: dict[str, float] = {}
        if em:
            wanted = sorted({f for item in used for f in item.features})
            p = dict(zip(wanted, means_of(read(wanted), prior)))
        for item in used:
            share = 1.0 / len(item.features)
            if em:
                ps = [p[f] for f in item.features]
                u = used_total(ps)
                shares = [min(1.0, x / u) for x in ps] if u > 0.0 else [share] * len(ps)
            else:
                shares = [share] * len(item.features)
            for f, r in zip(item.features, shares):
                dpos[f] += r
                dneg[f] += 1.0 - r
    return features, np.array(list(dpos.values())), np.array(list(dneg.values()))


def credit_ids(items: Sequence[FeedbackItem], ids_of: Callable[[tuple[str, ...]], Sequence[int]],
               p_of: Callable[[FeedbackItem, Sequence[int]], np.ndarray], *,
               em: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`credit` on integer feature ids, for a backend that keeps its counts in arrays.

    ``ids_of(features)`` gives the ids of a feature row, ``p_of(item, ids)`` the posterior
    means of a used item's links (ids ``ids``) before this feedback. Returns
    ``(ids, dpos, dneg)``, each id once. Every feature's increments are the same numbers added
    in the same order as in :func:`credit` (ignored rows in the order they first appear, then
    the used items), so the two agree to the last bit (a property test holds them to it).
    Plain Python on small ints: a feedback touches a few dozen features.
    """
    rejected, used = _split(items)
    return credit_rows(((ids_of(row), weight) for row, weight in rejected.items()),
                       ((ids_of(item.features), item) for item in used), p_of, em=em)


def used_total(ps: list[float]) -> float:
    """A used item's noisy-OR ``U = 1 - prod(1 - p)`` from its links' means ``ps``, its log
    terms summed exactly (``math.fsum``, so in any order): the one computation of ``U`` that
    the credit on feature ids and the memory backend's lean feedback share, bit for bit."""
    terms = map(math.log1p, map(operator.neg, ps)) if max(ps) < 1.0 else (
        math.log1p(-x) if x < 1.0 else -math.inf for x in ps)
    return -math.expm1(math.fsum(terms))


def credit_rows(rejected: Iterable[tuple[Sequence[int], float]],
                used: Iterable[tuple[Sequence[int], K]],
                p_of: Callable[[K, Sequence[int]], np.ndarray], *,
                em: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The arithmetic of :func:`credit_ids` on rows already turned into feature ids.

    ``rejected``: each distinct ignored row's ids with its summed reject weight, in the order
    the rows first appear; ``used``: each used item's ids with a key that ``p_of(key, ids)``
    takes. The memory backend's fast feedback builds these straight from an impression's rows.
    """
    dpos: dict[int, float] = {}
    dneg: dict[int, float] = {}
    neg_get, pos_get, zero = dneg.get, dpos.get, itertools.repeat(0.0)
    # A row's features are distinct, so reading its old sums first and writing them back is the
    # same as adding one feature at a time; the maps keep the loops out of Python bytecode.
    for ids, weight in rejected:
        dneg.update(zip(ids, map(operator.add, map(neg_get, ids, zero),
                                 itertools.repeat(weight))))
    for ids, key in used:
        n_features = len(ids)
        shares = [1.0 / n_features] * n_features
        if em:
            ps = p_of(key, ids).tolist()
            u = used_total(ps)
            if u > 0.0:
                shares = list(map(min, itertools.repeat(1.0),
                                  map(operator.truediv, ps, itertools.repeat(u))))
        dpos.update(zip(ids, map(operator.add, map(pos_get, ids, zero), shares)))
        dneg.update(zip(ids, map(operator.add, map(neg_get, ids, zero),
                                 map(operator.sub, itertools.repeat(1.0), shares))))
    n = len(dneg)  # every feature of the feedback has a dneg entry
    return (np.fromiter(dneg, dtype=np.int64, count=n),
            np.fromiter(map(pos_get, dneg, zero), dtype=np.float64, count=n),
            np.fromiter(dneg.values(), dtype=np.float64, count=n))
