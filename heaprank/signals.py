"""The signals: each a small vectorised function returning an ``(n,)`` float64 array in (0, inf).

``score = prod_i signal_i ** w_i x rules`` is computed in log space by :func:`combine`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping

import numpy as np

from .candidates import CandidateBatch


def relevance(scores: np.ndarray, *, kind: str, floor: float, rank_tau: float) -> np.ndarray:
    """Normalise the retriever's scores over this candidate set into ``[floor, 1]``.

    Similarity: ``floor + (1 - floor) * (s - min) / (max - min)``; distance scores are negated
    first; all-equal scores (and a single candidate) give 1. No scores: ``1 / (1 + rank / tau)``
    with rank 0 for the first candidate. Invalid (NaN) scores, allowed only with lenient handling,
    get the floor.
    """
    n = scores.shape[0]
    nan = np.isnan(scores)
    if nan.all():
        return 1.0 / (1.0 + np.arange(n, dtype=np.float64) / rank_tau)
    s = -scores if kind == "distance" else scores
    some_nan = bool(nan.any())
    valid = s[~nan] if some_nan else s
    lo, hi = float(valid.min()), float(valid.max())
    span = hi - lo  # Python floats: an overflow is inf, not a warning
    if not math.isfinite(span):  # scores so large their span overflows: rescale first
        s = s / max(abs(lo), abs(hi))
        valid = s[~nan] if some_nan else s
        lo, hi = float(valid.min()), float(valid.max())
        span = hi - lo
    if span <= 0:
        out = np.ones(n)
    else:
        # Round off the last bits so that scaling or shifting every score by a constant
        # cannot reorder two candidates through floating-point noise alone.
        out = floor + (1.0 - floor) * np.round((s - lo) / span, 12)
    if some_nan:
        out[nan] = floor if floor > 0 else 1e-6
    return np.maximum(out, 1e-12)


def recency(age_s: np.ndarray, *, half_life_s: float, floor: float) -> np.ndarray:
    """``floor + (1 - floor) * 2 ** (-age / half_life)``; unknown age (NaN) is neutral (1).

    Kept above 0 even with ``floor=0`` (where ``2 ** -x`` underflows past ~1075 half-lives), so
    an old memory is weak, never dropped: only a rule may zero a score.
    """
    out = floor + (1.0 - floor) * np.exp2(-np.maximum(age_s, 0.0) / half_life_s)
    return np.where(np.isnan(age_s), 1.0, np.maximum(out, 1e-300))


def importance(batch: CandidateBatch, kind_importance: Mapping[str, float]) -> np.ndarray:
    """The explicit dose, else the kind prior (1.0 for unknown kinds); for aggregated memories
    (``source_count`` given): ``0.7 x base + 0.3 x confidence + ln(1 + source_count) / 10``,
    clamped to [0.05, 3] (the HEBBS insight boost; confidence defaults to 0.5)."""
    # kinds are None or non-empty: None is not a kind, so it reads the neutral 1.0
    prior = np.fromiter(map(kind_importance.get, batch.kinds,  # type: ignore[arg-type]
                            itertools.repeat(1.0)),
                        dtype=np.float64, count=len(batch))
    base = np.where(np.isnan(batch.importance), prior, batch.importance)
    aggregated = ~np.isnan(batch.source_count)
    if aggregated.any():
        conf = np.where(np.isnan(batch.confidence), 0.5, batch.confidence)
        boosted = 0.7 * base + 0.3 * conf + np.log1p(np.nan_to_num(batch.source_count)) / 10.0
        base = np.where(aggregated, np.clip(boosted, 0.05, 3.0), base)
    return base


def combine(signals: np.ndarray, weights: np.ndarray,
            rules: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(log_score, log_terms, log_rules)``: the log of ``prod_i signals[:, i] ** weights[i] x
    rules``, with its terms.

    ``log_terms[:, i] = weights[i] * log(signals[:, i])`` is kept for EXPLAIN and why_not.
    A rule multiplier of 0 gives ``-inf`` (the candidate is dropped by the caller). Ordering on
    the log score keeps candidates apart even where the product would underflow.
    """
    log_terms = weights[None, :] * np.log(signals)  # every signal is > 0 by construction
    log_terms[:, weights == 0] = 0.0
    logged_rules = log_rules(rules)
    return log_terms.sum(axis=1) + logged_rules, log_terms, logged_rules


def log_rules(rules: np.ndarray) -> np.ndarray:
    """``log`` of rule multipliers, ``-inf`` for 0 (a dropped candidate), without a warning."""
    out = np.log(np.where(rules > 0.0, rules, 1.0))
    out[rules <= 0.0] = -np.inf
    return out
