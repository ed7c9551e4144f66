"""Fit the signal weights to the impression log, and replay any config on it.

Every impression that received feedback holds, per shown item, the signal values its ranking used
(relevance, age in days, importance, usefulness, rule multiplier) and the verdict. Read as choices,
each used item ``j`` was picked among itself and the shown items that were not used::

    P(j | shown) = exp(u_j) / sum_{i in {j} + not used} exp(u_i),   u_i = sum_s w_s log s_i + log rules_i

which is the ranking's own log score, so maximising this conditional logit fits the exponents
``w_s`` the reranker multiplies signals with. Recency is recomputed from the age with the
half-life, so the half-life can be fitted too. Penalty: ``shrinkage / 2 * |w - w_0|^2`` toward
the current weights (and ``log`` half-life toward the current one); a namespace's fit is pulled
toward the pooled fit instead, with ``namespace_shrinkage``. The design note is docs/design.md,
"Tuning and replay".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from ..config import Config, Weights
from ..errors import InputError, InputTypeError
from ..records import Impression
from .choices import (
    ChoiceLog,
    LogitFit,
    Penalty,
    heldout_scores,
    items_of,
    log_scores,
    rank_metrics,
    weight_names,
    weight_vector,
)
from .guard import TypeCheck, check_types, held_weights

#: A fit needs at least this many usable impressions by default (``min_impressions``).
MIN_IMPRESSIONS = 50
#: ... and at least this many of them in the held-out (later) part, to check it.
MIN_HELDOUT = 10
Z90 = 1.6448536269514722  # the standard normal's 95th percentile: a two-sided 90% interval


# ---------------------------------------------------------------------------- results

@dataclass(frozen=True, slots=True)
class TuneFit:
    """One fit: the pooled one (``namespace`` None) or one namespace's.

    Attributes:
        moved: Whether the fit replaces the current weights; ``reason`` says why or why not.
        weights, half_life_s: What applies: the fitted values if it moved, else the current.
        fitted, fitted_half_life_s: What the fit found on the whole log (None with too little
            data to fit at all).
        intervals: Approximate 90% intervals of the fitted values (from the inverse Hessian of
            the penalised likelihood; weights clipped at 0), by weight name and ``half_life_s``.
        impressions, choices: Usable impressions in this fit, and their used items.
        heldout_impressions: How many of them fall in the held-out (later) part.
        heldout_loglik_before, heldout_loglik_after: Mean log-likelihood per choice on the
            held-out part, under the current weights and under those fitted on the earlier part.
        heldout_mrr_before, heldout_mrr_after: MRR of the first used item, likewise.
        types: The pooled fit's held-out check per question type (:mod:`.guard`); empty for
            a namespace's fit.
    """

    namespace: str | None
    moved: bool
    reason: str
    weights: Weights
    half_life_s: float
    fitted: Weights | None = None
    fitted_half_life_s: float | None = None
    intervals: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    impressions: int = 0
    choices: int = 0
    heldout_impressions: int = 0
    heldout_loglik_before: float | None = None
    heldout_loglik_after: float | None = None
    heldout_mrr_before: float | None = None
    heldout_mrr_after: float | None = None
    types: Mapping[str, TypeCheck] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        for name in ("weights", "fitted"):
            if out[name] is not None:
                out[name] = {n: getattr(out[name], n) for n in weight_names()}
        out["intervals"] = {k: list(v) for k, v in self.intervals.items()}
        out["types"] = {q: c.to_dict() for q, c in self.types.items()}
        return out


@dataclass(frozen=True, slots=True)
class TuneResult:
    """What :meth:`Reranker.tune` found.

    Attributes:
        start: The config tuning started from (the reranker's when it ran).
        config: The tuned config: the current one with the chosen fit's weights and half-life
            if that fit moved, else the current one unchanged (learning fields never change).
        fit: The chosen fit: the namespace's for ``tune(namespace=ns)``, else the pooled one.
        pooled: The fit over every namespace's impressions.
        namespaces: The per-namespace fits (``namespace="*"``: all; a namespace: its own).
        skipped: Logged impressions tuning could not use, by reason: ``no_signals`` (recorded by
            an explicit ``feedback(shown=...)``, which stores no signal values), ``no_use``
            (feedback, but nothing used), ``all_used`` (nothing to prefer the used items to),
            ``invalid`` (a signal value that is not finite and positive).
        labels: The graded labels in the log: items labelled ``outdated`` and ``wrong``
            (``feedback(labels=...)``); in a choice they are shown items that were not used.
    """

    start: Config
    config: Config
    fit: TuneFit
    pooled: TuneFit
    namespaces: Mapping[str, TuneFit]
    skipped: Mapping[str, int]
    labels: Mapping[str, int] = field(default_factory=dict)

    @property
    def moved(self) -> bool:
        return self.fit.moved

    def to_dict(self) -> dict[str, Any]:
        return {"moved": self.moved, "reason": self.fit.reason, "start": self.start.to_dict(),
                "config": self.config.to_dict(),
                "fit": self.fit.to_dict(), "pooled": self.pooled.to_dict(),
                "namespaces": {ns: fit.to_dict() for ns, fit in self.namespaces.items()},
                "skipped": dict(self.skipped), "labels": dict(self.labels)}


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """A config replayed on the log: each usable impression's shown items re-ordered.

    Attributes:
        impressions, choices: Usable impressions and their used items.
        mrr, used_at: Under the replayed config (None with no usable impression); ``used_at[k]``
            is the mean share of an impression's used items placed in its top k.
        logged_mrr, logged_used_at: The same for the order that was actually shown.
        skipped: Impressions that could not be replayed, by reason (as in :class:`TuneResult`).
    """

    impressions: int
    choices: int
    mrr: float | None
    used_at: Mapping[int, float]
    logged_mrr: float | None
    logged_used_at: Mapping[int, float]
    skipped: Mapping[str, int]

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        for name in ("used_at", "logged_used_at", "skipped"):
            out[name] = dict(out[name])
        return out


# ------------------------------------------------------------------------- tune, replay

@dataclass(frozen=True, slots=True)
class _Settings:
    fit_half_life: bool
    holdout: float
    min_impressions: int
    recency_floor: float
    only: tuple[str, ...] | None = None
    #: Question types with weights of their own, which the pooled fit does not move.
    own: frozenset[str] = frozenset()


def _fit_scope(log: ChoiceLog, scope: np.ndarray, heldout: np.ndarray, namespace: str | None,
               start: Config, targets: tuple[tuple[np.ndarray, float], tuple[np.ndarray, float]],
               shrinkage: float, settings: _Settings) -> tuple[TuneFit, tuple[np.ndarray, float]]:
    """The fit of the impressions in ``scope``, checked on those also in ``heldout``; and what
    the earlier part alone would apply (the target a namespace's earlier part shrinks toward).
    ``targets``: what the earlier part's fit and the whole scope's fit shrink toward."""
    train_target, final_target = targets
    current = (weight_vector(start.weights), start.retention.half_life_s)
    everything = np.flatnonzero(scope)
    early, late = np.flatnonzero(scope & ~heldout), np.flatnonzero(scope & heldout)
    base = TuneFit(namespace=namespace, moved=False, reason="", weights=start.weights,
                   half_life_s=start.retention.half_life_s, impressions=len(everything),
                   choices=int(log.used[items_of(log, everything)].sum()),
                   heldout_impressions=len(late))
    if len(everything) < settings.min_impressions:
        return replace(base, reason=f"too little data: {len(everything)} usable impressions, "
                                    f"at least {settings.min_impressions} needed"), current
    if min(len(early), len(late)) < MIN_HELDOUT:
        return replace(base, reason=f"too little data on one side of the time split "
                                    f"({len(early)} earlier, {len(late)} held out; at least "
                                    f"{MIN_HELDOUT} each needed)"), current

    def problem(impressions: np.ndarray, target: tuple[np.ndarray, float]) -> LogitFit:
        return LogitFit(log, impressions, names=weight_names(), start=current[0],
                        target=target, penalty=Penalty(shrinkage, settings.recency_floor,
                                                       settings.fit_half_life, settings.only))

    early_fit = problem(early, train_target)
    trained = early_fit.unpack(early_fit.solve()[0])
    ll_before, mrr_before = heldout_scores(log, late, *current, settings.recency_floor)
    ll_after, mrr_after = heldout_scores(log, late, *trained, settings.recency_floor)
    whole = problem(everything, final_target)
    theta, cov = whole.solve()
    weights, half_life = whole.unpack(theta)
    fitted = Weights(**{n: max(0.0, float(w)) for n, w in zip(weight_names(), weights)})
    moved = ll_after > ll_before
    types = {} if namespace is not None else check_types(
        log, late, start, trained if moved else current, settings.own)
    reason = ("the fit on the earlier part predicts the held-out part better" if moved else
              "the fit on the earlier part does not predict the held-out part better; "
              "weights unchanged")
    fit = replace(base, moved=moved, reason=reason, fitted=fitted, fitted_half_life_s=half_life,
                  intervals=_intervals(whole, theta, cov), heldout_loglik_before=ll_before,
                  heldout_loglik_after=ll_after, heldout_mrr_before=mrr_before,
                  heldout_mrr_after=mrr_after, types=types)
    if moved:
        fit = replace(fit, weights=fitted, half_life_s=half_life)
    return fit, (trained if moved else current)


#: exp() of more than this overflows a float: a half-life interval past it is not reported.
_MAX_LOG_HALF_LIFE = 700.0


def _intervals(problem: LogitFit, theta: np.ndarray,
               cov: np.ndarray | None) -> dict[str, tuple[float, float]]:
    if cov is None:
        return {}
    sd = np.sqrt(np.diag(cov))
    # A value the log barely constrains has a huge (or non-finite) spread: it gets no interval
    # rather than an infinite one.
    out = {problem.names[k]: (max(0.0, float(theta[j] - Z90 * sd[j])), float(theta[j] + Z90 * sd[j]))
           for j, k in enumerate(problem.tuned.tolist()) if math.isfinite(theta[j] + Z90 * sd[j])}
    if problem.fit_half_life:
        low, high = theta[-1] - Z90 * sd[-1], theta[-1] + Z90 * sd[-1]
        if math.isfinite(high) and high < _MAX_LOG_HALF_LIFE:
            out["half_life_s"] = (math.exp(low), math.exp(high))
    return out


def _check_settings(shrinkage: float, namespace_shrinkage: float, holdout: float,
                    min_impressions: int) -> None:
    for name, value in (("shrinkage", shrinkage), ("namespace_shrinkage", namespace_shrinkage),
                        ("holdout", holdout)):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InputTypeError(f"{name}: expected a number, got {type(value).__name__}")
        if not (math.isfinite(value) and value >= 0):
            raise InputError(f"{name}: must be finite and >= 0, got {value!r}")
    if not 0 < holdout < 1:
        raise InputError(f"holdout: must be in (0, 1), got {holdout!r}")
    if isinstance(min_impressions, bool) or not isinstance(min_impressions, int):
        raise InputTypeError(f"min_impressions: expected int, got {type(min_impressions).__name__}")
    if min_impressions < 1:
        raise InputError(f"min_impressions: must be >= 1, got {min_impressions}")


def tune(impressions: Iterable[Impression] | ChoiceLog, config: Config, *,
         namespace: str | None = None,
         fit_half_life: bool = False, shrinkage: float = 1.0, namespace_shrinkage: float = 4.0,
         holdout: float = 0.2, min_impressions: int = MIN_IMPRESSIONS) -> TuneResult:
    """Fit the weights (and with ``fit_half_life`` the recency half-life) to logged impressions.

    Args:
        impressions: Impressions with feedback, of every namespace (``state.feedback_log()``),
            or a :class:`~heaprank.learning.choices.ChoiceLog` already read from them.
        config: The current config: the starting point, the shrinkage target of the pooled fit,
            and the "before" of the held-out check.
        namespace: ``None``: the pooled fit only; ``"*"``: also one fit per namespace; a
            namespace: also its own fit, which is then the chosen one.
        shrinkage: L2 penalty (a Gaussian prior's precision) toward the current weights.
        namespace_shrinkage: L2 penalty of a namespace's fit toward the pooled fit.
        holdout: The later share of the log (by the rerank's time) held out to check the fit.
        min_impressions: A fit needs this many usable impressions (and :data:`MIN_HELDOUT` on
            each side of the time split); with fewer it refuses to move.

    A fit moves only when the weights fitted on the earlier part give the held-out part a
    higher log-likelihood than the current ones; the weights it then reports are refit on the
    whole log.
    """
    if not isinstance(config, Config):
        raise InputTypeError(f"config: expected Config, got {type(config).__name__}")
    _check_settings(shrinkage, namespace_shrinkage, holdout, min_impressions)
    log = impressions if isinstance(impressions, ChoiceLog) else ChoiceLog(impressions)
    n = len(log)
    heldout = np.arange(n) >= n - int(round(holdout * n))
    settings = _Settings(bool(fit_half_life), holdout, min_impressions, config.retention.recency_floor,
                         own=frozenset(config.qtype_weights))
    current = (weight_vector(config.weights), config.retention.half_life_s)
    pooled, pooled_early = _fit_scope(log, np.ones(n, dtype=bool), heldout, None, config,
                                      (current, current), shrinkage, settings)
    per_namespace: dict[str, TuneFit] = {}
    if namespace is not None:
        wanted = sorted(log.namespaces) if namespace == "*" else [namespace]
        pooled_whole = (weight_vector(pooled.weights), pooled.half_life_s)
        for ns in wanted:
            owner = log.namespaces.index(ns) if ns in log.namespaces else -1
            per_namespace[ns] = _fit_scope(log, log.owner == owner, heldout, ns, config,
                                           (pooled_early, pooled_whole), namespace_shrinkage,
                                           settings)[0]
    chosen = per_namespace[namespace] if namespace not in (None, "*") else pooled
    tuned = replace(config,
                    weights=chosen.weights,
                    retention=replace(config.retention, half_life_s=chosen.half_life_s)) \
        if chosen.moved else config
    holds = held_weights(pooled.types, config) if chosen is pooled else {}
    if holds:  # the types the pooled fit would cost keep what they had (or relevance alone)
        tuned = replace(tuned, qtype_weights={**tuned.qtype_weights, **holds})
    return TuneResult(start=config, config=tuned, fit=chosen, pooled=pooled, namespaces=per_namespace,
                      skipped=dict(log.skipped), labels=dict(log.labels))


def pooled_fit(log: ChoiceLog, config: Config, *, shrinkage: float, holdout: float,
               min_impressions: int = MIN_IMPRESSIONS, only: tuple[str, ...] | None = None,
               own: frozenset[str] = frozenset()) -> TuneFit:
    """:func:`tune`'s pooled fit of an already read log, moving only the weights in ``only``
    (None: every weight the log carries; the half-life stays), checked per question type but
    for those in ``own`` (weights of their own). What continuous re-fitting runs
    (:mod:`heaprank.learning.refit`)."""
    _check_settings(shrinkage, 0.0, holdout, min_impressions)
    n = len(log)
    heldout = np.arange(n) >= n - int(round(holdout * n))
    settings = _Settings(False, holdout, min_impressions, config.retention.recency_floor, only, own)
    current = (weight_vector(config.weights), config.retention.half_life_s)
    return _fit_scope(log, np.ones(n, dtype=bool), heldout, None, config, (current, current),
                      shrinkage, settings)[0]


def replay(impressions: Iterable[Impression], config: Config, *,
           ks: Sequence[int] = (1, 3, 5)) -> ReplayResult:
    """Re-order each logged impression's shown items under ``config`` and score the result.

    Replays the weights, ``half_life_s`` and ``recency_floor`` (recency is recomputed from the
    logged age); relevance, importance, usefulness and rule multipliers are taken as logged.
    Reads only: the state is never touched.
    """
    if not isinstance(config, Config):
        raise InputTypeError(f"config: expected Config, got {type(config).__name__}")
    if any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in ks):
        raise InputError(f"ks: expected positive ints, got {list(ks)!r}")
    log = ChoiceLog(impressions)
    rows = np.arange(len(log.used))
    if not len(log):
        return ReplayResult(0, 0, None, {}, None, {}, dict(log.skipped))
    score = log_scores(log, rows, weight_vector(config.weights), config.retention.half_life_s,
                       config.retention.recency_floor)
    mrr, used_at = rank_metrics(log, rows, score, ks)
    logged_mrr, logged_used_at = rank_metrics(log, rows, np.zeros(len(rows)), ks)
    return ReplayResult(len(log), int(log.used.sum()), mrr, used_at, logged_mrr, logged_used_at,
                        dict(log.skipped))
