"""Weight tuning and replay on impression logs drawn from a known model."""

from __future__ import annotations

import math
from dataclasses import replace
from operator import attrgetter

import numpy as np
import pytest

from heaprank import (
    Config,
    Features,
    InputError,
    InputTypeError,
    Learning,
    MemoryState,
    Refit,
    Reranker,
    Retention,
    Weights,
)
from heaprank.learning.tuning import MIN_HELDOUT, replay, tune
from heaprank.reranker import LEARNING_FIELDS
from tests.tuning_logs import DAY, NOW, record, synthetic_log

TRUE = {"relevance": 0.5, "recency": 1.0, "importance": 1.0, "usefulness": 2.5}


@pytest.fixture(scope="module")
def big_log():
    return synthetic_log(3000, **TRUE)


def test_tune_recovers_the_weights_of_the_model_that_drew_the_log(big_log):
    result = tune(big_log, Config())
    fit = result.fit
    assert fit.moved and result.moved and fit is result.pooled
    assert fit.impressions == fit.choices == 3000 and fit.heldout_impressions == 600
    assert fit.fitted.usefulness == pytest.approx(2.5, abs=0.2)
    assert fit.fitted.relevance == pytest.approx(0.5, abs=0.1)
    assert fit.fitted.importance == pytest.approx(1.0, abs=0.25)
    for name in ("relevance", "importance", "usefulness"):
        low, high = fit.intervals[name]
        assert low <= TRUE[name] <= high, name
        assert high - low < 0.6, name  # informative, not just wide
    assert fit.heldout_loglik_after > fit.heldout_loglik_before
    assert fit.heldout_mrr_after > fit.heldout_mrr_before
    assert result.config.weights == fit.weights == fit.fitted
    assert result.start == Config()


def test_tune_fits_the_half_life():
    log = synthetic_log(3000, recency=2.0, half_life_days=7.0, recency_floor=0.0, seed=1)
    start = Config(retention=Retention(recency_floor=0.0))
    fit = tune(log, start, fit_half_life=True).fit
    assert fit.moved
    assert fit.fitted_half_life_s / DAY == pytest.approx(7.0, rel=0.25)
    low, high = fit.intervals["half_life_s"]
    assert low < 7 * DAY < high
    assert fit.fitted.recency == pytest.approx(2.0, abs=0.5)
    without = tune(log, start).fit  # the half-life stays at 30 days: recency fits worse
    assert without.fitted_half_life_s == start.retention.half_life_s


def test_tune_fits_a_signal_the_log_carries_only_when_every_impression_has_it():
    start = Config().with_weights(reinforcement=0.5)
    carried = tune(synthetic_log(3000, reinforcement=1.5, **TRUE), start).fit
    assert carried.moved
    assert carried.fitted.reinforcement == pytest.approx(1.5, abs=0.3)
    mixed = synthetic_log(1500, reinforcement=1.5, **TRUE) + synthetic_log(
        1500, **TRUE, seed=7, start=NOW + 1500 * 60.0)
    fit = tune(mixed, start).fit
    # Half the log never computed reinforcement: it has nothing to fit on, so it stays put.
    assert fit.fitted.reinforcement == 0.5 and "reinforcement" not in fit.intervals


def test_a_stored_recency_is_fitted_as_logged_and_fixes_the_half_life():
    log = synthetic_log(3000, **TRUE)
    # As the Ebbinghaus kernel logs it: a recency column of its own, not a function of the age.
    stored = [replace(imp, signal_names=imp.signal_names + ("recency",),
                      signals=tuple(row + (0.95,) for row in imp.signals)) for imp in log]
    fit = tune(stored, Config(), fit_half_life=True).fit
    assert fit.fitted_half_life_s == Config().retention.half_life_s and "half_life_s" not in fit.intervals


def test_tune_refuses_to_move_with_too_little_data():
    log = synthetic_log(40, **TRUE)
    result = tune(log, Config())
    assert not result.moved and "too little data: 40 usable impressions" in result.fit.reason
    assert result.config == Config() and result.fit.weights == Config().weights
    assert result.fit.fitted is None and result.fit.intervals == {}
    # enough in all, but not on both sides of the split
    few_late = tune(log, Config(), min_impressions=40, holdout=0.1)
    assert not few_late.moved and "time split" in few_late.fit.reason
    assert str(MIN_HELDOUT) in few_late.fit.reason


def test_tune_keeps_the_weights_when_the_held_out_part_disagrees():
    """A log drawn under the current weights themselves: a fit cannot beat them for real, and
    on this seed's held-out part it does not; nothing moves, and the fit is still reported."""
    defaults = Config().weights
    log = synthetic_log(300, **{n: getattr(defaults, n) for n in TRUE}, seed=6)
    result = tune(log, Config())
    fit = result.fit
    assert fit.fitted is not None and fit.fitted != defaults
    assert fit.heldout_loglik_after < fit.heldout_loglik_before
    assert not fit.moved and "weights unchanged" in fit.reason
    assert result.config == Config() and fit.weights == defaults


def test_shrinkage_pulls_a_small_namespace_toward_the_pooled_fit():
    pool = synthetic_log(2000, **TRUE, namespace="pool", seed=2)
    # a small namespace with other tastes, spread over the same time range
    small = synthetic_log(80, relevance=2.0, usefulness=0.5, namespace="small", seed=3,
                          step_s=60.0 * 25)
    log = pool + small
    shrunk = tune(log, Config(), namespace="small")
    free = tune(log, Config(), namespace="small", namespace_shrinkage=0.0)
    pooled = shrunk.pooled.fitted
    assert shrunk.fit is shrunk.namespaces["small"] and shrunk.fit.namespace == "small"
    assert shrunk.fit.impressions == 80 and shrunk.pooled.impressions == 2080

    def distance(w: Weights) -> float:
        return math.dist(w.as_tuple(), pooled.as_tuple())

    strong = tune(log, Config(), namespace="small", namespace_shrinkage=100.0)
    assert strong.pooled == shrunk.pooled == free.pooled
    assert distance(strong.fit.fitted) < distance(shrunk.fit.fitted) < distance(free.fit.fitted)
    assert distance(strong.fit.fitted) < 0.5 * distance(free.fit.fitted)
    # the freer the fit, the more it leans to the namespace's own tastes
    assert free.fit.fitted.relevance > shrunk.fit.fitted.relevance > strong.fit.fitted.relevance \
        > pooled.relevance


def test_every_namespace_gets_a_fit_with_star():
    log = synthetic_log(300, **TRUE, namespace="a") + synthetic_log(
        30, **TRUE, namespace="b", seed=4, step_s=600)
    result = tune(log, Config(), namespace="*")
    assert sorted(result.namespaces) == ["a", "b"] and result.fit is result.pooled
    assert "too little data: 30" in result.namespaces["b"].reason
    assert result.namespaces["a"].impressions == 300
    unseen = tune(log, Config(), namespace="nobody").fit
    assert unseen.impressions == 0 and not unseen.moved


def test_unusable_impressions_are_counted_not_fitted():
    log = synthetic_log(60, **TRUE)
    unusable = [
        replace(log[0], signal_names=(), signals=()),  # explicit feedback: no signals
        replace(log[1], verdicts=(2,) * 8),  # nothing used
        replace(log[2], verdicts=(1,) * 8),  # everything used
        replace(log[3], signals=((math.inf, 1.0, 1.0, 0.5, 1.0),) * 8),
        replace(log[4], verdicts=(1, 2)),  # verdicts that do not match the shown items
    ]
    result = tune(log[5:] + unusable, Config(), min_impressions=1)
    assert result.skipped == {"no_signals": 1, "no_use": 1, "all_used": 1, "invalid": 2}
    assert result.fit.impressions == 55
    with pytest.raises(InputTypeError, match="impressions"):
        tune([{"id": "x"}], Config())


@pytest.mark.parametrize("kwargs, match", [
    ({"shrinkage": -1.0}, "shrinkage: must be finite and >= 0"),
    ({"namespace_shrinkage": math.nan}, "namespace_shrinkage"),
    ({"holdout": 1.0}, r"holdout: must be in \(0, 1\)"),
    ({"min_impressions": 0}, "min_impressions: must be >= 1"),
])
def test_bad_tuning_settings_name_the_field(kwargs, match):
    with pytest.raises(InputError, match=match):
        tune([], Config(), **kwargs)


def test_reranker_tune_applies_only_weights_and_half_life():
    state = MemoryState()
    record(state, synthetic_log(1500, **TRUE, seed=6))
    start = Config(features=Features(tag_slots=("urgent",)),
                   learning=Learning(prior=Config().learning.prior, em_credit=False))
    rr = Reranker(state, config=start)
    looked = rr.tune()
    assert rr.config == start  # without apply, nothing changes
    result = rr.tune(apply=True, fit_half_life=True)
    assert result.moved and rr.config == result.config
    assert rr.config.weights == result.fit.fitted != start.weights
    assert looked.fit.fitted.usefulness == pytest.approx(result.fit.fitted.usefulness, abs=0.3)
    for name in LEARNING_FIELDS:
        assert attrgetter(name)(rr.config) == attrgetter(name)(start), name
    with pytest.raises(InputError, match="apply"):
        rr.tune("ns", apply=True)
    with pytest.raises(InputError, match="namespace"):
        rr.tune(" ")


def test_reranker_tune_refuses_and_keeps_its_config_with_too_little_data():
    state = MemoryState()
    record(state, synthetic_log(20, **TRUE))
    rr = Reranker(state)
    result = rr.tune(apply=True)
    assert not result.moved and rr.config == Config()


# --------------------------------------------------------------------------------- replay

def _reranked_state(seed: int = 0) -> Reranker:
    """Real reranks of varied candidates, with feedback: a log as the reranker writes it."""
    rng = np.random.default_rng(seed)
    rr = Reranker(MemoryState(), config=Config(refit=Refit(every=0)))  # one logging config
    kinds = ["fact", "episode", "tool_result", "preference", None]
    queries = ["When is my flight?", "What do I like?", "How much was it?", "Who is Ana?"]
    for t in range(120):
        cands = [{"id": f"m{j}", "text": f"memory {j} about topic {j % 7} on day {j % 5}",
                  "score": float(rng.uniform(0, 1)),
                  "metadata": {"kind": kinds[j % 5],
                               "created_at": NOW - float(rng.uniform(0, 90)) * DAY}}
                 for j in rng.choice(40, 12, replace=False).tolist()]
        ranking = rr.rerank(queries[t % 4], cands, namespace=f"user{t % 3}", k=6,
                            now=NOW + t * 600)
        used = [ranking.ids[j] for j in range(len(ranking.ids)) if rng.uniform() < 0.25]
        rr.feedback(ranking.recall_id, used=used)
    return rr


def test_replay_of_the_logging_config_reproduces_the_logged_order():
    rr = _reranked_state()
    before = rr.stats()
    same = replay(rr.state.feedback_log(), rr.config)
    assert same.impressions > 50 and same.skipped["no_use"] > 0
    assert same.mrr == same.logged_mrr and same.used_at == same.logged_used_at
    assert same.logged_mrr < 1.0
    other = replay(rr.state.feedback_log(), rr.config.with_weights(relevance=0.0, usefulness=4.0))
    assert other.logged_mrr == same.logged_mrr and other.mrr != same.mrr
    assert rr.stats() == before  # read only
    per_ns = replay(rr.state.feedback_log("user1"), rr.config)
    assert 0 < per_ns.impressions < same.impressions


def test_replay_scores_a_better_config_higher(big_log):
    truth = replay(big_log, Config().with_weights(**TRUE))
    flat = replay(big_log, Config().with_weights(usefulness=0.0, relevance=0.0))
    assert truth.mrr > flat.mrr + 0.1
    assert truth.used_at[5] > flat.used_at[5]
    assert set(truth.used_at) == {1, 3, 5} and 0 < truth.used_at[1] <= truth.used_at[3] <= 1
    assert replay([], Config()).mrr is None
    with pytest.raises(InputError, match="ks"):
        replay(big_log, Config(), ks=(0,))
