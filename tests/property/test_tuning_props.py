"""Tuning and replay on arbitrary logs: never a NaN or a negative weight, never a crash."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from hypothesis import event, given
from hypothesis import strategies as st

from heaprank import Config, Retention, Weights
from heaprank.learning.tuning import replay, tune
from heaprank.records import Impression
from heaprank.state import codec

COLUMNS = ("relevance", "age_days", "importance", "usefulness", "rules")


@st.composite
def logs(draw: st.DrawFn) -> list[Impression]:
    """Logs small (refused) and large enough to fit with a low ``min_impressions``, drawn by
    numpy from a seed under knobs Hypothesis explores: extreme values, unknown ages, ties in
    signals and in time, verdicts of every kind."""
    n = draw(st.one_of(st.integers(0, 10), st.integers(60, 120)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    low = draw(st.sampled_from([1e-9, 1e-3, 0.5]))  # smallest relevance and usefulness
    nan_age = draw(st.sampled_from([0.0, 0.5, 1.0]))
    tied = draw(st.booleans())  # every item of an impression with the same signals
    same_time = draw(st.booleans())
    p_used = draw(st.sampled_from([0.25, 0.5, 0.75]))
    out = []
    for i in range(n):
        k = int(rng.integers(1, 7))
        m = 1 if tied else k
        rows = np.column_stack([
            rng.uniform(low, 1.0, m), np.where(rng.uniform(size=m) < nan_age, np.nan,
                                               rng.uniform(-1.0, 1e5, m)),
            rng.uniform(0.05, 3.0, m), rng.uniform(low, 1.0, m), rng.choice([1.0, 0.1], m)])
        rows = np.repeat(rows, k // m, axis=0)
        verdicts = np.where(rng.uniform(size=k) < p_used, codec.USED,
                            rng.choice([codec.IGNORED, codec.OPEN], k))
        out.append(Impression(
            recall_id=f"{i:016x}", namespace=str(rng.choice(["a", "b"])), qtype="when",
            time=0.0 if same_time else float(rng.uniform(0, 1e6)), time_explicit=True,
            ids=tuple(f"d{j}" for j in range(k)), slots=((),) * k, signal_names=COLUMNS,
            signals=tuple(map(tuple, rows.tolist())), verdicts=tuple(verdicts.tolist())))
    return out


def _finite_fit(fit) -> None:
    assert all(math.isfinite(w) and w >= 0 for w in fit.weights.as_tuple())
    assert math.isfinite(fit.half_life_s) and fit.half_life_s > 0
    if fit.fitted is not None:
        assert all(math.isfinite(w) and w >= 0 for w in fit.fitted.as_tuple())
        assert math.isfinite(fit.fitted_half_life_s) and fit.fitted_half_life_s > 0
        for heldout in (fit.heldout_loglik_before, fit.heldout_loglik_after):
            assert math.isfinite(heldout) and heldout <= 0
        assert 0 < fit.heldout_mrr_before <= 1 and 0 < fit.heldout_mrr_after <= 1
    for low, high in fit.intervals.values():
        assert 0 <= low <= high and math.isfinite(high)


@given(log=logs(), fit_half_life=st.booleans(),
       shrinkage=st.sampled_from([0.0, 0.01, 1.0, 100.0]), holdout=st.sampled_from([0.2, 0.4]),
       floor=st.sampled_from([0.0, 0.9]),
       start=st.builds(Weights, relevance=st.floats(0, 5), recency=st.floats(0, 5),
                       importance=st.floats(0, 5), usefulness=st.floats(0, 5)))
def test_tune_never_returns_nan_or_negative_weights(log, fit_half_life, shrinkage, holdout, floor,
                                                     start):
    config = Config(weights=start, retention=Retention(recency_floor=floor))
    result = tune(log, config, namespace="*", fit_half_life=fit_half_life, shrinkage=shrinkage,
                  namespace_shrinkage=shrinkage, holdout=holdout, min_impressions=1)
    event("pooled fit" if result.pooled.fitted is not None else "pooled refused")
    for fit in (result.pooled, *result.namespaces.values()):
        _finite_fit(fit)
    assert result.config == replace(config,
                                    weights=result.pooled.weights,
                                    retention=replace(config.retention,
                                                      half_life_s=result.pooled.half_life_s))
    usable = result.pooled.impressions + sum(result.skipped.values())
    assert usable == len(log)


@given(log=logs())
def test_replay_metrics_are_shares(log):
    result = replay(log, Config())
    if result.impressions == 0:
        assert result.mrr is None
        return
    for mrr, used_at in ((result.mrr, result.used_at), (result.logged_mrr, result.logged_used_at)):
        assert 0 < mrr <= 1
        assert 0 <= used_at[1] <= used_at[3] <= used_at[5] <= 1
