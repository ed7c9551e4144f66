"""The impression log read as choices: flat arrays, the penalised conditional logit, and the
ranking metrics of re-ordering logged impressions. The machinery of :mod:`heaprank.learning.tuning`.

Each used item of an impression is one choice among itself and the shown items that were not
used; an item's utility is the ranking's own log score ``sum_s w_s log s + log rules``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields

import numpy as np
from scipy.optimize import minimize

from .._time import DAY_S
from ..config import Weights
from ..errors import InputTypeError
from ..model.signals import LOGGED
from ..records import Impression
from ..state import codec

#: The impression columns tuning and replay read (what ``Reranker.rerank`` stores).
LOG_COLUMNS = ("relevance", "age_days", "importance", "usefulness", "rules")
#: Columns an impression carries only when their signal counted (a weight above 0, the
#: Ebbinghaus recency kernel). Read when every usable impression has them: a signal that was not
#: computed for part of the log has no value there to fit on. A stored ``recency`` (the
#: Ebbinghaus kernel's) replaces the one recomputed from the age, and fixes the half-life.
OPTIONAL_COLUMNS = (*LOGGED, "recency")
#: Upper bound of a fitted weight: far past any sensible exponent, it only keeps a log whose
#: choices one signal separates perfectly from running off to infinity.
MAX_WEIGHT = 20.0
HALF_LIFE_BOUNDS_S = (3600.0, 100 * 365 * DAY_S)
_LN2 = math.log(2.0)


# ------------------------------------------------------------------------------- the log

class ChoiceLog:
    """The usable logged impressions as flat arrays, oldest first (by the rerank's time).

    Usable: it carries the signal columns (an explicit ``feedback(shown=...)`` records none),
    valid values, at least one used and one not-used item. The others are counted in
    ``skipped`` by reason.
    """

    def __init__(self, impressions: Iterable[Impression]) -> None:
        self.skipped = {"no_signals": 0, "no_use": 0, "all_used": 0, "invalid": 0}
        #: Graded labels in the log (usable impressions or not): items labelled ``outdated``
        #: or ``wrong``. In a choice both are shown items that were not used.
        self.labels = {"outdated": 0, "wrong": 0}
        names: dict[str, int] = {}
        times: list[float] = []
        owners: list[int] = []
        qtypes: dict[str, int] = {}
        kinds: list[int] = []
        blocks: list[np.ndarray] = []
        verdicts: list[np.ndarray] = []
        usable: list[Impression] = []
        for imp in impressions:
            if not isinstance(imp, Impression):
                raise InputTypeError(f"impressions: expected Impression objects, got "
                                     f"{type(imp).__name__}")
            if imp.verdicts and max(imp.verdicts) > codec.IGNORED:
                self.labels["outdated"] += imp.verdicts.count(codec.OUTDATED)
                self.labels["wrong"] += imp.verdicts.count(codec.WRONG)
            reason = self._unusable(imp)
            if reason:
                self.skipped[reason] += 1
                continue
            usable.append(imp)
        read = LOG_COLUMNS + tuple(c for c in OPTIONAL_COLUMNS
                                   if usable and all(c in imp.signal_names for imp in usable))
        for imp in usable:
            cols = [imp.signal_names.index(c) for c in read]
            blocks.append(np.asarray(imp.signals, dtype=np.float64)[:, cols])
            verdicts.append(np.asarray(imp.verdicts, dtype=np.int8))
            times.append(imp.time)
            owners.append(names.setdefault(imp.namespace, len(names)))
            kinds.append(qtypes.setdefault(imp.qtype, len(qtypes)))
        order = np.argsort(np.asarray(times, dtype=np.float64), kind="stable")
        self.namespaces = list(names)
        self.time = np.asarray(times, dtype=np.float64)[order]
        self.owner = np.asarray(owners, dtype=np.intp)[order]
        #: Each impression's question type, as an index into ``qtypes``.
        self.qtypes = list(qtypes)
        self.qtype = np.asarray(kinds, dtype=np.intp)[order]
        sizes = np.array([len(blocks[i]) for i in order.tolist()], dtype=np.intp)
        self.start = np.concatenate([[0], np.cumsum(sizes)]).astype(np.intp)
        width = len(read)
        data = np.concatenate([blocks[i] for i in order.tolist()]) if blocks else np.empty((0, width))
        self.columns = {c: data[:, k] for k, c in enumerate(read)}
        self.used = (np.concatenate([verdicts[i] for i in order.tolist()]) == codec.USED) \
            if verdicts else np.empty(0, dtype=bool)
        self.item_owner = np.repeat(np.arange(len(sizes)), sizes)  # impression of each item
        self.position = np.arange(len(self.used)) - self.start[self.item_owner]

    @staticmethod
    def _unusable(imp: Impression) -> str:
        if not set(LOG_COLUMNS) <= set(imp.signal_names) or len(imp.signals) != len(imp.ids):
            return "no_signals"
        used = [v == codec.USED for v in imp.verdicts]
        if not any(used):
            return "no_use"
        if len(used) != len(imp.ids):
            return "invalid"
        if all(used):
            return "all_used"
        values = np.asarray(imp.signals, dtype=np.float64)
        positive = values[:, [imp.signal_names.index(c) for c in LOG_COLUMNS + OPTIONAL_COLUMNS
                              if c != "age_days" and c in imp.signal_names]]
        age = values[:, imp.signal_names.index("age_days")]
        if not (np.isfinite(positive).all() and (positive > 0).all()) or np.isinf(age).any():
            return "invalid"
        return ""

    def __len__(self) -> int:
        return len(self.time)

    def log_signals(self, weights: Sequence[str], half_life_s: float, recency_floor: float,
                    rows: np.ndarray) -> np.ndarray:
        """Per item of ``rows``, ``log`` of each weight's signal (0 for a weight the log does
        not carry: it cannot be tuned or replayed, and is the same for every item)."""
        out = np.zeros((len(rows), len(weights)))
        for k, name in enumerate(weights):
            if name == "recency" and "recency" not in self.columns:
                out[:, k] = log_recency(self.columns["age_days"][rows], half_life_s,
                                         recency_floor)[0]
            elif name in self.columns:
                out[:, k] = np.log(self.columns[name][rows])
        return out

    def choices(self, impressions: np.ndarray) -> Choices:
        """The choice groups of these impressions: per used item, itself first, then the
        impression's items that were not used."""
        rows: list[np.ndarray] = []
        for i in impressions.tolist():
            items = np.arange(self.start[i], self.start[i + 1])
            chosen = self.used[items]
            others = items[~chosen]
            rows.extend(np.concatenate([[u], others]) for u in items[chosen].tolist())
        return Choices(rows)


def log_recency(age_days: np.ndarray, half_life_s: float,
                 floor: float) -> tuple[np.ndarray, np.ndarray]:
    """``log recency`` as :func:`heaprank.scoring.signals.recency` computes it (unknown age: 0), and its
    derivative in ``log half_life``."""
    unknown = np.isnan(age_days)
    age = np.where(unknown, 0.0, np.maximum(age_days, 0.0) * DAY_S)
    decay = np.exp2(-age / half_life_s)
    rec = np.maximum(floor + (1.0 - floor) * decay, 1e-300)
    slope = (1.0 - floor) * decay * (age * _LN2 / half_life_s) / rec
    return np.where(unknown, 0.0, np.log(rec)), np.where(unknown, 0.0, slope)


class Choices:
    """Choice groups as one flat array of item rows; the chosen item leads its group."""

    def __init__(self, groups: list[np.ndarray]) -> None:
        sizes = np.array([len(g) for g in groups], dtype=np.intp)
        self.rows = np.concatenate(groups).astype(np.intp) if groups else np.empty(0, np.intp)
        self.first = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.intp) if groups \
            else np.empty(0, np.intp)
        self.group = np.repeat(np.arange(len(groups)), sizes)

    def __len__(self) -> int:
        return len(self.first)

    def log_likelihood(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per group ``log P(chosen)`` and per row its probability, for utilities ``u`` per row."""
        top = np.maximum.reduceat(u, self.first)
        e = np.exp(u - top[self.group])
        total = np.add.reduceat(e, self.first)
        return u[self.first] - top - np.log(total), e / total[self.group]


# ---------------------------------------------------------------------------- the fit

@dataclass(frozen=True, slots=True)
class Penalty:
    """How a fit is held: the L2 ``shrinkage`` toward its target, the recency floor its
    recency is computed with, whether the half-life is fitted too, and which weights may move
    (``only``; None: every weight the log carries)."""

    shrinkage: float
    recency_floor: float
    fit_half_life: bool
    only: tuple[str, ...] | None = None


class LogitFit:
    """One penalised conditional-logit fit: which parameters move and what they shrink to.

    Args:
        log, impressions: The log, and which of its impressions this fit reads.
        names: Every weight, in :class:`Weights` order; those the log carries are tuned, the
            others stay at their value in ``start``.
        start: Every weight's current value.
        target: What the tuned weights shrink toward (every weight, Weights order), and the
            half-life recency is computed with (and shrinks toward when fitted).
        penalty: The shrinkage, recency floor and whether the half-life is fitted.
    """

    def __init__(self, log: ChoiceLog, impressions: np.ndarray, *, names: Sequence[str],
                 start: np.ndarray, target: tuple[np.ndarray, float], penalty: Penalty) -> None:
        weights_target, half_life_s = target
        shrinkage, recency_floor, fit_half_life = (penalty.shrinkage, penalty.recency_floor,
                                                   penalty.fit_half_life)
        self.choices = log.choices(impressions)
        self.names = tuple(names)
        self.tuned = np.array([k for k, n in enumerate(names)
                               if (n == "recency" or n in log.columns)
                               and (penalty.only is None or n in penalty.only)], dtype=np.intp)
        self.fixed = np.asarray(start, dtype=np.float64)
        # A stored recency (the Ebbinghaus kernel's) has no half-life to fit.
        self.fit_half_life = fit_half_life and "recency" in self.names \
            and "recency" not in log.columns and (penalty.only is None or "recency" in penalty.only)
        self.target = np.asarray(weights_target, dtype=np.float64)[self.tuned]
        if self.fit_half_life:
            self.target = np.append(self.target, math.log(half_life_s))
        self.shrinkage = shrinkage
        self.recency_floor = recency_floor
        self.half_life_s = half_life_s
        rows = self.choices.rows
        self.x = log.log_signals(self.names, half_life_s, recency_floor, rows)[:, self.tuned]
        self.age = log.columns["age_days"][rows]
        self.offset = np.log(log.columns["rules"][rows])
        tuned_names = [self.names[k] for k in self.tuned.tolist()]
        self.recency = tuned_names.index("recency") if "recency" in tuned_names else -1

    def unpack(self, theta: np.ndarray) -> tuple[np.ndarray, float]:
        """Every weight (Weights order) and the half-life that ``theta`` stands for."""
        weights = self.fixed.copy()
        weights[self.tuned] = theta[:len(self.tuned)]
        return weights, (math.exp(theta[-1]) if self.fit_half_life else self.half_life_s)

    def objective(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        """Penalised negative log-likelihood and its gradient."""
        w = theta[:len(self.tuned)]
        x = self.x
        if self.fit_half_life:
            x = x.copy()
            x[:, self.recency], drec = log_recency(self.age, math.exp(theta[-1]),
                                                    self.recency_floor)
        ll, p = self.choices.log_likelihood(x @ w + self.offset)
        first = self.choices.first
        grad = -(x[first].sum(axis=0) - p @ x)
        if self.fit_half_life:
            grad = np.append(grad, -w[self.recency] * (drec[first].sum() - p @ drec))
        diff = theta - self.target
        return float(-ll.sum() + 0.5 * self.shrinkage * diff @ diff), grad + self.shrinkage * diff

    def bounds(self) -> list[tuple[float, float]]:
        out = [(0.0, MAX_WEIGHT)] * len(self.tuned)
        if self.fit_half_life:
            out.append((math.log(HALF_LIFE_BOUNDS_S[0]), math.log(HALF_LIFE_BOUNDS_S[1])))
        return out

    def solve(self) -> tuple[np.ndarray, np.ndarray | None]:
        """The fitted parameters and their approximate covariance (None if it is not finite)."""
        low, high = np.array(self.bounds()).T
        found = minimize(self.objective, np.clip(self.target, low, high), jac=True,
                         method="L-BFGS-B", bounds=self.bounds())
        theta = np.asarray(found.x, dtype=np.float64)
        if not np.isfinite(theta).all():
            return np.clip(self.target, low, high), None
        return theta, self._covariance(theta)

    def _covariance(self, theta: np.ndarray) -> np.ndarray | None:
        """The inverse Hessian, by central differences of the analytic gradient."""
        n = len(theta)
        hessian = np.empty((n, n))
        for k in range(n):
            step = 1e-5 * (1.0 + abs(theta[k]))
            up, down = theta.copy(), theta.copy()
            up[k] += step
            down[k] -= step
            hessian[:, k] = (self.objective(up)[1] - self.objective(down)[1]) / (2 * step)
        hessian = (hessian + hessian.T) / 2
        if not np.isfinite(hessian).all():
            return None
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            cov = np.linalg.pinv(hessian)  # a near-singular Hessian: checked just below
        return cov if np.isfinite(cov).all() and (np.diag(cov) >= 0).all() else None


# ------------------------------------------------------------------------- evaluation

def weight_names() -> tuple[str, ...]:
    return tuple(f.name for f in fields(Weights))


def weight_vector(weights: Weights) -> np.ndarray:
    return np.array([float(getattr(weights, n)) for n in weight_names()])


def items_of(log: ChoiceLog, impressions: np.ndarray) -> np.ndarray:
    """The item rows of these impressions, impression by impression."""
    if not len(impressions):
        return np.empty(0, dtype=np.intp)
    return np.concatenate([np.arange(log.start[i], log.start[i + 1]) for i in impressions.tolist()])


def log_scores(log: ChoiceLog, rows: np.ndarray, weights: np.ndarray, half_life_s: float,
            recency_floor: float) -> np.ndarray:
    """The log score each item of ``rows`` gets under these weights (the ranking's own)."""
    x = log.log_signals(weight_names(), half_life_s, recency_floor, rows)
    return x @ weights + np.log(log.columns["rules"][rows])


def rank_metrics(log: ChoiceLog, rows: np.ndarray, score: np.ndarray,
                  ks: Sequence[int]) -> tuple[float, dict[int, float]]:
    """MRR of the first used item and used@k (the share of an impression's used items placed in
    its top k), each averaged over impressions, when every impression's shown items are
    re-ordered by ``score`` (ties keep the logged order). Scores are rounded to 1e-6 first:
    float32 storage must not reorder what the ranking had tied or all but tied."""
    used, rank, first = _reordered(log, rows, score)
    best = np.minimum.reduceat(np.where(used, rank, np.iinfo(np.intp).max), first)
    n_used = np.add.reduceat(used.astype(np.float64), first)
    used_at = {k: float(np.mean(np.add.reduceat((used & (rank <= k)).astype(np.float64), first)
                                / n_used)) for k in ks}
    return float(np.mean(1.0 / best)), used_at


def _reordered(log: ChoiceLog, rows: np.ndarray,
               score: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The items of ``rows`` re-ordered by ``score`` within their impressions (ties keep the
    logged order; scores rounded to 1e-6): whether each was used, its new rank from 1, and
    where each impression starts."""
    owner = log.item_owner[rows]
    order = np.lexsort((log.position[rows], -np.round(score, 6), owner))
    owner = owner[order]
    used = log.used[rows][order]
    first = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    rank = np.arange(len(order)) - np.repeat(first, np.diff(np.r_[first, len(order)])) + 1
    return used, rank, first


def reciprocal_ranks(log: ChoiceLog, impressions: np.ndarray, weights: np.ndarray,
                     half_life_s: float, recency_floor: float) -> np.ndarray:
    """Per impression, the reciprocal rank of its first used item with its shown items
    re-ordered by ``weights`` (as :func:`rank_metrics`)."""
    rows = items_of(log, impressions)
    used, rank, first = _reordered(log, rows, log_scores(log, rows, weights, half_life_s,
                                                         recency_floor))
    return 1.0 / np.minimum.reduceat(np.where(used, rank, np.iinfo(np.intp).max), first)


def heldout_scores(log: ChoiceLog, impressions: np.ndarray, weights: np.ndarray, half_life_s: float,
                    recency_floor: float) -> tuple[float, float]:
    """Mean log-likelihood per choice and MRR of these impressions under these weights."""
    rows = items_of(log, impressions)
    score = log_scores(log, rows, weights, half_life_s, recency_floor)
    choices = log.choices(impressions)
    ll, _ = choices.log_likelihood(log_scores(log, choices.rows, weights, half_life_s,
                                              recency_floor))
    return float(ll.mean()), rank_metrics(log, rows, score, ())[0]
