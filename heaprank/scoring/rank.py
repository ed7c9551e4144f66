"""Ranking: the signal matrix, each question's weight row, the log-linear score with its terms,
and the order best first.

``score = prod_i signal_i ** w_i x rules`` is computed in log space by :func:`combine`; ties
keep the retriever's order (relevance, then input position).
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import numpy as np

from ..config import SIGNALS, Weights


class WeightRow(NamedTuple):
    """One question's signal exponents, in :data:`SIGNALS` order: as an array for the scores
    (read-only: it is shared), as floats, the mask of the zero ones (None: none is 0), and
    those zeros' positions when each is +0.0 (None if one is -0.0: see :func:`zero_mask`)."""

    array: np.ndarray
    values: tuple[float, ...]
    off: np.ndarray | None
    off_columns: tuple[int, ...] | None


@functools.lru_cache(maxsize=256)
def weight_row(weights: Weights, recency_scale: float | None) -> WeightRow:
    """The exponents of ``weights`` with the recency one scaled by ``recency_scale`` (None:
    unscaled), worked out once per distinct pair: a reranker uses a few (its own weights, one
    per question type, one per temporal intent), and every rerank needs them."""
    values = list(weights.as_tuple())
    if recency_scale is not None:
        values[SIGNALS.index("recency")] *= recency_scale
    array = np.array(values)
    array.flags.writeable = False
    exact = tuple(array.tolist())
    off = array == 0
    off.flags.writeable = False
    positive_zeros = all(math.copysign(1.0, w) > 0 for w in exact if w == 0)
    return WeightRow(array, exact, off if off.any() else None,
                     tuple(np.flatnonzero(off).tolist()) if positive_zeros else None)


def zero_mask(weights: WeightRow, values: tuple[np.ndarray | float, ...]) -> np.ndarray | None:
    """The zero-weight mask :func:`combine` must clear, or None when there is nothing
    to clear: every zero-weight column holds the constant 1.0 (the usual case: reinforcement and
    association off), whose log term is +0.0 already (log 1 = +0.0, times a +0.0 weight)."""
    columns = weights.off_columns
    if weights.off is None or columns is None:
        return weights.off
    for j in columns:
        value = values[j]
        if type(value) is not float or value != 1.0:
            return weights.off
    return None


def matrix(n: int, values: tuple[np.ndarray | float, ...],
            at: np.ndarray | None = None) -> np.ndarray:
    """The matrix whose column ``j`` is ``values[j]`` (an array of ``n``, or a float for every
    row), its rows ``at`` only when given."""
    out = np.empty((n, len(values)))
    for j, value in enumerate(values):
        out[:, j] = value
    return out if at is None else out[at]


def best_first(log_score: np.ndarray, rel: np.ndarray) -> np.ndarray:
    """The candidates best first: by log score, ties by relevance, then by input position
    (``np.lexsort`` is stable)."""
    return np.lexsort((-rel, -log_score))


def take(at: np.ndarray, columns: tuple[np.ndarray, ...]) -> list[list[Any]]:
    """``[column[at].tolist() for column in columns]``."""
    return [column[at].tolist() for column in columns]



def combine(signals: np.ndarray, weights: np.ndarray, rules: np.ndarray, *,
            no_rule_fired: bool = False, off: np.ndarray | None | bool = True
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(log_score, log_terms, log_rules)``: the log of ``prod_i signals[:, i] ** weights[i] x
    rules``, with its terms.

    ``log_terms[:, i] = weights[i] * log(signals[:, i])`` is kept for EXPLAIN and why_not.
    A rule multiplier of 0 gives ``-inf`` (the candidate is dropped by the caller). Ordering on
    the log score keeps candidates apart even where the product would underflow.
    ``no_rule_fired``: every multiplier is 1 (their logs are 0, without taking them: the
    log rules are then shared read-only zeros, and adding them would change no bit).
    ``off``: the mask ``weights == 0`` if the caller has it (None: no weight is 0).
    """
    log_terms = np.log(signals)  # every signal is > 0 by construction
    log_terms *= weights
    if off is True:
        zero = weights == 0
        off = zero if zero.any() else None
    if off is not None:
        log_terms[:, off] = 0.0
    if no_rule_fired:
        return log_terms.sum(axis=1), log_terms, zeros(len(rules))
    logged_rules = log_rules(rules)
    return log_terms.sum(axis=1) + logged_rules, log_terms, logged_rules


_ZEROS: dict[int, np.ndarray] = {}


def zeros(n: int) -> np.ndarray:
    """``n`` read-only zeros, shared by every caller asking for ``n`` (a few sizes recur)."""
    out = _ZEROS.get(n)
    if out is None:
        out = np.zeros(n)
        out.flags.writeable = False
        if n <= 4_096:
            if len(_ZEROS) >= 64:
                _ZEROS.clear()
            _ZEROS[n] = out
    return out


def log_rules(rules: np.ndarray) -> np.ndarray:
    """``log`` of rule multipliers, ``-inf`` for 0 (a dropped candidate), without a warning."""
    positive = rules > 0.0
    if positive.all():  # no rule dropped anything: the usual case
        return np.log(rules)
    out = np.log(np.where(positive, rules, 1.0))
    out[rules <= 0.0] = -np.inf
    return out
