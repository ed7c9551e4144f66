"""Beta links with a pooled prior, noisy-OR usefulness and EM credit (docs/design.md, "Learning").

For feature ``f`` in namespace ``n`` the state keeps evidence ``(pos, neg)``; the global layer
keeps the sums over all namespaces ``(G+, G-)``. With ``G+'``, ``G-'`` the pooled counts leaving
this namespace's own evidence out and ``c = min(1, kappa / (G+' + G-'))``::

    alpha = a0 + c * G+' + pos        beta = b0 + c * G-' + neg        p_f = alpha / (alpha + beta)

Usefulness is the noisy-OR ``U = 1 - prod_f (1 - p_f)``. A confirmed (used) candidate credits
each feature ``r_f = min(1, p_f / U)`` (EM for noisy-OR): ``pos += r_f``, ``neg += 1 - r_f``;
an ignored one adds ``neg += d`` to every feature, ``d`` its reject weight (the position
discount; 1 without one). :func:`increments` is the one place this rule is written: every
state only adds the increments it returns.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import numpy as np

from ..errors import ConfigError
from .evidence import LinkCounts


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
    """The settings the posterior reads (a :class:`Prior` has them)."""

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


class Judged(NamedTuple):
    """One shown item as a feedback judged it: its features, whether the answer used it, and
    the negative evidence each of its features takes when it did not (its reject weight)."""

    features: tuple[str, ...]
    used: bool
    weight: float


class Increments(NamedTuple):
    """What one feedback adds to the counts: each feature once (in the order the feedback's
    items first name it), with its ``pos`` and ``neg`` increments."""

    features: tuple[str, ...]
    dpos: np.ndarray
    dneg: np.ndarray


def increments(items: Sequence[Judged], means: Mapping[str, float], *,
               em: bool = True) -> Increments:
    """The evidence one feedback adds, per feature, summed over its items.

    An ignored item adds its ``weight`` to ``neg`` of each of its features; a used item
    credits each feature ``r_f = min(1, p_f / U)``, ``U`` the noisy-OR of its features'
    posterior means ``means`` (read before this feedback, so the result does not depend on the
    order of the items), or ``1 / n`` each with ``em=False``; its ``neg`` takes ``1 - r_f``.
    Plain Python: a feedback touches a few dozen features, where numpy's per-call overhead
    costs more than the arithmetic; the sums run in C-level ``map`` calls (a row's features
    are distinct, so adding a row at once is adding its features one by one).
    """
    dpos: dict[str, float] = {}
    dneg: dict[str, float] = {}
    zero = itertools.repeat(0.0)
    for item in items:
        row = item.features
        if not item.used:
            dneg.update(zip(row, map(operator.add, map(dneg.get, row, zero),
                                     itertools.repeat(item.weight))))
    for item in items:
        row = item.features
        if item.used and row:
            credit = shares(row, means, em)
            dpos.update(zip(row, map(operator.add, map(dpos.get, row, zero), credit)))
            dneg.update(zip(row, map(operator.add, map(dneg.get, row, zero),
                                     map(operator.sub, itertools.repeat(1.0), credit))))
    n = len(dneg)  # every feature of a feedback has a neg increment
    return Increments(tuple(dneg), np.fromiter(map(dpos.get, dneg, zero), dtype=np.float64,
                                               count=n),
                      np.fromiter(dneg.values(), dtype=np.float64, count=n))


def shares(features: Sequence[str], means: Mapping[str, float], em: bool) -> list[float]:
    """A used item's credit to each of its features: ``min(1, p_f / U)`` (EM), or ``1 / n``
    without EM or when ``U`` is 0."""
    uniform = [1.0 / len(features)] * len(features)
    if not em:
        return uniform
    ps = list(map(means.__getitem__, features))
    u = used_total(ps)
    if u <= 0.0:
        return uniform
    return list(map(min, itertools.repeat(1.0), map(operator.truediv, ps, itertools.repeat(u))))


def used_total(ps: list[float]) -> float:
    """A used item's noisy-OR ``U = 1 - prod(1 - p)`` from its links' means ``ps``, its log
    terms summed exactly (``math.fsum``, so in any order)."""
    terms = map(math.log1p, map(operator.neg, ps)) if max(ps) < 1.0 else (
        math.log1p(-x) if x < 1.0 else -math.inf for x in ps)
    return -math.expm1(math.fsum(terms))


def means_of(counts: LinkCounts, prior: Learning) -> list[float]:
    """:func:`posterior_mean` of :func:`posterior` (pooled), link by link in plain Python: the
    same IEEE operations in the same order, so the same floats to the last bit, without a dozen
    numpy calls on the few dozen links of one feedback."""
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
