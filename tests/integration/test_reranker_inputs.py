"""The reranker's inputs, each against memory, a real SQLite file and the real Redis server:
one time rule where a stored time meets ``now``, the documented limits (k, query length, the
shown list of an explicit feedback), candidates snapshotted at entry, namespaces named in
feedback, and ids that are ``str`` subclasses."""

from __future__ import annotations

import sys
import threading

import pytest

from heaprank import FeedbackError, InputError, MemoryState, Reranker
from heaprank._checks import MAX_K, MAX_QUERY_CHARS
from heaprank.config import RECENCY_EVERY_QUESTION

NOW = 1_750_000_000.0
DAY = 86_400.0
QUERY = "When is my flight to Lisbon?"
CANDS = [
    {"id": "d1", "text": "Flight to Lisbon on Friday at 9:40", "score": 3.0},
    {"id": "d2", "text": "Booked the hotel near the river", "score": 2.0},
    {"id": "d3", "text": "The weather in Lisbon is mild", "score": 1.0},
]


@pytest.fixture
def rr(state):
    """A reranker on a fresh backend of each kind (conftest's ``state``, which closes it)."""
    return Reranker(state)


# ---------------------------------------------------------------- one time rule

def test_a_feedback_far_from_its_rerank_is_refused_and_learns_nothing(rr):
    ranking = rr.rerank(QUERY, CANDS, namespace="maya", k=3, now=NOW)
    before = rr.stats()["feedbacks"]
    for now, gap in ((7.2e9, r"63\d{3}\.\d days after"), (NOW + 367 * DAY, "367.0 days after"),
                     (NOW - 3600, "1.0 hours before"), (NOW - 301, "5.0 minutes before")):
        with pytest.raises(FeedbackError, match=f"now: .* is {gap} its recall's rerank"):
            rr.feedback(ranking.recall_id, used=["d2"], now=now)
    assert rr.stats()["feedbacks"] == before
    # still open: a feedback with a sane clock applies
    assert rr.feedback(ranking.recall_id, used=["d2"], now=NOW + 60, namespace="maya").applied


def test_a_stored_time_after_now_counts_as_now(rr):
    # recency on every question: its age is explained (by default only where a question asks)
    rr = rr.with_config(scoring={"intent_recency": RECENCY_EVERY_QUESTION})
    ranking = rr.rerank(QUERY, CANDS, namespace="maya", k=3, now=NOW)
    rr.feedback(ranking.recall_id, used=["d2"], now=NOW + 100 * DAY)
    # A rerank dated before that use (a replay, a clock behind) sees the use as just now.
    again = rr.rerank(QUERY, CANDS, namespace="maya", k=3, now=NOW + DAY)
    d2 = next(r for r in again if r.id == "d2")
    assert d2.signals["recency"] == 1.0
    assert "age 0.0d" in d2.explain() and "age -" not in d2.explain()


# ---------------------------------------------------------------- documented limits

def test_k_is_capped_at_what_an_impression_stores(rr):
    with pytest.raises(InputError, match=f"k: must be from 1 to {MAX_K}, got 65536"):
        rr.rerank(QUERY, CANDS, namespace="maya", k=MAX_K + 1, now=NOW)
    assert len(rr.rerank(QUERY, CANDS, namespace="maya", k=MAX_K, now=NOW)) == 3


def test_an_explicit_feedback_shows_at_most_what_an_impression_stores(rr):
    shown = [{"id": f"m{i}", "text": "a note", "score": 1.0} for i in range(MAX_K + 1)]
    with pytest.raises(InputError, match=f"shown: {MAX_K + 1} items, at most {MAX_K} allowed"):
        rr.feedback(namespace="maya", query=QUERY, shown=shown, used=["m0"], now=NOW)
    assert rr.stats()["impressions"] == 0


def test_queries_are_capped(rr):
    with pytest.raises(InputError, match=f"query: {MAX_QUERY_CHARS + 1} characters, at most"):
        rr.rerank("x" * (MAX_QUERY_CHARS + 1), CANDS, namespace="maya", now=NOW)
    with pytest.raises(InputError, match="query: .* at most"):
        rr.feedback(namespace="maya", query="x" * 10_000_000, shown=CANDS, used=["d1"], now=NOW)
    assert rr.rerank("x" * MAX_QUERY_CHARS, CANDS, namespace="maya", now=NOW).ids


# ---------------------------------------------------------------- input snapshotted at entry

def test_candidates_changed_by_another_thread_rank_as_they_were_at_entry():
    rr = Reranker(MemoryState())
    stop = threading.Event()
    # ISO times take the checked (Python) path, which reads each dict several times
    cands = [{"id": f"m{i}", "text": f"Note {i} about Lisbon", "score": float(i),
              "metadata": {"kind": "fact", "created_at": "2025-06-01T10:00:00Z"}}
             for i in range(200)]

    def meddle() -> None:
        i = 0
        while not stop.is_set():
            i += 1
            cands.append({"id": f"x{i}", "text": "added", "score": 0.5,
                          "metadata": {"created_at": "2025-06-01T10:00:00Z"}})
            cands.pop(0)
            for c in cands[:20]:
                c["metadata"][f"k{i % 7}"] = i  # metadata grows and shrinks under the reader
                c["metadata"].pop(f"k{(i + 3) % 7}", None)

    thread = threading.Thread(target=meddle)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can
    thread.start()
    try:
        for t in range(300):
            ranking = rr.rerank(QUERY, cands, namespace="maya", k=5, now=NOW + t)
            assert len(ranking) == 5 and len(set(ranking.ids)) == 5
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(interval)


# ---------------------------------------------------------------- explicit tenancy

def test_an_outcome_without_namespace_lists_only_the_ids_the_caller_named(rr):
    ranking = rr.rerank(QUERY, CANDS, namespace="alice", k=3, now=NOW)
    assert rr.feedback(ranking.recall_id, used=[], now=NOW).applied == ()
    again = rr.rerank(QUERY, CANDS, namespace="alice", k=3, now=NOW)
    out = rr.feedback(again.recall_id, used=["d1"], now=NOW)
    assert out.applied == ("d1",) and out.already_recorded == ()
    third = rr.rerank(QUERY, CANDS, namespace="alice", k=3, now=NOW)
    assert rr.feedback(third.recall_id, used=["d1"], now=NOW, namespace="alice").applied == \
        tuple(third.ids)  # the owner sees every shown id


def test_another_namespaces_recall_reads_as_unknown(rr):
    ranking = rr.rerank(QUERY, CANDS, namespace="alice", k=3, now=NOW)
    with pytest.raises(FeedbackError) as guessed:
        rr.feedback(ranking.recall_id, used=["d1"], namespace="mallory", now=NOW)
    with pytest.raises(FeedbackError) as unknown:
        rr.feedback("r-0-never-issued", used=["d1"], namespace="mallory", now=NOW)
    assert str(guessed.value).replace(ranking.recall_id, "ID") == \
        str(unknown.value).replace("r-0-never-issued", "ID")
    assert "alice" not in str(guessed.value)


def test_feedback_many_takes_the_namespace_and_refuses_other_recalls(rr):
    mine = rr.rerank(QUERY, CANDS, namespace="alice", k=3, now=NOW)
    theirs = rr.rerank(QUERY, CANDS, namespace="bob", k=3, now=NOW)
    out = rr.feedback_many([(mine.recall_id, ["d1"]), (theirs.recall_id, ["d1"])],
                           namespace="alice", now=NOW)
    assert out[0].applied == tuple(mine.ids)
    assert isinstance(out[1], FeedbackError) and "unknown" in str(out[1])
    assert rr.feedback(theirs.recall_id, used=["d2"], namespace="bob", now=NOW).applied


# ---------------------------------------------------------------- odd ids

class Slippery(str):
    """A str whose equality and hash disagree with its value (and with each other)."""

    calls = 0

    def __eq__(self, other: object) -> bool:
        Slippery.calls += 1
        return False

    def __hash__(self) -> int:
        Slippery.calls += 1
        return 7


def test_a_str_subclass_id_counts_as_its_plain_value(rr):
    ranking = rr.rerank(QUERY, CANDS, namespace="maya", k=3, now=NOW)
    Slippery.calls = 0
    out = rr.feedback(ranking.recall_id, used=[Slippery("d2")], now=NOW, namespace="maya")
    assert out.applied == tuple(ranking.ids) and Slippery.calls == 0
    assert rr.state.read_docs("maya", ["d2"]).use_count.tolist() == [1.0]  # used, not ignored
    shown = [{**c, "id": Slippery(c["id"])} for c in CANDS]
    assert rr.rerank(QUERY, shown, namespace="maya", k=3, now=NOW).ids[0] in {"d1", "d2"}
    assert Slippery.calls == 0


def test_an_id_whose_equality_forgets_the_namespace_cannot_reach_the_state(rr):
    ranking = rr.rerank(QUERY, CANDS, namespace="maya", k=3, now=NOW)

    class Reentrant(str):
        def __eq__(self, other: object) -> bool:
            rr.forget_namespace("maya")
            return str.__eq__(self, other)

        __hash__ = str.__hash__

    out = rr.feedback(ranking.recall_id, used=[Reentrant("d1")], now=NOW, namespace="maya")
    assert out.applied == tuple(ranking.ids)
    assert rr.state.read_docs("maya", ["d1"]).use_count.tolist() == [1.0]
