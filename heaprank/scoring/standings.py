"""What ``Ranking.why_not`` reads about every candidate of a rerank, kept lazily."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np


class Standings:
    """Every candidate of a rerank that no rule dropped, best first, with its log score and its
    terms: what ``why_not`` reads. Kept as the rerank left them (the candidates' ids, the order
    and the unordered arrays) and put in order on first use, since most rankings never ask."""

    def __init__(self, ids: Sequence[str], order: np.ndarray, log_scores: np.ndarray | None = None,
                 log_terms: np.ndarray | None = None, log_rules: np.ndarray | None = None) -> None:
        self._ids, self._order = ids, order
        self._scores = np.empty(0) if log_scores is None else log_scores
        self._terms = np.empty((0, 0)) if log_terms is None else log_terms
        self._rules = np.empty(0) if log_rules is None else log_rules

    @functools.cached_property
    def ids(self) -> tuple[str, ...]:
        return tuple(map(self._ids.__getitem__, self._order.tolist()))

    @functools.cached_property
    def log_scores(self) -> np.ndarray:
        return self._in_order(self._scores)

    @functools.cached_property
    def log_terms(self) -> np.ndarray:
        return self._in_order(self._terms)

    @functools.cached_property
    def log_rules(self) -> np.ndarray:
        return self._in_order(self._rules)

    def _in_order(self, values: np.ndarray) -> np.ndarray:
        return values[self._order] if len(values) else values

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Standings):
            return NotImplemented
        return self.ids == other.ids and all(
            np.array_equal(a, b, equal_nan=True) for a, b in (
                (self.log_scores, other.log_scores), (self.log_terms, other.log_terms),
                (self.log_rules, other.log_rules)))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Standings({list(self.ids)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return Standings, (self.ids, np.arange(len(self.ids)), self.log_scores, self.log_terms,
                           self.log_rules)
