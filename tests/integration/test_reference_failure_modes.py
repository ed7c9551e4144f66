"""The reference system's failure modes, one test each: heaprank must not repeat them."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from heaprank import FeedbackError, Reranker, SQLiteState
from heaprank.model.features import shape_of
from heaprank.model.questions import analyze_query

NOW = 1_750_000_000.0
DAY = 86_400.0
QUERY = "When is my flight to Lisbon?"
CANDS = [
    {"id": "lisbon", "text": "My flight to Lisbon is on March 3", "score": 7.3,
     "metadata": {"kind": "fact", "created_at": NOW - 20 * DAY}},
    {"id": "seat", "text": "I prefer window seats", "score": 5.1,
     "metadata": {"kind": "preference"}},
    {"id": "price", "text": "Flights to Lisbon cost $400", "score": 6.0,
     "metadata": {"kind": "tool_result"}},
    {"id": "chat", "text": "ok thanks", "score": 1.0},
]


@pytest.fixture(params=["memory", "sqlite"])
def rr(request, tmp_path):
    if request.param == "memory":
        yield Reranker()
    else:
        with Reranker(SQLiteState(tmp_path / "ref.db")) as reranker:
            yield reranker


def _evidence(rr: Reranker):
    features, pos, neg = rr.state.list_links(None)
    return features, pos.tolist(), neg.tolist()


def test_the_same_feedback_twice_counts_once(rr):
    ranking = rr.rerank(QUERY, CANDS, namespace="maya", k=3, now=NOW)
    rr.feedback(ranking.recall_id, used=["lisbon"])
    links, stats, report = _evidence(rr), rr.stats(), rr.links("*")
    docs = rr.state.read_docs("maya", ranking.ids)
    out = rr.feedback(ranking.recall_id, used=["lisbon"], namespace="maya")
    assert out.applied == () and set(out.already_recorded) == set(ranking.ids)
    assert _evidence(rr) == links and rr.stats() == stats
    again = rr.state.read_docs("maya", ranking.ids)
    assert again.use_count.tolist() == docs.use_count.tolist()
    assert rr.links("*") == report


def test_feedback_naming_an_id_not_shown_is_rejected(rr):
    ranking = rr.rerank(QUERY, CANDS, namespace="maya", k=2, now=NOW)
    hidden = next(c["id"] for c in CANDS if c["id"] not in ranking.ids)  # a candidate, not shown
    before = _evidence(rr)
    with pytest.raises(FeedbackError, match=f"'{hidden}' was not shown"):
        rr.feedback(ranking.recall_id, used=[ranking.ids[0], hidden])
    with pytest.raises(FeedbackError, match="'never-seen' was not shown"):
        rr.feedback(ranking.recall_id, used=["never-seen"])
    assert _evidence(rr) == before and rr.stats()["feedbacks"] == 0
    assert rr.feedback(ranking.recall_id, used=[ranking.ids[0]]).applied  # still open


def test_unknown_recall_ids_are_rejected(rr):
    with pytest.raises(FeedbackError, match="recall_id 'nope': unknown"):
        rr.feedback("nope", used=["lisbon"])
    with pytest.raises(FeedbackError, match="unknown"):
        rr.mark_used("nope", ["lisbon"])
    assert rr.stats()["feedbacks"] == 0


def test_an_impression_does_not_expire_after_a_few_later_recalls(rr):
    first = rr.rerank(QUERY, CANDS, namespace="maya", k=3, now=NOW)
    for t in range(1, 301):
        rr.rerank(QUERY, CANDS, namespace="maya" if t % 2 else "ben", k=3, now=NOW + t)
    out = rr.feedback(first.recall_id, used=["lisbon"], namespace="maya")
    assert out.applied == tuple(first.ids)
    assert rr.state.read_docs("maya", ["lisbon"]).last_used[0] == NOW


@pytest.mark.parametrize("text, expected", [
    ("Lunch with Zoë tomorrow", {"ent:yes", "date:yes"}),
    ("Мы летим в Москва 3 мая", {"ent:yes", "num:yes"}),
    ("Встреча в Москве в 10:30", {"ent:yes", "num:yes", "date:yes"}),
    ("会议在3月14日", {"date:yes", "num:yes"}),
])
def test_non_ascii_text_keeps_its_features(rr, text, expected):
    assert expected <= set(shape_of(text, None, None, frozenset(), ()).slots)
    ranking = rr.rerank("Who is Zoë?", [{"id": "x", "text": text, "score": 1.0}],
                        namespace="n", k=1, now=NOW)
    features = set(rr.state.get_impression(ranking.recall_id).features[0])
    assert expected <= features
    assert {f"qt:who&{f}" for f in expected} <= features


def test_non_ascii_query_names_are_matched(rr):
    assert {"zoë", "москва"} <= analyze_query("When did Zoë fly to Москва?").names
    ranking = rr.rerank("When did Zoë fly to Москва?",
                        [{"id": "x", "text": "она прилетела в Москва с Zoë", "score": 1.0}],
                        namespace="n", k=1, now=NOW)
    assert "qent:yes" in rr.state.get_impression(ranking.recall_id).features[0]


@pytest.mark.parametrize("query", ["", "the of and", "   "])
def test_empty_or_stop_word_query_ranks_by_the_other_signals(rr, query):
    cands = [
        {"id": "weak-but-important", "text": "Always answer in French", "score": 0.1,
         "metadata": {"kind": "instruction"}},
        {"id": "strong-match", "text": "Some tool output", "score": 9.0,
         "metadata": {"kind": "tool_result"}},
    ]
    ranking = rr.rerank(query, cands, namespace="n", k=2, now=NOW)
    assert ranking.qtype == "other"
    assert ranking.ids == ["weak-but-important", "strong-match"]
    for r in ranking:
        assert r.signals["relevance"] == 1.0
        assert "rel 1.00 (empty query)" in r.explain()
        assert "query has no content words: ranked by the other signals" in r.explain()
    rr.feedback(ranking.recall_id, used=["weak-but-important"])  # a valid query: learns too


def test_feedback_uses_the_reranks_now_not_the_wall_clock(rr):
    past = NOW - 400 * DAY  # far from the wall clock either way
    undated = [c for c in CANDS if "created_at" not in c.get("metadata", {})]
    ranking = rr.rerank(QUERY, undated, namespace="maya", k=2, now=past)
    rr.feedback(ranking.recall_id, used=[ranking.ids[0]])
    docs = rr.state.read_docs("maya", ranking.ids)
    assert docs.last_used[0] == past and np.isnan(docs.last_used[1])
    rr.mark_used(rr.rerank(QUERY, undated, namespace="maya", k=1, now=past + 60).recall_id,
                 [ranking.ids[0]])
    assert rr.state.read_docs("maya", ranking.ids[:1]).last_used[0] == past + 60


def test_feedback_after_a_restart(tmp_path):
    path = tmp_path / "restart.db"
    with Reranker(f"sqlite:///{path}") as first:
        ranking = first.rerank(QUERY, CANDS, namespace="maya", k=3, now=NOW)
    with Reranker(f"sqlite:///{path}") as second:
        out = second.feedback(ranking.recall_id, used=["lisbon"], namespace="maya")
        assert out.applied == tuple(ranking.ids)
        assert second.state.read_docs("maya", ["lisbon"]).last_used[0] == NOW
        assert second.links("maya")


def test_feedback_from_another_process(tmp_path):
    path = tmp_path / "other.db"
    with Reranker(SQLiteState(path)) as rr:
        ranking = rr.rerank(QUERY, CANDS, namespace="maya", k=3, now=NOW)
        code = ("import sys; from heaprank import Reranker, SQLiteState\n"
                "with Reranker(SQLiteState(sys.argv[1])) as rr:\n"
                "    print(len(rr.feedback(sys.argv[2], used=['lisbon'], namespace='maya').applied))\n")
        done = subprocess.run([sys.executable, "-c", code, str(path), ranking.recall_id],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "3"
        assert rr.stats()["feedbacks"] == 1  # this process sees the other's write
        assert rr.state.read_docs("maya", ["lisbon"]).use_count[0] == 1.0
        with pytest.raises(FeedbackError, match="already recorded as used"):
            rr.feedback(ranking.recall_id, used=[])
