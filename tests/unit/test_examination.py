"""Position propensities (heaprank/model/examination.py): a position-based click model fitted by
EM finds the examination curve that made a log, relative to rank 1, and the reject curve built
from it is a finite weight in [FLOOR, 1] at every rank, the log curve past the fitted ranks."""

from __future__ import annotations

import math

import numpy as np
import pytest

from heaprank.model.examination import FLOOR, MIN_SHOWN, fit_pbm, log_weight, reject_curve

#: How closely the fitted curve must recover the true one (max absolute error over ranks 1-10)
#: from 10,000 impressions of 10 items: measured 0.015-0.030 on seeds 1-5 (0.015-0.080 from
#: 3,000, where rank 1's own noise dominates).
TOLERANCE = 0.04


def simulated(theta: np.ndarray, n: int, seed: int, n_groups: int = 40,
              confounded: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` impressions of ``len(theta)`` items: each item of a random group (usefulness
    ``gamma_g`` drawn from Beta(1, 3)), the likelier-useful groups shown higher when
    ``confounded`` (as a ranker would), used when its rank is examined (``theta_r``) and it is
    useful. Returns (ranks, groups, used), one entry per shown item."""
    rng = np.random.default_rng(seed)
    gamma = rng.beta(1.0, 3.0, n_groups)
    k = len(theta)
    groups = rng.integers(n_groups, size=(n, k))
    if confounded:
        noisy = gamma[groups] + rng.normal(0.0, 0.3, (n, k))
        groups = np.take_along_axis(groups, np.argsort(-noisy, axis=1), axis=1)
    used = (rng.random((n, k)) < theta) & (rng.random((n, k)) < gamma[groups])
    ranks = np.tile(np.arange(1, k + 1), n)
    return ranks, groups.ravel(), used.ravel()


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("power", [0.7, 1.0])
def test_the_fitted_curve_recovers_a_known_examination_curve(seed, power):
    true = 1.0 / np.arange(1, 11) ** power
    fit = fit_pbm(*simulated(true, 10_000, seed))
    assert fit is not None and fit.theta[0] == 1.0 and len(fit.theta) == 10
    assert np.abs(fit.theta - true).max() < TOLERANCE
    assert fit.shown.tolist() == [10_000] * 10


def test_ranking_by_usefulness_alone_would_not_recover_it():
    """The control: the click rate by rank (what the fit corrects) falls much faster than the
    examination curve, since the ranker shows the useful groups first."""
    true = 1.0 / np.arange(1, 11) ** 0.7
    ranks, groups, used = simulated(true, 10_000, 1)
    rate = np.bincount(ranks - 1, used) / np.bincount(ranks - 1)
    assert np.abs(rate / rate[0] - true).max() > 2 * TOLERANCE


def test_no_feedback_or_no_used_item_fits_nothing():
    empty = np.array([], dtype=np.int64)
    assert fit_pbm(empty, empty, empty.astype(bool)) is None
    ranks = np.tile(np.arange(1, 6), 100)
    assert fit_pbm(ranks, np.zeros_like(ranks), np.zeros(len(ranks), bool)) is None


def test_too_few_observations_at_rank_1_fits_nothing():
    ranks = np.tile(np.arange(1, 4), MIN_SHOWN - 1)
    assert fit_pbm(ranks, np.zeros_like(ranks), np.ones(len(ranks), bool)) is None


def test_every_item_used_is_every_rank_examined():
    ranks = np.tile(np.arange(1, 6), 200)
    fit = fit_pbm(ranks, ranks % 3, np.ones(len(ranks), bool))
    assert fit is not None
    assert np.allclose(fit.theta, 1.0, atol=0.01)


def test_ranks_the_log_rarely_shows_are_not_fitted():
    ranks = np.concatenate([np.tile(np.arange(1, 6), 200), np.arange(6, 9)])
    used = np.random.default_rng(0).random(len(ranks)) < 0.3
    fit = fit_pbm(ranks, np.zeros_like(ranks), used)
    assert fit is not None and len(fit.theta) == 5 and fit.shown.tolist() == [200] * 5


def test_the_reject_curve_extends_the_fitted_ranks_along_the_log_curve():
    curve = reject_curve([1.0, 0.5, 0.3], 8)
    assert curve[:3] == [1.0, 0.5, 0.3]
    for r in range(4, 9):
        assert curve[r - 1] == pytest.approx(0.3 * log_weight(r) / log_weight(3))
    assert all(a >= b for a, b in zip(curve, curve[1:]))


def test_the_reject_curve_is_finite_and_in_floor_to_1():
    curve = reject_curve([1.0, math.nan, 1.7, 0.0, -2.0, math.inf], 300)
    assert all(math.isfinite(w) and FLOOR <= w <= 1.0 for w in curve)
    assert reject_curve([], 4) == [log_weight(r) for r in range(1, 5)]


def test_a_fit_never_returns_nan():
    rng = np.random.default_rng(5)
    ranks = rng.integers(1, 4, 400)
    fit = fit_pbm(ranks, np.zeros_like(ranks), ranks == 1)  # only rank 1 ever used
    assert fit is not None and np.isfinite(fit.theta).all()
    assert fit.theta[0] == 1.0 and (fit.theta[1:] <= 0.05).all()


def test_mismatched_or_invalid_arrays_are_refused_naming_them():
    with pytest.raises(ValueError, match="ranks, groups, used"):
        fit_pbm(np.array([1, 2]), np.array([0]), np.array([True, False]))
    with pytest.raises(ValueError, match="ranks"):
        fit_pbm(np.array([0, 1]), np.array([0, 0]), np.array([True, False]))
