"""Start-up checks of the Redis backend on servers this test starts: an eviction policy that may
evict learned keys is refused (``eviction="strict"``) or warned about loudly; a state may read
from a replica (``replica_url``)."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from heaprank import ConfigError, Reranker
from heaprank.state.redis import RedisState
from tests.integration.redis_servers import RedisServer, have_binaries, unavailable

NOW = 1_750_000_000.0
CANDIDATES = [{"id": "lisbon", "text": "My flight to Lisbon is on March 3", "score": 7.3,
               "metadata": {"kind": "fact"}},
              {"id": "seat", "text": "I prefer window seats", "score": 5.1}]


@pytest.fixture()
def servers(tmp_path: Path):  # type: ignore[no-untyped-def]
    if not have_binaries():
        unavailable("redis-server / redis-cli are not installed")
    started: list[RedisServer] = []

    def start(*args: str) -> RedisServer:
        started.append(RedisServer(tmp_path / f"s{len(started)}", "--appendonly", "no", *args))
        return started[-1]
    yield start
    for server in started:
        server.stop()


def test_an_allkeys_eviction_policy_is_refused_in_strict_mode_and_warned_of(servers, caplog):
    server = servers("--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru")
    with pytest.raises(ConfigError, match="allkeys-lru may evict learned links"):
        RedisState(server.url, eviction="strict")
    with caplog.at_level(logging.WARNING, logger="heaprank"):
        RedisState(server.url).close()
    assert "maxmemory-policy allkeys-lru" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="heaprank"):
        RedisState(server.url, eviction="ignore").close()
    assert "maxmemory-policy" not in caplog.text


def test_noeviction_and_volatile_policies_open_quietly(servers, caplog):
    for policy in ("noeviction", "volatile-lru"):
        server = servers("--maxmemory", "100mb", "--maxmemory-policy", policy)
        with caplog.at_level(logging.WARNING, logger="heaprank"):
            RedisState(server.url, eviction="strict").close()
        assert "maxmemory-policy" not in caplog.text


def test_reranks_read_from_a_replica(servers):
    import redis

    primary = servers()
    replica = servers("--replicaof", "127.0.0.1", str(primary.port))
    state = RedisState(primary.url, replica_url=replica.url)
    rr = Reranker(state)
    try:
        r = rr.rerank("When is my flight?", CANDIDATES, namespace="ns", k=2, now=NOW)
        rr.feedback(r.recall_id, used=["lisbon"])
        direct = redis.Redis.from_url(primary.url, socket_timeout=60)
        on_replica = redis.Redis.from_url(replica.url, socket_timeout=60)
        deadline = time.monotonic() + 60  # a busy host: the first sync may take a while
        while on_replica.info("replication").get("master_link_status") != "up" \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        assert direct.wait(1, 30_000) == 1  # replicated
        before = on_replica.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)
        again = rr.rerank("When is my flight?", CANDIDATES, namespace="ns", k=2, now=NOW)
        after = on_replica.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)
        assert after == before + 1  # the read ran on the replica
        assert again.items[0].signals["usefulness"] > r.items[0].signals["usefulness"]
        direct.close()
        on_replica.close()
    finally:
        rr.close()
