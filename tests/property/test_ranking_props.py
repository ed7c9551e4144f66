"""Invariants of a ranking: order under score transforms, permutations, shuffles, monotonicity,
neutral usefulness with no feedback, and no NaN for any input the API accepts."""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from heaprank import Config, Features, Inputs, Reranker, Retention, Scoring, Weights
from heaprank.model.questions import analyze_query
from tests.strategies import NOW, QUERIES, candidate_lists, queries

weights = st.builds(
    Weights,
    relevance=st.integers(1, 40).map(lambda x: x / 10),
    recency=st.integers(1, 40).map(lambda x: x / 10),
    importance=st.integers(1, 40).map(lambda x: x / 10),
    usefulness=st.integers(1, 40).map(lambda x: x / 10),
)
configs = st.one_of(st.just(Config()), st.builds(Config, weights=weights))
content_queries = st.sampled_from([q for q in QUERIES if analyze_query(q).has_content])


def _order(query, cands, config, **kwargs):
    rr = Reranker(config=config)
    return rr.rerank(query, cands, namespace="ns", k=len(cands), now=NOW, track=False,
                     **kwargs).ids


def _with_scores(cands, fn):
    return [{**c, "score": fn(c["score"])} for c in cands]


@given(candidate_lists(min_size=2), queries, configs, st.floats(min_value=0.01, max_value=100.0))
def test_scaling_scores_never_changes_the_order(cands, query, config, c):
    assert _order(query, _with_scores(cands, lambda s: s * c), config) == \
        _order(query, cands, config)


@given(candidate_lists(min_size=2), queries, configs,
       st.floats(min_value=-1000.0, max_value=1000.0))
def test_shifting_scores_never_changes_the_order(cands, query, config, b):
    assert _order(query, _with_scores(cands, lambda s: s + b), config) == \
        _order(query, cands, config)


@given(candidate_lists(min_size=1, keys=False), content_queries)
def test_relevance_only_ranks_in_the_retrievers_order(cands, query):
    config = Config(weights=Weights(relevance=1, recency=0, importance=0, usefulness=0))
    by_score = sorted(enumerate(cands), key=lambda ic: (-ic[1]["score"], ic[0]))
    expected = [c["id"] for _, c in by_score]
    assert _order(query, cands, config) == expected


@given(candidate_lists(min_size=1, scored=False, keys=False), queries)
def test_relevance_only_without_scores_keeps_the_input_order(cands, query):
    config = Config(weights=Weights(relevance=1, recency=0, importance=0, usefulness=0))
    assert _order(query, cands, config) == [c["id"] for c in cands]


@given(candidate_lists(min_size=1, scored=None), queries, st.booleans(), st.booleans())
def test_with_no_feedback_every_usefulness_is_equal(cands, query, doc_features, tags):
    config = Config(features=Features(doc_features=doc_features, tag_slots=("travel",) if tags else ()))
    if tags:
        cands = [{**c, "metadata": {**c["metadata"], "tags": ["travel"]}} if i % 2 else c
                 for i, c in enumerate(cands)]
    ranking = Reranker(config=config).rerank(query, cands, k=len(cands), now=NOW)
    assert len({r.signals["usefulness"] for r in ranking}) == 1


@given(candidate_lists(min_size=1, scored=None), queries, configs, st.integers(0, 5))
def test_output_is_a_permutation_of_the_input_when_k_covers_it(cands, query, config, extra):
    ids = _order_k(query, cands, config, k=len(cands) + extra)
    assert sorted(ids) == sorted(c["id"] for c in cands)


def _order_k(query, cands, config, k):
    # No rule can fire here, so nothing is dropped (generated metadata carries keys only when
    # asked, and a superseded candidate is down-weighted, never dropped, by default).
    return Reranker(config=config).rerank(query, cands, k=k, now=NOW, track=False).ids


@given(candidate_lists(min_size=2), queries, configs, st.randoms(use_true_random=False))
def test_shuffling_the_input_changes_no_score(cands, query, config, rnd):
    shuffled = list(cands)
    rnd.shuffle(shuffled)
    rr = Reranker(config=config)
    a = {r.id: (r.score, dict(r.signals)) for r in
         rr.rerank(query, cands, k=len(cands), now=NOW, track=False)}
    b = {r.id: (r.score, dict(r.signals)) for r in
         rr.rerank(query, shuffled, k=len(cands), now=NOW, track=False)}
    assert a == b


@given(candidate_lists(min_size=2), queries, configs, st.data())
def test_raising_a_score_never_lowers_the_rank(cands, query, config, data):
    i = data.draw(st.integers(0, len(cands) - 1), label="index")
    delta = data.draw(st.integers(1, 2000), label="delta") / 100
    raised = [dict(c) for c in cands]
    raised[i]["score"] = cands[i]["score"] + delta
    before = _order(query, cands, config).index(cands[i]["id"])
    after = _order(query, raised, config).index(cands[i]["id"])
    assert after <= before


# ------------------------------------------------------------------ anything the API accepts

wild_numbers = st.one_of(
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-10**6, max_value=10**6),
)
wild_times = st.one_of(
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=NOW - 1e10, max_value=NOW + 1e9),  # includes the far future
    st.sampled_from(["2024-01-01T00:00:00Z", "2099-01-01", "yesterday", "", "2024-13-45",
                     "2025-06-15 14:13:20+02:00"]),
    st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1)),
    st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1),
                 timezones=st.just(timezone.utc)),
)


@st.composite
def wild_candidates(draw):
    n = draw(st.integers(1, 8))
    scored = draw(st.booleans())
    out = []
    for i in range(n):
        meta = {
            "created_at": draw(wild_times),
            "last_accessed_at": draw(wild_times),
            "importance": draw(wild_numbers),
            "source_count": draw(wild_numbers),
            "confidence": draw(wild_numbers),
            "version": draw(wild_numbers),
            "position": draw(wild_numbers),
            "kind": draw(st.sampled_from([None, "fact", "instruction", "tool_result", "weird"])),
            "key": draw(st.sampled_from([None, "k"])),
        }
        cand = {"id": f"w{i}", "text": draw(st.text(max_size=30)),
                "metadata": {k: v for k, v in meta.items() if v is not None}}
        if scored:
            cand["score"] = draw(st.floats(allow_nan=True, allow_infinity=True))
        out.append(cand)
    return out


lenient = st.builds(
    Config,
    weights=weights,
    inputs=st.just(Inputs(on_invalid="neutral")),
    scoring=st.builds(Scoring, score_kind=st.sampled_from(["similarity", "distance"]),
                      relevance_floor=st.sampled_from([0.0, 0.02, 0.5])),
    retention=st.builds(Retention, recency_floor=st.sampled_from([0.0, 0.5, 0.9]),
                        half_life_s=st.sampled_from([1.0, 86_400.0, 30 * 86_400.0])),
)


@pytest.mark.filterwarnings("error")
@given(wild_candidates(), queries, lenient)
def test_no_nan_for_anything_the_api_accepts(cands, query, config):
    rr = Reranker(config=config)
    ranking = rr.rerank(query, cands, k=len(cands), now=NOW)
    assert sorted(ranking.ids) == sorted(c["id"] for c in cands)  # nothing silently dropped
    for r in ranking:
        assert not math.isnan(r.score)
        for name, value in r.signals.items():
            assert math.isfinite(value) and value > 0, (name, value, r.explain())
        for _, p in r.top_links:
            assert 0 < p < 1
    json.dumps(ranking.to_dicts(), allow_nan=True)
    rr.feedback(ranking.recall_id, used=ranking.ids[:1])
    again = rr.rerank(query, cands, k=len(cands), now=NOW, track=False)
    for r in again:
        assert not math.isnan(r.score)
        assert all(math.isfinite(v) and v > 0 for v in r.signals.values())


@given(candidate_lists(min_size=2), st.sampled_from(["", "the of and", "   "]))
def test_empty_query_gives_every_candidate_neutral_relevance(cands, query):
    ranking = Reranker().rerank(query, cands, k=len(cands), now=NOW, track=False)
    assert {r.signals["relevance"] for r in ranking} == {1.0}

