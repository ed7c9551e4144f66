"""Redis failures: a server (started here, AOF on) killed and restarted mid-stream, connections
killed with CLIENT KILL, and a server that is down. No feedback is half-applied, retries never
double count, rerank degrades to the retriever and the priors, feedback raises and can be retried.

A Cluster master killed with its replica promoted: ``test_redis_failover.py``.
"""

from __future__ import annotations

import logging
import threading
import time

import pytest

from heaprank import Reranker, StateUnavailableError
from heaprank.state.redis import RedisState
from tests.integration import redis_workers as workers
from tests.integration.redis_servers import unique_prefix

pytestmark = pytest.mark.slow
NOW = 1_750_000_000.0
CANDIDATES = [{"id": "lisbon", "text": "My flight to Lisbon is on March 3", "score": 7.3},
              {"id": "seat", "text": "I prefer window seats", "score": 5.1},
              {"id": "chat", "text": "ok", "score": 1.0}]


#: StateUnavailableErrors seen while retrying: proof that a test did hit the failure.
FAILURES: list[str] = []


def test_a_server_killed_and_restarted_mid_stream_loses_and_doubles_nothing(aof_server):
    plan = list(workers.plan(0, 300, int(time.time() * 1000)))
    state = RedisState(aof_server.url, prefix=unique_prefix(), timeout_s=0.5, retries=1)
    progress: list = []
    FAILURES.clear()
    writer = threading.Thread(target=workers.feed_until_applied,
                              args=(state, plan, progress, FAILURES))
    writer.start()
    try:
        for _ in range(2):  # kill -9 twice while feedback streams in, restart from the AOF
            while len(progress) < 100 * (_ + 1) and writer.is_alive():
                time.sleep(0.005)
            aof_server.stop(hard=True)
            time.sleep(0.3)
            aof_server.start()
    finally:
        writer.join(timeout=120)
    assert not writer.is_alive() and len(progress) == len(plan)
    assert FAILURES  # the writer did run into the dead server
    assert workers.snapshot(state) == workers.serial_snapshot(plan)
    assert state.stats()["feedbacks"] == len(plan)
    state.close()


def test_client_kill_mid_stream_loses_and_doubles_nothing(redis_url):
    import redis

    plan = list(workers.plan(1, 300, int(time.time() * 1000)))
    name = unique_prefix()  # the shared server has other clients: drop this test's only
    state = RedisState(f"{redis_url}?client_name={name}", prefix=unique_prefix())
    killer = redis.Redis.from_url(redis_url)
    progress: list = []
    writer = threading.Thread(target=workers.feed_until_applied,
                              args=(state, plan, progress, FAILURES))
    writer.start()
    kills = 0
    try:
        while writer.is_alive() and kills < 20:
            time.sleep(0.02)
            kills += sum(int(killer.client_kill_filter(_id=c["id"]) or 0)
                         for c in killer.client_list() if c.get("name") == name)
    finally:
        writer.join(timeout=120)
    try:
        assert kills > 0 and len(progress) == len(plan)
        assert workers.snapshot(state) == workers.serial_snapshot(plan)
        assert state.stats()["feedbacks"] == len(plan)
    finally:
        state.clear()
        state.close()
        killer.close()


def test_rerank_degrades_and_feedback_raises_while_the_server_is_down(aof_server, caplog):
    state = RedisState(aof_server.url, prefix=unique_prefix(), timeout_s=0.3, retries=1)
    rr = Reranker(state)
    first = rr.rerank("When is my flight?", CANDIDATES, namespace="maya", k=2, now=NOW)
    learned = rr.feedback(first.recall_id, used=["lisbon"])
    assert learned.applied
    before = workers.snapshot(state)
    again = rr.rerank("When is my flight?", CANDIDATES, namespace="maya", k=2, now=NOW)
    aof_server.stop(hard=True)
    try:
        with caplog.at_level(logging.WARNING, logger="heaprank"):
            down = rr.rerank("When is my flight?", CANDIDATES, namespace="maya", k=2, now=NOW)
        assert down.ids  # the retriever-plus-priors ranking
        assert all("state unavailable" in item.explain() for item in down.items)
        assert "state unavailable" in caplog.text
        with pytest.raises(StateUnavailableError):
            Reranker(state, strict=True).rerank("When?", CANDIDATES, namespace="maya", now=NOW)
        with pytest.raises(StateUnavailableError):
            rr.feedback(again.recall_id, used=["lisbon"])
    finally:
        aof_server.start()
    # Nothing was lost while it was down, and the retry applies the feedback once.
    assert workers.snapshot(state) == before
    assert rr.feedback(again.recall_id, used=["lisbon"]).applied
    assert rr.feedback(again.recall_id, used=["lisbon"]).applied == ()
    state.close()
