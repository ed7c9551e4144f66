"""RedisState specifics beyond the conformance suite: URLs and options, the layout guard, the
global-layer cache, compact link hashes, and the missing-extra error."""

from __future__ import annotations

import sys

import pytest

from heaprank import ConfigError, MissingDependencyError
from heaprank.records import Impression
from heaprank.state import open_state
from heaprank.state.redis import RedisState
from heaprank.state.redis.layout import key_slot, redis_options, shard_tags
from tests.integration.redis_servers import unique_prefix
from tests.integration.redis_workers import update_of

NOW = 1_750_000_000.0


def _feed(state: RedisState, rid: str, ns: str, used: bool = True) -> None:
    imp = Impression(recall_id=rid, namespace=ns, qtype="when", time=NOW, time_explicit=True,
                     ids=("a",), slots=(("kind:fact", "len:<=3"),))
    state.put_impression(imp)
    assert state.apply([update_of(imp, [used])]) == [True]


def _rid(n: int) -> str:
    import time

    return f"{(int(time.time() * 1000) << 20) | n:016x}"


def test_shard_tags_spread_over_the_slot_range():
    for n in (1, 3, 8, 16):
        slots = [key_slot(f"x:{{{t}}}:g") for t in shard_tags(n)]
        assert [s * n // 16_384 for s in slots] == list(range(n))


def test_key_slot_agrees_with_the_cluster(redis_cluster_url):
    import redis

    client = redis.Redis.from_url(redis_cluster_url.replace("redis+cluster://", "redis://"))
    try:
        for key in ("plain", "a:{tag}:b", "{}empty", "x{y}z{w}", "ключ:{3.1}:g", "{user1000}.x"):
            assert key_slot(key) == client.execute_command("CLUSTER KEYSLOT", key)
    finally:
        client.close()


def test_redis_url_options_are_split_from_redis_py_ones():
    url, options = redis_options("redis://h:1/2?prefix=app&global_shards=4&timeout=0.5&"
                                 "socket_keepalive=true&impression_ttl=60")
    assert url == "redis://h:1/2?socket_keepalive=true"
    assert options == {"prefix": "app", "global_shards": 4, "timeout_s": 0.5,
                       "impression_ttl_s": 60.0}
    with pytest.raises(ConfigError, match="global_shards"):
        redis_options("redis://h/0?global_shards=many")


def test_open_state_redis_url_and_a_client(redis_url):
    import redis

    prefix = unique_prefix()
    state = open_state(f"{redis_url}?prefix={prefix}&global_shards=4")
    assert isinstance(state, RedisState) and state.n_shards == 4 and not state.cluster
    # Another process with another shard count on the same prefix is refused.
    with pytest.raises(ConfigError, match="global_shards=4"):
        RedisState(redis_url, prefix=prefix, global_shards=8)
    client = redis.Redis.from_url(redis_url)
    same = RedisState(client=client, prefix=prefix, global_shards=4)
    _feed(state, _rid(1), "ns")
    assert same.list_links("ns")[0] == state.list_links("ns")[0]
    with pytest.raises(ConfigError, match="decode_responses"):
        RedisState(client=redis.Redis.from_url(redis_url, decode_responses=True), prefix=prefix)
    state.clear()
    state.close()
    same.close()


def test_the_global_cache_serves_pooled_counts_until_its_ttl(redis_url):
    prefix = unique_prefix()
    writer = RedisState(redis_url, prefix=prefix)
    cached = RedisState(redis_url, prefix=prefix, global_cache_ttl_s=3600)
    fresh = RedisState(redis_url, prefix=prefix)
    try:
        _feed(writer, _rid(1), "alice", used=False)
        assert cached.read_links("bob", ["kind:fact"]).gneg[0] == 1.0
        _feed(writer, _rid(2), "carol", used=False)
        assert fresh.read_links("bob", ["kind:fact"]).gneg[0] == 2.0
        assert cached.read_links("bob", ["kind:fact"]).gneg[0] == 1.0  # cached, by design
        assert cached.read_links("bob", ["kind:fact"]).neg[0] == 0.0
    finally:
        writer.clear()
        for s in (writer, cached, fresh):
            s.close()


def test_a_namespace_links_stay_one_compact_string(redis_url):
    state = RedisState(redis_url, prefix=unique_prefix())
    try:
        for n in range(20):
            _feed(state, _rid(n), "ns", used=n % 2 == 0)
        usage = state.memory_usage("ns")
        assert usage["links"] == 4
        assert usage["bytes"] / usage["links"] < 40  # the key's own overhead included
    finally:
        state.clear()
        state.close()


def test_impressions_are_stored_compact_and_read_back(redis_url):
    """Redis keeps impressions in the compact format 2 (float16 values, shared id prefixes);
    what a reranker wrote reads back with its ids and slots exact, its values to float16's
    precision, and its feedback applies."""
    import numpy as np

    from heaprank import Reranker
    from heaprank.state import codec

    state = RedisState(redis_url, prefix=unique_prefix())
    rr = Reranker(state)
    try:
        cands = [{"id": f"user03/m{i:05d}", "text": f"Met Ana in Lisbon on day {i}",
                  "score": 10.0 - i} for i in range(12)]
        ranking = rr.rerank("Where did I meet Ana?", cands, namespace="ns", k=10, now=NOW)
        rid = ranking.recall_id
        body = state.layout.split_stored(
            state.client.hget(state.layout.impression_keys(rid)[0], rid))[1]
        assert body[0] == codec.COMPACT_VERSION
        stored = state.get_impression(rid)
        assert stored.ids == tuple(ranking.ids)
        wide = codec.decode_impression(rid, "ns", codec.encode_impression(stored))
        assert len(body) < len(codec.encode_impression(stored)) * 0.7
        column = stored.signal_names.index("relevance")
        relevance = [r.signals["relevance"] for r in ranking]
        assert np.allclose([row[column] for row in wide.signals], relevance, rtol=2.0 ** -11)
        assert rr.feedback(rid, used=[ranking.ids[0]]).applied == (ranking.ids[0],)
        assert state.get_impression(rid).verdicts[0] == codec.USED
    finally:
        state.clear()
        rr.close()


def test_without_redis_py_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "redis", None)
    with pytest.raises(MissingDependencyError, match=r"heaprank\[redis\]"):
        RedisState("redis://127.0.0.1:6379/15")
