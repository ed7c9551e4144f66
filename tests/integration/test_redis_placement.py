"""Redis layout 2: where the keys go. Namespaces spread over the Cluster's slots by a tag derived
from their name alone; the pooled layer is placed by feature, apart from any namespace; the
admin calls find every key through the registry, without a scan of the keyspace."""

from __future__ import annotations

import pytest

from heaprank import ConfigError, Reranker
from heaprank.state.redis import RedisState
from heaprank.state.redis.layout import BUCKETS, KeyLayout, key_slot, slot_tags
from tests.integration.redis_servers import unique_prefix

NOW = 1_750_000_000.0
CANDIDATES = [{"id": "lisbon", "text": "My flight to Lisbon is on March 3", "score": 7.3,
               "metadata": {"kind": "fact"}},
              {"id": "seat", "text": "I prefer window seats", "score": 5.1},
              {"id": "chat", "text": "ok", "score": 1.0}]


def test_every_bucket_tag_sits_in_its_own_slot():
    tags = slot_tags()
    assert len(tags) == BUCKETS and all(len(t) <= 3 for t in tags)
    assert [key_slot(f"p:{{{t}}}:l:x") for t in tags] == list(range(BUCKETS))


def test_ten_thousand_namespaces_spread_over_at_least_4000_slots():
    layout = KeyLayout("heaprank", 32)
    names = [f"user:{i:06d}" for i in range(10_000)]
    slots = {key_slot(layout.ns_key(kind, ns)) for ns in names for kind in "l"}
    assert len(slots) >= 4_000
    # A namespace's keys share one slot whatever its name holds ({, }, spaces, non-ASCII).
    for ns in ("{evil}", "a}b{c", "ключ", "with space", "{}"):
        own = {key_slot(k) for k in (layout.ns_key("l", ns), layout.ns_key("d", ns),
                                     layout.body_key(ns, "0" * 16), layout.bucket_key(ns, "n"))}
        assert own == {layout.bucket(ns)}


def test_the_pooled_layer_is_placed_by_feature_apart_from_namespaces():
    layout = KeyLayout("heaprank", 32)
    shards = [key_slot(k) for k in layout.pooled]
    assert [s * 32 // 16_384 for s in shards] == list(range(32))  # even over the slot range
    features = [f"qt:when&kind:k{i}" for i in range(1_000)]
    used = {layout.shard_of(f) for f in features}
    assert len(used) == 32  # features spread over every shard


def test_odd_namespace_names_rank_learn_and_forget_in_a_cluster(redis_cluster_url):
    state = RedisState(redis_cluster_url, prefix=unique_prefix())
    rr = Reranker(state)
    try:
        for ns in ("{evil}", "a}b{c", "ключ"):
            r = rr.rerank("When is my flight?", CANDIDATES, namespace=ns, k=3, now=NOW)
            assert rr.feedback(r.recall_id, used=["lisbon"]).applied
        assert state.namespaces() == sorted(["{evil}", "a}b{c", "ключ"])
        assert state.list_links(None)[0]
        rr.forget_namespace("{evil}")
        assert state.namespaces() == sorted(["a}b{c", "ключ"])
        assert state.stats()["namespaces"] == 2
    finally:
        state.clear()
        rr.close()


def test_a_layout_1_state_is_refused_with_the_command_that_converts_it(redis_url):
    import redis

    prefix = unique_prefix()
    client = redis.Redis.from_url(redis_url)
    client.set(f"{prefix}:meta", "8")  # what heaprank before layout 2 wrote
    try:
        with pytest.raises(ConfigError, match="heaprank state migrate"):
            RedisState(redis_url, prefix=prefix)
    finally:
        client.delete(f"{prefix}:meta")
        client.close()


def test_admin_calls_do_not_scan_the_keyspace(redis_url, monkeypatch):
    state = RedisState(redis_url, prefix=unique_prefix())
    rr = Reranker(state)
    try:
        for ns in ("alice", "bob"):
            r = rr.rerank("When is my flight?", CANDIDATES, namespace=ns, k=3, now=NOW)
            rr.feedback(r.recall_id, used=["lisbon"])

        def no_scan(*args, **kwargs):  # type: ignore[no-untyped-def]
            raise AssertionError("SCAN of the keyspace")
        monkeypatch.setattr(state.client, "scan_iter", no_scan)
        monkeypatch.setattr(state.client, "scan", no_scan)
        assert state.namespaces() == ["alice", "bob"]
        assert state.stats()["impressions"] == 2
        state.forget_namespace("alice")
        assert state.namespaces() == ["bob"]
        assert [i.namespace for i in state.feedback_log()] == ["bob"]
        monkeypatch.undo()
    finally:
        state.clear()
        rr.close()
