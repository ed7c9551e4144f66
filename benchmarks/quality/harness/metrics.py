"""Ranking metrics and paired bootstrap intervals for the benchmarks.

- reciprocal rank: ``1 / rank`` of the first evidence item in the full ranked list, 0 when no
  evidence item is among the candidates (so MRR is bounded by the candidate ceiling);
- Recall@k: the share of a question's evidence items that are in the top ``k``, averaged over
  questions (a question with three evidence turns and one of them in the top 5 scores 1/3);
- intervals: percentile bootstrap over questions, 2,000 resamples by default, seeded; a paired
  difference resamples the same questions for both rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

KS = (1, 5, 10)
#: One question's ``(reciprocal rank, {k: recall@k})``.
Score = tuple[float, dict[int, float]]


@dataclass(frozen=True, slots=True)
class PerQuestion:
    """Per-question metric arrays of one row, aligned with the benchmark's question list."""

    rr: np.ndarray
    recall: dict[int, np.ndarray]  # k -> recall@k

    def metric(self, name: str) -> np.ndarray:
        if name == "mrr":
            return self.rr
        if name.startswith("recall@"):
            return self.recall[int(name.split("@", 1)[1])]
        raise KeyError(name)

    def subset(self, idx: np.ndarray) -> PerQuestion:
        """The same row on the questions ``idx`` selects."""
        return PerQuestion(self.rr[idx], {k: v[idx] for k, v in self.recall.items()})


def score_ranking(ranked: Sequence[object], evidence: Iterable[object],
                  ks: Sequence[int] = KS) -> Score:
    """``(reciprocal rank, {k: recall@k})`` of one ranked list against its evidence items."""
    ev = set(evidence)
    rr = 0.0
    hits = np.zeros(len(ranked), dtype=bool)
    for i, item in enumerate(ranked):
        if item in ev:
            hits[i] = True
            if rr == 0.0:
                rr = 1.0 / (i + 1)
    n = max(len(ev), 1)
    return rr, {k: float(hits[:k].sum()) / n for k in ks}


def collect(scores: Sequence[Score], ks: Sequence[int] = KS) -> PerQuestion:
    rr = np.array([s[0] for s in scores], dtype=np.float64)
    rec = {k: np.array([s[1][k] for s in scores], dtype=np.float64) for k in ks}
    return PerQuestion(rr, rec)


class Bootstrap:
    """Seeded resamples of question indices, shared by every row so differences are paired."""

    def __init__(self, n: int, *, resamples: int = 2000, seed: int = 0,
                 level: float = 0.95) -> None:
        self.n = n
        self.level = level
        rng = np.random.default_rng([seed, 0xB007])
        self.idx = rng.integers(0, n, size=(resamples, n)) if n > 0 else np.zeros((0, 0), int)

    def _interval(self, values: np.ndarray) -> list[float]:
        if self.n == 0:
            return [float("nan"), float("nan")]
        means = values[self.idx].mean(axis=1)
        tail = (1.0 - self.level) / 2.0 * 100.0
        lo, hi = np.percentile(means, [tail, 100.0 - tail])
        return [float(lo), float(hi)]

    def interval(self, values: np.ndarray) -> list[float]:
        """Percentile interval of the mean of ``values``."""
        return self._interval(np.asarray(values, dtype=np.float64))

    def diff(self, a: np.ndarray, b: np.ndarray) -> dict[str, Any]:
        """Mean of ``a - b`` with its paired interval."""
        d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
        return {"diff": float(d.mean()) if d.size else float("nan"), "ci": self._interval(d)}

