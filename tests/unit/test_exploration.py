"""Exploration (Thompson sampling of the links) and reinforcement from use counts."""

from __future__ import annotations

import math

import numpy as np
import pytest

from heaprank import Config, Exploration, Features, Reranker, Retention, Scoring, Weights
from heaprank.config import RECENCY_EVERY_QUESTION

NOW = 1_760_000_000.0
DAY = 86_400.0

CANDIDATES = [
    {"id": "fact", "text": "The flight departs March 14 at 9:40", "score": 0.6,
     "metadata": {"kind": "fact", "created_at": NOW - 3 * DAY}},
    {"id": "wish", "text": "I have always wanted to see Lisbon", "score": 1.0,
     "metadata": {"kind": "episode", "created_at": NOW - 2 * DAY}},
    {"id": "price", "text": "Flights to Lisbon cost $400-700", "score": 0.9,
     "metadata": {"kind": "tool_result", "created_at": NOW - 1 * DAY}},
    {"id": "hood", "text": "Which neighbourhood in Lisbon is nice?", "score": 0.3,
     "metadata": {"kind": "episode", "created_at": NOW - 4 * DAY}},
]


def _taught(config: Config | None = None) -> Reranker:
    """A reranker whose links learned that facts answer 'when' questions."""
    rr = Reranker(config=config or Config())
    for i in range(30):
        ranking = rr.rerank("When is my flight?", CANDIDATES, namespace=f"user{i % 5}",
                            now=NOW, k=4)
        rr.feedback(ranking.recall_id, used=["fact"])
    return rr


def _without_usefulness(ranking):
    return [(r.id, {k: v for k, v in r.signals.items() if k != "usefulness"}, r.details.get(
        "relevance"), r.details.get("recency"), r.details.get("importance")) for r in ranking]


def test_exploration_off_ranks_exactly_as_before():
    base = _taught()
    off = base.with_config(exploration={"rate": 0.0, "seed": 7})
    for ns in ("user0", "new"):
        a = base.rerank("When is my flight?", CANDIDATES, namespace=ns, now=NOW, track=False)
        b = off.rerank("When is my flight?", CANDIDATES, namespace=ns, now=NOW, track=False)
        assert a.items == b.items and a.order_ids == b.order_ids
        assert np.array_equal(a.log_scores, b.log_scores)
        assert "explored" not in a.explain()


def test_exploration_is_reproducible_with_a_seed():
    base = _taught()

    def run(seed: int) -> list[list[str]]:
        rr = base.with_config(exploration={"rate": 0.5, "seed": seed})
        return [rr.rerank("When is my flight?", CANDIDATES, namespace="new", now=NOW,
                          track=False).ids for _ in range(40)]

    assert run(3) == run(3)
    assert run(3) != run(4)


def test_an_explored_rerank_changes_only_the_usefulness_factor_and_says_so():
    base = _taught()
    explorer = base.with_config(exploration={"rate": 1.0, "seed": 1})
    plain = {r.id: r for r in base.rerank("When is my flight?", CANDIDATES, namespace="new",
                                          now=NOW, track=False)}
    orders = set()
    for _ in range(30):
        ranking = explorer.rerank("When is my flight?", CANDIDATES, namespace="new", now=NOW,
                                  track=False)
        orders.add(tuple(ranking.ids))
        for r in ranking:
            same = plain[r.id]
            for name in ("relevance", "recency", "importance", "reinforcement"):
                assert r.signals[name] == same.signals[name]
            assert r.top_links == same.top_links  # EXPLAIN still lists the posterior means
            assert r.details["usefulness"] == (
                f"explored: sampled usefulness, mean {same.signals['usefulness']:.2f}")
            assert "explored: sampled usefulness" in r.explain()
            assert 0.0 < r.signals["usefulness"] < 1.0
    assert len(orders) > 1  # sampling does reorder: the point of exploring


def test_the_share_of_explored_reranks_follows_the_rate():
    rr = Reranker(config=Config(exploration=Exploration(rate=0.2, seed=11)))
    explored = sum("explored" in rr.rerank("q", CANDIDATES, namespace="u", now=NOW,
                                           track=False)[0].explain() for _ in range(1000))
    assert 150 <= explored <= 250  # binomial(1000, 0.2): sd 12.6


def test_an_explored_impression_keeps_the_mean_and_the_sample():
    rr = _taught(Config(exploration=Exploration(rate=1.0, seed=5)))
    ranking = rr.rerank("When is my flight?", CANDIDATES, namespace="new", now=NOW)
    stored = rr.state.get_impression(ranking.recall_id)
    assert stored.signal_names[-1] == "usefulness_sampled"
    mean = stored.signal_names.index("usefulness")
    for doc_id, row in zip(stored.ids, stored.signals):
        r = next(x for x in ranking if x.id == doc_id)
        assert row[-1] == pytest.approx(r.signals["usefulness"], rel=1e-6)
        assert f"mean {row[mean]:.2f}" in r.details["usefulness"]
    rr.feedback(ranking.recall_id, used=[ranking[0].id])  # feedback works as ever


# ------------------------------------------------------------------------ reinforcement


def _used(rr: Reranker, counts: dict[str, int]) -> None:
    for doc_id, n in counts.items():
        for _ in range(n):
            ranking = rr.rerank("q", [{"id": doc_id, "text": "x", "score": 1.0}],
                                namespace="u", now=NOW)
            rr.feedback(ranking.recall_id, used=[doc_id])


def test_reinforcement_is_off_by_default_and_ranks_by_capped_use_when_on():
    cands = [{"id": d, "text": "same shape of text", "score": 1.0} for d in ("a", "b", "c", "d")]
    # recency on every question; no first-stage slots: the tied scores' ranks would tell the
    # candidates apart, and only use counts are to differ here
    rr = Reranker(config=Config(weights=Weights(reinforcement=1.0),
                                features=Features(stage_slots=False),
                                scoring=Scoring(intent_recency=RECENCY_EVERY_QUESTION),
                                retention=Retention(reinforcement_cap=10)))
    _used(rr, {"b": 3, "c": 10, "d": 25})
    ranking = {r.id: r for r in rr.rerank("q", cands, namespace="u", now=NOW, track=False, k=4)}
    assert ranking["a"].signals["reinforcement"] == 1.0
    assert ranking["b"].signals["reinforcement"] == pytest.approx(1 + math.log2(4) / math.log2(11))
    assert ranking["c"].signals["reinforcement"] == pytest.approx(2.0)
    assert ranking["d"].signals["reinforcement"] == pytest.approx(2.0)  # capped at 10 uses
    assert "reinforcement 1.58 (used 3x, cap 10)" in ranking["b"].explain()
    off = rr.with_config(weights=Weights())
    plain = {r.id: r for r in off.rerank("q", cands, namespace="u", now=NOW, track=False, k=4)}
    assert "reinforcement" not in plain["d"].explain()
    assert plain["d"].score == pytest.approx(plain["a"].score)  # use counts change nothing


def test_reinforcement_lifts_a_used_document_and_is_recorded():
    cands = [{"id": "a", "text": "same shape of text", "score": 1.0},
             {"id": "b", "text": "same shape of text", "score": 1.0}]  # a tie: input order
    rr = Reranker(config=Config(weights=Weights(reinforcement=2.0)))
    _used(rr, {"b": 2})
    ranking = rr.rerank("q", cands, namespace="u", now=NOW)
    assert ranking.ids == ["b", "a"]
    stored = rr.state.get_impression(ranking.recall_id)
    column = stored.signal_names.index("reinforcement")
    assert [row[column] for row in stored.signals] == pytest.approx(
        [1 + math.log2(3) / math.log2(101), 1.0], rel=1e-6)
    assert Reranker().rerank("q", cands, namespace="u", now=NOW).ids == ["a", "b"]
