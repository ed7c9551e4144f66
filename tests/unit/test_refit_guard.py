"""The per-type guard of a re-fit: a fit that gains on average is adopted only for the question
types it does not cost; a type it would cost keeps the weights in force, or ranks by relevance
alone when those cost it too, and the held-out gain of each type is reported."""

from __future__ import annotations

import numpy as np
import pytest

from heaprank import Config, MemoryState, Refit, Reranker, Weights
from heaprank.learning import guard
from heaprank.learning.refit import FittedWeights, adopted, fit_weights
from heaprank.learning.tuning import tune
from tests.tuning_logs import DAY, NOW, record, synthetic_log

START = Weights(relevance=0.5, recency=1.0, importance=1.0, usefulness=0.0)


def _mixed(minority_usefulness: float, n_major: int = 900, n_minor: int = 300) -> list:
    """Most questions (``when``) pick items with high usefulness; the ``who`` minority picks
    them with ``minority_usefulness`` (negative: it avoids them). Interleaved in time, so
    both types have held-out impressions."""
    major = synthetic_log(n_major, usefulness=2.5, seed=1, qtype="when", step_s=60.0)
    minor = synthetic_log(n_minor, usefulness=minority_usefulness, seed=2, qtype="who",
                          step_s=60.0 * n_major / n_minor, start=NOW + 30.0)
    return sorted(major + minor, key=lambda imp: imp.time)


def test_a_fit_that_costs_a_minority_type_is_held_back_for_it():
    result = tune(_mixed(-2.5), Config(weights=START))
    types = result.pooled.types
    assert result.moved and result.config.weights.usefulness > 0.1  # the majority's pull
    assert types["when"].applies == "fit" and types["when"].mrr_fit > types["when"].mrr_in_force
    assert types["who"].applies == "kept" and types["who"].mrr_fit < types["who"].mrr_in_force
    assert result.config.qtype_weights["who"] == START  # ranks as before the fit
    assert "when" not in result.config.qtype_weights


def test_a_type_the_weights_in_force_cost_too_ranks_by_relevance_alone():
    in_force = Weights(relevance=0.5, recency=1.0, importance=1.0, usefulness=2.5)
    result = tune(_mixed(-4.0), Config(weights=in_force))
    check = result.pooled.types["who"]
    assert check.applies == "first-stage"
    assert check.mrr_in_force < check.mrr_first_stage and check.mrr_fit < check.mrr_first_stage
    held = result.config.qtype_weights["who"]
    assert held.relevance > 0 and held.usefulness == held.recency == held.importance == 0.0
    assert check.gain == 0.0  # what ranks it is the first stage's order


def test_a_type_that_agrees_with_the_majority_follows_the_fit():
    result = tune(_mixed(2.5), Config(weights=START))
    assert {t.applies for t in result.pooled.types.values()} == {"fit"}
    assert not result.config.qtype_weights
    assert all(t.gain > 0 for t in result.pooled.types.values())


def test_configured_weights_of_a_type_are_reported_not_moved():
    own = Weights(relevance=1.0, recency=0.0, importance=0.0, usefulness=0.0)
    result = tune(_mixed(-2.5), Config(weights=START, qtype_weights={"who": own}))
    assert result.pooled.types["who"].applies == "own"
    assert result.config.qtype_weights["who"] == own


def test_a_type_with_too_few_held_out_impressions_is_not_judged():
    result = tune(_mixed(-2.5, n_minor=60), Config(weights=START))
    check = result.pooled.types["who"]
    assert check.heldout < guard.MIN_TYPE_HELDOUT and check.applies == "fit"


@pytest.mark.parametrize(("diff", "expected"), [
    (np.zeros(50), False),  # no change
    (np.full(50, -0.2), True),  # a clear loss
    (np.r_[np.full(25, -0.02), np.full(25, 0.02)] - 0.001, False),  # within noise, tiny
    (np.r_[np.full(40, 0.0), np.full(10, -0.3)], True),  # a loss of 0.06 on average
    (np.full(50, 0.1), False),  # a gain
])
def test_hurt_is_a_loss_beyond_one_standard_error_or_the_tolerance(diff, expected):
    base = np.full(len(diff), 0.5)
    assert guard.hurt(base + diff, base) is expected


def test_continuous_refit_holds_the_type_and_stats_show_each_types_gain():
    state = MemoryState()
    record(state, _mixed(-2.5))
    config = Config(weights=START, refit=Refit(window=5000))
    fitted = fit_weights(state, config, 1)
    assert fitted is not None and fitted.moved
    assert set(fitted.held or {}) == {"who"} and fitted.types is not None
    assert fitted.types["who"]["applies"] == "kept" and fitted.types["when"]["gain"] > 0
    again = FittedWeights.from_json(fitted.to_json())
    assert again is not None and again.held == fitted.held and again.types == fitted.types
    Reranker(state, config=config)._refit.store_record(fitted)
    rr = Reranker(state, config=config)  # another process: adopts the stored record
    stats = rr.stats()
    assert stats["weights_fitted"]["types"]["who"]["applies"] == "kept"
    assert rr.config.qtype_weights["who"] == START


def test_a_hold_is_released_when_a_later_fit_no_longer_costs_the_type():
    held = FittedWeights(version=1, weights=START, fitted_at=NOW, moved=True, reason="",
                         held={"who": START})
    config = adopted(Config(weights=START), held)
    assert config.qtype_weights == {"who": START}
    later = FittedWeights(version=2, weights=START, fitted_at=NOW + DAY, moved=True, reason="")
    assert adopted(config, later, held_before={"who"}).qtype_weights == {}
    assert adopted(config, later).qtype_weights == {"who": START}  # not known as a hold
