"""A PostgreSQL server (started here, of this test alone) stopped as a crash stops it and
started again on the same port: while it is down a rerank ranks on the retriever and the
priors, flagged in EXPLAIN, and the state's calls and feedback raise StateUnavailableError;
once it is back the next call works, and everything learned before is there, once."""

from __future__ import annotations

import logging

import pytest

from heaprank import Reranker, StateUnavailableError
from heaprank.state.postgres import PostgresState

pytestmark = pytest.mark.slow
NOW = 1_750_000_000.0
CANDIDATES = [{"id": "lisbon", "text": "My flight to Lisbon is on March 3", "score": 7.3},
              {"id": "seat", "text": "I prefer window seats", "score": 5.1},
              {"id": "chat", "text": "ok", "score": 1.0}]


def _learned(state: PostgresState) -> tuple:
    """What the state has learned for namespace ``maya`` and the pool."""
    names, pos, neg = state.list_links("maya")
    pooled = state.list_links(None)
    return (names, pos.tolist(), neg.tolist(), pooled[0], pooled[1].tolist(),
            state.iter_docs("maya"), state.stats()["feedbacks"])


def test_a_server_restart_degrades_reranks_and_the_next_call_reconnects(private_postgres,
                                                                         caplog):
    state = PostgresState(private_postgres.url, timeout_s=1.0)
    rr = Reranker(state)
    try:
        first = rr.rerank("When is my flight?", CANDIDATES, namespace="maya", k=2, now=NOW)
        again = rr.rerank("When is my flight?", CANDIDATES, namespace="maya", k=2, now=NOW)
        # (a feedback's commit waits for the disk, and so makes the impressions committed
        # before it durable too: alone, an impression may be lost in a crash, docs/postgres.md)
        assert rr.feedback(first.recall_id, used=["lisbon"]).applied == ("lisbon",)
        before = _learned(state)
        private_postgres.stop("immediate")
        try:
            with caplog.at_level(logging.WARNING, logger="heaprank"):
                down = rr.rerank("When is my flight?", CANDIDATES, namespace="maya", k=2, now=NOW)
            assert down.ids  # the retriever-plus-priors ranking
            assert all("state unavailable" in item.explain() for item in down.items)
            assert "state unavailable" in caplog.text
            with pytest.raises(StateUnavailableError, match="no connection to the server"):
                state.stats()  # (the pool has none left, and none can be made)
            with pytest.raises(StateUnavailableError):
                Reranker(state, strict=True).rerank("When?", CANDIDATES, namespace="maya",
                                                    now=NOW)
            with pytest.raises(StateUnavailableError):
                rr.feedback(again.recall_id, used=["lisbon"])
        finally:
            private_postgres.start()
        assert _learned(state) == before  # the next call reconnects; nothing was lost
        assert rr.feedback(again.recall_id, used=["lisbon"]).applied == ("lisbon",)
        assert rr.feedback(again.recall_id, used=["lisbon"]).applied == ()
        assert state.stats()["feedbacks"] == before[-1] + 1
    finally:
        rr.close()


def test_a_restart_between_two_calls_costs_at_most_one_call(private_postgres):
    state = PostgresState(private_postgres.url, timeout_s=1.0)
    try:
        rr = Reranker(state)
        first = rr.rerank("When is my flight?", CANDIDATES, namespace="maya", k=2, now=NOW)
        rr.feedback(first.recall_id, used=["lisbon"])
        before = _learned(state)
        private_postgres.stop("immediate")
        private_postgres.start()  # the pool's connections are dead, unknown to it
        try:
            state.stats()
        except StateUnavailableError as exc:  # the dead connection, named; then reconnected
            assert "was lost or refused" in str(exc) and "the next call reconnects" in str(exc)
        assert _learned(state) == before
    finally:
        state.close()
