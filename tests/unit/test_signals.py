"""The signals, each a vectorised function with a closed form (docs/design.md, "Signals and the score")."""

from __future__ import annotations

import math

import numpy as np
import pytest

from heaprank import Config, ConfigError, Reranker, Retention, Scoring, Weights
from heaprank.config import DEFAULT_KIND_IMPORTANCE, MAX_WEIGHT, RECENCY_EVERY_QUESTION
from heaprank.scoring.candidates import coerce_candidates
from heaprank.scoring.rank import combine
from heaprank.scoring.signals import importance, recency, relevance

NOW = 1_750_000_000.0
DAY = 86_400.0
NAN = math.nan


def rel(scores, kind="similarity", floor=0.02, tau=5.0):
    return relevance(np.array(scores, dtype=np.float64), kind=kind, floor=floor, rank_tau=tau)


# ----------------------------------------------------------------------------- relevance

def test_similarity_is_min_max_scaled_into_floor_one():
    assert rel([1.0, 2.0, 3.0]).tolist() == pytest.approx([0.02, 0.51, 1.0])
    assert rel([1.0, 2.0, 3.0], floor=0.0).tolist() == pytest.approx([1e-12, 0.5, 1.0])


def test_distance_is_inverted():
    assert rel([1.0, 2.0, 3.0], kind="distance").tolist() == pytest.approx([1.0, 0.51, 0.02])


def test_no_scores_ranks_by_position():
    assert rel([NAN, NAN, NAN]).tolist() == pytest.approx([1.0, 1 / 1.2, 1 / 1.4])
    assert rel([NAN, NAN], tau=1.0).tolist() == pytest.approx([1.0, 0.5])


@pytest.mark.parametrize("scores", [[3.7], [2.0, 2.0, 2.0], [-1e300, -1e300]])
def test_single_candidate_and_ties_are_all_one(scores):
    assert rel(scores).tolist() == [1.0] * len(scores)


def test_partial_ties_share_a_value():
    out = rel([5.0, 1.0, 5.0, 3.0])
    assert out[0] == out[2] == 1.0 and out[1] == pytest.approx(0.02)


def test_overflowing_span_is_rescaled():
    out = rel([-1.7e308, 0.0, 1.7e308])
    assert np.all(np.isfinite(out)) and out.tolist() == pytest.approx([0.02, 0.51, 1.0])


def test_invalid_scores_get_the_floor():
    assert rel([NAN, 1.0, 3.0]).tolist() == pytest.approx([0.02, 0.02, 1.0])


# ------------------------------------------------------------------------------- recency

def test_recency_half_life_and_floor():
    hl = 30 * DAY
    out = recency(np.array([0.0, hl, 2 * hl, 1e6 * hl]), half_life_s=hl, floor=0.5)
    assert out.tolist() == pytest.approx([1.0, 0.75, 0.625, 0.5])
    out = recency(np.array([hl]), half_life_s=hl, floor=0.0)
    assert out.tolist() == pytest.approx([0.5])


def test_recency_unknown_is_neutral_and_negative_age_is_now():
    out = recency(np.array([NAN, -5 * DAY]), half_life_s=DAY, floor=0.2)
    assert out.tolist() == [1.0, 1.0]


def test_recency_never_reaches_zero_with_a_zero_floor():
    out = recency(np.array([1e9 * DAY]), half_life_s=DAY, floor=0.0)
    assert out[0] > 0


def test_recency_counts_from_last_use_not_creation():
    cands = [{"id": "old-but-used", "text": "t", "score": 1.0,
              "metadata": {"created_at": NOW - 300 * DAY, "last_used": NOW - 1 * DAY}},
             {"id": "old", "text": "t", "score": 1.0, "metadata": {"created_at": NOW - 300 * DAY}}]
    cfg = Config(retention=Retention(recency_floor=0.5))  # pinned: "old" sits just above this floor
    ranking = Reranker(config=cfg).rerank("What happened?", cands, k=2, now=NOW)
    by_id = {r.id: r for r in ranking}
    assert by_id["old-but-used"].signals["recency"] > 0.98
    assert by_id["old"].signals["recency"] < 0.51


# ---------------------------------------------------------------------------- importance

def batch(*metas):
    return coerce_candidates([{"id": f"c{i}", "text": "t", "metadata": m}
                              for i, m in enumerate(metas)], now=NOW)


def test_kind_prior():
    kinds = ["instruction", "preference", "decision", "error", "summary", "fact", "note",
             "episode", "tool_result", "unheard-of"]
    out = importance(batch(*({"kind": k} for k in kinds)), DEFAULT_KIND_IMPORTANCE)
    assert out.tolist() == [1.5, 1.3, 1.3, 1.25, 1.2, 1.0, 1.0, 0.8, 0.6, 1.0]
    assert importance(batch({}), DEFAULT_KIND_IMPORTANCE).tolist() == [1.0]


def test_explicit_dose_overrides_the_kind():
    out = importance(batch({"kind": "tool_result", "importance": 2.5}, {"importance": 0.3}),
                     DEFAULT_KIND_IMPORTANCE)
    assert out.tolist() == [2.5, 0.3]


def test_custom_kind_table():
    assert importance(batch({"kind": "fact"}), {"fact": 2.0}).tolist() == [2.0]


def test_insight_formula_on_the_seeds_scale():
    out = importance(batch(
        {"importance": 2.0, "confidence": 0.8, "source_count": 4},
        {"kind": "summary", "source_count": 0},  # sources at the default, confidence 0.5
        {"importance": 10.0, "confidence": 1.0, "source_count": 1000},  # the top of the scale
        {"importance": 0.01, "confidence": 0.0, "source_count": 0},  # kept above 0
    ), DEFAULT_KIND_IMPORTANCE)
    assert out.tolist() == pytest.approx([
        2 * min(1.0, 0.7 * 1.0 + 0.3 * 0.8 + math.log(5) / 10),
        1.0,  # neutral inputs, no sources counted: neutral
        2.0,
        0.05,
    ])


def test_insight_importance_reproduces_the_seeds_worked_example():
    """HEBBS: sources of mean importance 0.6 (a dose of 1.2), LLM confidence 0.8; insight A from
    30 sources scores 0.66 + ln(31)/10 = 1.00 (clamped), insight B from 2 scores 0.77."""
    a, b, plain = importance(batch(
        {"importance": 1.2, "confidence": 0.8, "source_count": 30},
        {"importance": 1.2, "confidence": 0.8, "source_count": 2},
        {"importance": 1.2, "confidence": 0.8, "source_count": 0},
    ), DEFAULT_KIND_IMPORTANCE).tolist()
    assert a / 2 == pytest.approx(1.0)  # 0.66 + 0.343, clamped to the top
    assert b / 2 == pytest.approx(0.66 + math.log(3) / 10)
    assert plain / 2 == pytest.approx(0.66)  # the old formula, without frequency


@pytest.mark.parametrize("n, boost", [(1, 0.07), (3, 0.14), (10, 0.24), (20, 0.31), (50, 0.39),
                                      (100, 0.46)])
def test_the_frequency_boost_follows_the_seeds_table(n, boost):
    with_n, without = importance(batch({"source_count": n, "confidence": 0.0},
                                       {"source_count": 0, "confidence": 0.0}),
                                 DEFAULT_KIND_IMPORTANCE).tolist()
    assert (with_n - without) / 2 == pytest.approx(boost, abs=0.006)  # as printed (ln 21 / 10 = 0.3045)


def test_an_aggregated_memory_with_neutral_inputs_ranks_above_a_plain_one():
    """Consolidation from many sources is evidence: with the default confidence and sources of
    default importance, an insight is never below a plain memory of the same dose."""
    insight, plain = importance(batch({"kind": "insight", "source_count": 12}, {"kind": "fact"}),
                                DEFAULT_KIND_IMPORTANCE).tolist()
    assert insight == pytest.approx(1.0 + math.log(13) / 5) and insight > plain


# ------------------------------------------------------------------------------- combine

def test_combine_is_the_weighted_log_product():
    signals = np.array([[0.5, 0.8, 1.3, 0.2]])
    weights = np.array([1.0, 2.0, 0.5, 0.0])
    log_score, terms, _ = combine(signals, weights, np.array([0.1]))
    expected = [math.log(0.5), 2 * math.log(0.8), 0.5 * math.log(1.3), 0.0]
    assert terms[0].tolist() == pytest.approx(expected)
    assert log_score[0] == pytest.approx(sum(expected) + math.log(0.1))


def test_zero_weight_switches_a_signal_off_and_zero_rule_gives_minus_inf():
    log_score, terms, _ = combine(np.array([[1e-300, 1.0]]), np.array([0.0, 1.0]), np.array([0.0]))
    assert terms[0, 0] == 0.0 and log_score[0] == -math.inf


def test_a_constant_factor_on_every_candidate_keeps_the_order():
    cands = [{"id": f"c{i}", "text": "t", "score": s, "metadata": {"kind": k}}
             for i, (s, k) in enumerate([(3.0, "fact"), (2.0, "instruction"), (1.5, "episode"),
                                         (0.0, "preference")])]
    aged = [{**c, "metadata": {**c["metadata"], "created_at": NOW - 10 * DAY}} for c in cands]
    rr = Reranker(config=Config(weights=Weights(importance=3.0, recency=2.0),  # recency on every question
                                scoring=Scoring(intent_recency=RECENCY_EVERY_QUESTION)))
    base = rr.rerank("What did we plan?", cands, k=4, now=NOW, track=False)
    older = rr.rerank("What did we plan?", aged, k=4, now=NOW, track=False)
    assert base.ids == older.ids
    ratios = {o.score / b.score for b, o in zip(base, older, strict=False)}
    assert max(ratios) == pytest.approx(min(ratios), rel=1e-12) and max(ratios) < 1


def test_day_one_ranking_equals_the_retrievers():
    cands = [{"id": f"c{i}", "text": t, "score": s} for i, (t, s) in enumerate(
        [("Lisbon flight on March 3", 0.4), ("I like tea", 0.9), ("Call Zoë at 5", 0.7),
         ("Is the museum open?", 0.1)])]
    assert Reranker().rerank("When is my flight?", cands, k=4, now=NOW).ids == \
        ["c1", "c2", "c0", "c3"]


def test_an_ancient_memory_is_weak_but_never_dropped_with_a_zero_floor():
    cfg = Config(scoring=Scoring(intent_recency=RECENCY_EVERY_QUESTION),
                 retention=Retention(recency_floor=0.0, half_life_s=DAY))
    cands = [{"id": "ancient", "text": "note", "score": 2.0,
              "metadata": {"created_at": NOW - 3650 * DAY}},
             {"id": "fresh", "text": "note", "score": 1.0, "metadata": {"created_at": NOW}}]
    ranking = Reranker(config=cfg).rerank("What did I note?", cands, k=2, now=NOW)
    assert ranking.ids == ["fresh", "ancient"]
    ancient = ranking[1]
    assert 0 < ancient.signals["recency"] < 1e-100 and ancient.score >= 0
    top1 = Reranker(config=cfg).rerank("What did I note?", cands, k=1, now=NOW)
    assert top1.why_not("ancient").factor == "recency"


def test_the_largest_weights_keep_a_score_within_the_float_range():
    # importance is capped at 10 and a weight at 100 (MAX_WEIGHT): 10 ** 400 (inf, every top
    # score tied) is refused when the Weights are built, and 10 ** 100 stays finite.
    with pytest.raises(ConfigError, match="weights.importance: must be at most 100"):
        Weights(importance=400.0)
    cfg = Config(weights=Weights(importance=MAX_WEIGHT))
    cands = [{"id": "huge", "text": "note", "score": 1.0, "metadata": {"importance": 10.0}},
             {"id": "plain", "text": "note", "score": 1.0}]
    ranking = Reranker(config=cfg).rerank("What did I note?", cands, k=1, now=NOW)
    assert ranking.ids == ["huge"] and math.isfinite(ranking[0].score)
    assert ranking[0].score > 1e90
    why = ranking.why_not("plain")
    assert why.factor == "importance" and math.isfinite(why.kth_score)
