"""Results: EXPLAIN's exact text, the structured form, why_not and immutability."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from heaprank import Candidate, Config, Ranked, Ranking, Reranker, Retention, Scoring, Weights
from heaprank.config import RECENCY_EVERY_QUESTION, SIGNALS

NOW = 1_750_000_000.0
ONES = {"relevance": 1.0, "recency": 1.0, "importance": 1.0, "usefulness": 1.0}


@pytest.fixture()
def lisbon() -> Ranked:
    return Ranked(
        rank=1, score=0.0299, candidate=Candidate("lisbon", "Flight to Lisbon on March 3"),
        signals={"relevance": 0.58, "recency": 0.81, "importance": 1.0, "usefulness": 0.63},
        weights=ONES,
        details={"relevance": "score 7.31", "recency": "age 20.0d", "importance": "fact"},
        top_links=(("qt:when&date:yes", 0.23), ("kind:fact", 0.23), ("num:yes", 0.08)),
        rules=(("superseded", 0.1),),
    )


@pytest.fixture()
def ranking() -> Ranking:
    cands = [
        {"id": "lisbon", "text": "My flight to Lisbon is on March 3", "score": 7.31,
         "metadata": {"kind": "fact", "created_at": NOW - 20 * 86_400}},
        {"id": "tea", "text": "I like tea", "score": 7.0, "metadata": {"kind": "tool_result"}},
        {"id": "weak", "text": "Something else entirely", "score": 1.0},
        {"id": "mid", "text": "Another note", "score": 6.5, "metadata": {"kind": "instruction"}},
    ]
    # Recency floor pinned: the explain text below spells out its exact values (recency on
    # every question: by default only where the question asks for it).
    cfg = Config(scoring=Scoring(intent_recency=RECENCY_EVERY_QUESTION),
                 retention=Retention(recency_floor=0.5))
    return Reranker(config=cfg).rerank("When is my flight to Lisbon?", cands, k=2, now=NOW)


def test_explain_exact_string(lisbon):
    assert lisbon.explain() == (
        "rel 0.58 (score 7.31) x recency 0.81 (age 20.0d) x importance 1.00 (fact) x useful 0.63 "
        "[qt:when&date:yes=0.23, kind:fact=0.23, num:yes=0.08] x rules superseded x0.1")


def test_explain_shows_weights_other_than_one(lisbon):
    weighted = dataclasses.replace(lisbon, weights={**ONES, "relevance": 2.0, "recency": 0.5})
    assert weighted.explain().startswith("rel 0.58^2 (score 7.31) x recency 0.81^0.5 (age 20.0d)")


def test_explain_omits_weight_zero_signals(lisbon):
    off = dataclasses.replace(lisbon, weights={**ONES, "recency": 0.0, "usefulness": 0.0},
                              rules=())
    assert off.explain() == "rel 0.58 (score 7.31) x importance 1.00 (fact)"


def test_explain_appends_flags(lisbon):
    flagged = dataclasses.replace(lisbon, rules=(), top_links=(),
                                  flags=("score must be finite, got nan", "empty query"))
    assert flagged.explain().endswith(" x useful 0.63 ! score must be finite, got nan; empty query")


def test_ranked_is_immutable(lisbon):
    with pytest.raises(dataclasses.FrozenInstanceError):
        lisbon.score = 1.0  # type: ignore[misc]
    assert lisbon.id == "lisbon"


def test_to_dict_is_json_serialisable(lisbon):
    data = json.loads(json.dumps(lisbon.to_dict()))
    assert data["id"] == "lisbon" and data["rank"] == 1
    assert data["top_links"][0] == {"feature": "qt:when&date:yes", "p": 0.23}
    assert data["rules"] == [{"name": "superseded", "multiplier": 0.1}]
    assert data["explain"] == lisbon.explain()


def test_ranking_to_dicts_is_json_serialisable(ranking):
    rows = json.loads(json.dumps(ranking.to_dicts(), allow_nan=False))
    assert [r["id"] for r in rows] == ranking.ids
    assert all(set(r["signals"]) == set(SIGNALS) for r in rows)
    assert all(r["explain"] == item.explain() for r, item in zip(rows, ranking, strict=False))


def test_ranking_is_a_sequence(ranking):
    assert len(ranking) == 2
    assert ranking[0].rank == 1 and ranking[-1].rank == 2
    assert [r.id for r in ranking[:1]] == ranking.ids[:1]
    assert [r.id for r in ranking] == ranking.ids
    assert ranking.namespace == "default" and ranking.qtype == "when"
    assert ranking.query == "When is my flight to Lisbon?"
    assert len(ranking.recall_id) == 16
    assert all(a.score >= b.score for a, b in zip(ranking, ranking[1:], strict=False))


def test_ranking_explain_is_an_aligned_table(ranking):
    lines = ranking.explain().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("  1. ") and lines[1].startswith("  2. ")
    assert lines[0].index(ranking[0].explain()) == lines[1].index(ranking[1].explain())
    assert len(ranking.explain(k=1).splitlines()) == 1


def test_explain_of_a_real_ranking_names_its_sources(ranking):
    text = {r.id: r.explain() for r in ranking}
    assert text["lisbon"].startswith("rel 1.00 (score 7.31) x recency 0.81 (age 20.0d) "
                                     "x importance 1.00 (fact) x useful ")
    assert ranking.ids == ["mid", "lisbon"]  # instruction 1.5 and no date beat age 20 days
    assert text["mid"].startswith("rel 0.87 (score 6.5) x recency 1.00 (no date) "
                                  "x importance 1.50 (instruction) x useful ")


def test_why_not_names_the_factor(ranking):
    # "weak" lost on its retriever score; "tea" (tool_result, 0.6) on importance.
    weak = ranking.why_not("weak")
    assert weak.factor == "relevance" and weak.rank == 4
    assert "lost most on relevance" in str(weak)
    tea = ranking.why_not("tea")
    assert tea.factor == "importance" and "lost most on importance" in tea.message
    assert tea.score < tea.kth_score
    assert math.isfinite(tea.score)


def test_why_not_errors(ranking):
    with pytest.raises(ValueError, match="is in the top 2"):
        ranking.why_not("lisbon")
    with pytest.raises(KeyError, match="not among the candidates"):
        ranking.why_not("nope")


def test_why_not_recency_and_usefulness_factors():
    old = {"id": "old", "text": "note", "score": 1.0,
           "metadata": {"created_at": NOW - 400 * 86_400}}
    new = {"id": "new", "text": "note", "score": 1.0, "metadata": {"created_at": NOW}}
    # recency on every question (by default only where the question asks for it)
    rr = Reranker(config=Config(scoring=Scoring(intent_recency=RECENCY_EVERY_QUESTION)))
    r = rr.rerank("What did I note?", [new, old], k=1, now=NOW)
    assert r.why_not("old").factor == "recency"


def test_weights_show_in_real_explain():
    cfg = Config(weights=Weights(relevance=2.0, recency=0.0))
    r = Reranker(config=cfg).rerank("What did I note?", [{"id": "a", "text": "t", "score": 1.0}],
                                    now=NOW)[0]
    assert r.explain().startswith("rel 1.00^2 (score 1) x importance 1.00 (default) x useful ")
    assert "recency" not in r.explain()


def test_rankings_compare_by_value():
    import copy

    rr = Reranker()
    cands = [{"id": "a", "text": "Flight on Monday", "score": 2.0},
             {"id": "b", "text": "Tea with Ben", "score": 1.0},
             {"id": "c", "text": "Nothing", "score": 0.5}]
    ranking = rr.rerank("When is the flight?", cands, k=2, now=1_750_000_000.0)
    assert ranking == copy.deepcopy(ranking) and ranking == copy.copy(ranking)
    other = rr.rerank("When is the flight?", cands, k=2, now=1_750_000_000.0)
    assert ranking != other  # another recall id
    assert ranking != "not a ranking"
    with pytest.raises(TypeError):
        hash(ranking)


def test_a_reranked_ranking_is_the_dataclass_it_declares():
    """The reranker builds its Ranking without the dataclass __init__: it must be the same
    object as Ranking(...) with those fields makes, frozen, and survive a pickle."""
    import pickle

    rr = Reranker()
    cands = [{"id": "a", "text": "Flight on Monday", "score": 2.0},
             {"id": "b", "text": "Tea with Ben", "score": 1.0}]
    ranking = rr.rerank("When is the flight?", cands, k=1, now=NOW)
    made = Ranking(**{f.name: getattr(ranking, f.name) for f in dataclasses.fields(Ranking)})
    assert vars(made).keys() == vars(ranking).keys()
    assert made == ranking and repr(made) == repr(ranking)
    assert pickle.loads(pickle.dumps(ranking)) == ranking
    with pytest.raises(dataclasses.FrozenInstanceError):
        ranking.query = "other"  # type: ignore[misc]
