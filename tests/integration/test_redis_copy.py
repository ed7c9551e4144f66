"""``heaprank state copy``: SQLite -> Redis (server and Cluster) -> SQLite, and memory -> Redis,
rank identically (same ids, scores to 1e-12) and keep every impression's feedback going."""

from __future__ import annotations

import numpy as np
import pytest

from heaprank import MemoryState, Reranker, SQLiteState, StateError
from heaprank.app.cli import main
from heaprank.state import open_state
from heaprank.state.copy import copy_state
from heaprank.state.redis import RedisState
from tests.integration.redis_servers import unique_prefix

NOW = 1_750_000_000.0
CANDIDATES = [
    {"id": "lisbon", "text": "My flight to Lisbon is on March 3", "score": 7.3,
     "metadata": {"kind": "fact", "created_at": NOW - 86_400 * 20}},
    {"id": "seat", "text": "I prefer window seats", "score": 5.1,
     "metadata": {"kind": "preference", "source": "maya"}},
    {"id": "price", "text": "Flights usually cost $400", "score": 6.0, "metadata": {"kind": "tool_result"}},
    {"id": "chat", "text": "ok", "score": 1.0},
]
PLAN = [("maya", "When is my flight to Lisbon?", ["lisbon"]),
        ("maya", "What seat do I like?", ["seat"]),
        ("ben", "How much are flights?", ["price", "lisbon"]),
        ("ben", "Who is Maya?", []),
        ("zoe", "When do I leave?", ["lisbon"])]


def _counts(stats: dict[str, int]) -> dict[str, int]:
    """The counts of a ``stats()``, not the caps (Redis has no count cap on open impressions)."""
    return {k: v for k, v in stats.items() if not k.startswith("max_")}


def _teach(rr: Reranker) -> str:
    """Feedback in three namespaces, one forgotten without scrub (its evidence stays pooled);
    returns the recall id of a ranking still waiting for feedback."""
    for t, (ns, query, used) in enumerate(PLAN * 3):
        ranking = rr.rerank(query, CANDIDATES, namespace=ns, k=3, now=NOW + 60 * t)
        rr.feedback(ranking.recall_id, used=[u for u in used if u in ranking.ids])
    rr.forget_namespace("zoe", scrub_global=False)
    return rr.rerank("When is my flight?", CANDIDATES, namespace="maya", k=3, now=NOW).recall_id


def _same_ranking(a: Reranker, b: Reranker) -> None:
    for ns in ("maya", "ben", "zoe", "new"):
        for _, query, _ in PLAN:
            ra = a.rerank(query, CANDIDATES, namespace=ns, k=4, now=NOW + 3600, track=False)
            rb = b.rerank(query, CANDIDATES, namespace=ns, k=4, now=NOW + 3600, track=False)
            assert ra.ids == rb.ids
            # (Redis keeps a namespace's counts as float32: about 7 significant digits)
            np.testing.assert_allclose([i.score for i in ra.items], [i.score for i in rb.items],
                                       rtol=1e-6, atol=0)
    for ns in ("*", "maya", "ben"):
        la, lb = a.links(ns), b.links(ns)
        assert la  # not vacuous
        assert [link.feature for link in la] == [link.feature for link in lb]
        np.testing.assert_allclose([link.p for link in la], [link.p for link in lb], rtol=1e-6)


@pytest.mark.parametrize("kind", ["redis", "redis-cluster"])
def test_copy_sqlite_to_redis_and_back_ranks_identically(kind, request, tmp_path, capsys):
    url = request.getfixturevalue("redis_url" if kind == "redis" else "redis_cluster_url")
    prefix = unique_prefix()
    redis_url = f"{url}{'&' if '?' in url else '?'}prefix={prefix}"
    source_url, back_url = f"sqlite:///{tmp_path / 'src.db'}", f"sqlite:///{tmp_path / 'back.db'}"
    source = Reranker(source_url)
    waiting = _teach(source)
    source.close()
    try:
        assert main(["state", "copy", source_url, redis_url]) == 0
        assert main(["state", "copy", redis_url, back_url]) == 0
        assert "copied" in capsys.readouterr().out
        src, red, back = (Reranker(u) for u in (source_url, redis_url, back_url))
        assert isinstance(red.state, RedisState)
        assert _counts(src.stats()) == _counts(red.stats()) == _counts(back.stats())
        _same_ranking(src, red)
        _same_ranking(src, back)
        # The impression waiting for feedback came along: feedback applies on the copy.
        assert red.feedback(waiting, used=["lisbon"]).applied
        # Copying into a state that holds something is refused, never merged.
        assert main(["state", "copy", source_url, redis_url]) == 2
        assert "not empty" in capsys.readouterr().err
        for rr in (src, back):
            rr.close()
    finally:
        state = open_state(redis_url)
        assert isinstance(state, RedisState)
        state.clear()
        state.close()


def test_copy_memory_to_redis(redis_url):
    memory = Reranker(MemoryState())
    _teach(memory)
    target = RedisState(redis_url, prefix=unique_prefix())
    try:
        assert _counts(copy_state(memory.state, target)) == _counts(memory.state.stats())
        _same_ranking(memory, Reranker(target))
        with pytest.raises(StateError, match="not empty"):
            copy_state(memory.state, target)
    finally:
        target.clear()
        target.close()


def test_copy_to_memory_is_refused(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    SQLiteState(tmp_path / "x.db").close()
    assert main(["state", "copy", url, "memory://"]) == 2
    assert "memory://" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["redis", "redis-cluster"])
def test_copy_carries_the_co_use_edges(kind, request, tmp_path):
    from heaprank import Config, CoUse, Learning

    cfg = Config(learning=Learning(co_use=CoUse())).with_weights(association=1.0)
    source = Reranker(SQLiteState(tmp_path / "src.db"), config=cfg)
    _teach(source)  # ben uses price and lisbon together
    url = request.getfixturevalue("redis_url" if kind == "redis" else "redis_cluster_url")
    red = RedisState(url, prefix=unique_prefix())
    back = SQLiteState(tmp_path / "back.db")
    try:
        copy_state(source.state, red)
        copy_state(red, back)
        edges = source.state.list_edges("ben")
        assert edges and red.list_edges("ben") == edges == back.list_edges("ben")
        _same_ranking(Reranker(red, config=cfg), source)
        # the copy goes on learning: one more co-use strengthens the copied edge, not a new one
        ranking = Reranker(red, config=cfg).rerank("How much?", CANDIDATES, namespace="ben", k=3,
                                                   now=NOW + 7200)
        Reranker(red, config=cfg).feedback(ranking.recall_id, used=["price", "lisbon"])
        ((a, b, _, count, _),) = red.list_edges("ben")
        assert (a, b, count) == ("lisbon", "price", edges[0][3] + 1)
    finally:
        source.close()
        back.close()
        red.clear()
        red.close()
