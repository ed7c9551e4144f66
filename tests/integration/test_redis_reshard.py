"""``heaprank state reshard``: the pooled layer moves to another shard count (32 -> 64, then
64 -> 8) while 4 writer processes apply feedback; the result equals all the feedbacks applied
serially, exactly, on one server and on a 3-master Cluster (freeze, copy, tombstone). A
resharder killed with SIGKILL part-way is run again and finishes; a process opened before the
reshard (its G stale) keeps working; a forget's outbox entry pushed twice on one server counts
once."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time

import pytest
import redis

from heaprank.app.cli import main as cli
from heaprank.errors import ConfigError
from heaprank.state.redis import RedisState
from heaprank.state.redis.connect import connect
from heaprank.state.redis.layout import Placement
from heaprank.state.redis.reshard import reshard
from tests.integration import redis_workers as workers
from tests.integration.redis_servers import unique_prefix

pytestmark = pytest.mark.slow

WRITERS, FEEDBACKS = 4, 300


def _placement(client: redis.Redis, prefix: str) -> Placement:
    return Placement.parse(client.get(f"{prefix}:meta").decode())


def _url(kind: str, request) -> str:  # type: ignore[no-untyped-def]
    return request.getfixturevalue("redis_url" if kind == "redis" else "redis_cluster_url")


KINDS = pytest.mark.parametrize("kind", ["redis", "redis-cluster"])


def _with_writers(url: str, prefix: str, born_ms: int, first: int, during):  # type: ignore[no-untyped-def]
    """Run ``during()`` while WRITERS processes apply their plans; -> (its result, the
    writers' (applied, repeated, start, end))."""
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager, ctx.Pool(WRITERS) as pool:
        gate = manager.Barrier(WRITERS + 1)
        running = pool.starmap_async(workers.run_worker, [
            (url, prefix, first + w, FEEDBACKS, born_ms, 10, gate) for w in range(WRITERS)])
        gate.wait(timeout=120)
        time.sleep(0.3)  # the writers are writing
        started = time.monotonic()
        result = during()
        ended = time.monotonic()
        results = running.get(300)
    # The writers really wrote while the shards moved.
    assert min(r[2] for r in results) < ended and started < max(r[3] for r in results), \
        (started, ended, results)
    return result, results


def _serial(born_ms: int, writers: list[int]) -> dict:
    """The serial result of writers 0 and 1 (100 feedbacks each) and the others' plans."""
    return workers.serial_snapshot([pair for w in writers for pair in workers.plan(
        w, 100 if w < 2 else FEEDBACKS, born_ms)])


@KINDS
def test_resharding_while_4_writers_run_loses_and_doubles_nothing(kind, request):
    redis_url = _url(kind, request)
    prefix = unique_prefix()
    born_ms = int(time.time() * 1000)
    client = connect(redis_url, 5.0)
    state = RedisState(redis_url, prefix=prefix)
    stale = RedisState(redis_url, prefix=prefix)  # opened at G = 32, never told
    cached = RedisState(redis_url, prefix=prefix, global_cache_ttl_s=60.0)  # reads pipelined
    features = [*workers.KINDS, *workers.LENGTHS]
    try:
        workers.apply(state, 0, 100, born_ms)  # some pooled rows before the first move
        assert cached.read_links("ns-a", features).gpos.sum() > 0  # cached at G = 32
        up, _ = _with_writers(redis_url, prefix, born_ms, 10,
                              lambda: reshard(state, 64, pause_s=0.02))
        assert (up["from"], up["to"], up["epoch"], up["moved"]) == (32, 64, 1, 32)
        assert _placement(client, prefix) == Placement(64, 1)
        workers.apply(stale, 1, 100, born_ms)  # its G was 32: it reloads the meta and goes on
        assert stale.n_shards == 64
        down, _ = _with_writers(redis_url, prefix, born_ms, 20,
                                lambda: reshard(state, 8, pause_s=0.01))
        assert (down["from"], down["to"], down["epoch"], down["moved"]) == (64, 8, 2, 64)
        serial = _serial(born_ms, [0, 1, *range(10, 10 + WRITERS), *range(20, 20 + WRITERS)])
        assert workers.snapshot(state) == serial  # exact: not one increment lost or doubled
        assert workers.snapshot(stale) == serial
        # The cached reader: told by the meta in its pipeline, it reads the moved rows again.
        want = state.read_links("ns-a", features)
        got = cached.read_links("ns-a", features)
        assert got.gpos.tolist() == want.gpos.tolist()
        assert got.gneg.tolist() == want.gneg.tolist() and cached.n_shards == 8
        # Only the 8 shards of epoch 2 hold pooled rows; the old ones are gone (in a Cluster
        # a tombstone stays: its version -1 alone).
        shards = [k.decode() for k in client.scan_iter(match=f"{prefix}:{{g*}}:g")]
        live = [k for k in shards if client.hgetall(k) != {b"": b"-1"}]
        assert len(live) == 8 and all("{g2e" in k for k in live), live
        assert reshard(state, 8)["moved"] == 0  # nothing left to do
    finally:
        state.clear()
        state.close()
        stale.close()
        cached.close()
        client.close()


@KINDS
def test_a_resharder_killed_part_way_is_run_again(kind, request):
    redis_url = _url(kind, request)
    prefix = unique_prefix()
    born_ms = int(time.time() * 1000)
    client = connect(redis_url, 5.0)
    state = RedisState(redis_url, prefix=prefix)
    url = f"{redis_url}?prefix={prefix}"
    try:
        workers.apply(state, 0, 100, born_ms)

        def kill_then_rerun() -> dict:
            proc = subprocess.Popen([sys.executable, "-m", "heaprank", "state", "reshard", url,
                                     "--shards", "64", "--pause", "0.05"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 60
            while _placement(client, prefix).moved < 8 and time.monotonic() < deadline:
                time.sleep(0.005)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            half = _placement(client, prefix)
            assert half.target == 64 and 8 <= half.moved < 32, half  # killed part-way
            with pytest.raises(ConfigError, match="reshard to 64"):  # another target: refused
                reshard(state, 16)
            assert cli(["state", "reshard", url, "--shards", "64"]) == 0
            return {"killed at": half.moved}

        _with_writers(redis_url, prefix, born_ms, 30, kill_then_rerun)
        assert _placement(client, prefix) == Placement(64, 1)
        assert workers.snapshot(state) == _serial(born_ms, [0, *range(30, 30 + WRITERS)])
    finally:
        state.clear()
        state.close()
        client.close()


def test_a_forget_entry_pushed_twice_counts_once_on_one_server(redis_url):
    """Two pushers that read the same outbox entry (a drain and the forget's own push, say):
    the second finds it gone from its outbox and applies nothing."""
    from heaprank.state.redis import pooled

    prefix = unique_prefix()
    born_ms = int(time.time() * 1000)
    state = RedisState(redis_url, prefix=prefix)
    try:
        workers.apply(state, 0, 60, born_ms)
        before = workers.snapshot(state)[None]
        # A forget's outbox entry, written as FORGET writes it, read by two pushers.
        box = state.layout.bucket_key("ns-a", "q")
        state.client.hset(box, "forget:twice", _forget_blob(state, "ns-a"))
        entries = state.run_flow("t", lambda: pooled.pending(state.layout, [
            state.layout.bucket("ns-a")]), idempotent=True)
        assert [e.id for e in entries] == ["forget:twice"]
        state.push_entries(entries)
        after = workers.snapshot(state)[None]
        state.push_entries(entries)  # the stale copy: nothing happens
        assert workers.snapshot(state)[None] == after != before
    finally:
        state.clear()
        state.close()


def _forget_blob(state: RedisState, namespace: str) -> bytes:
    """An outbox entry taking ``namespace``'s links (by id) out of the pool, as FORGET does."""
    from heaprank.state.redis import blob, pooled

    links = blob.decode(state.client.get(state.layout.ns_key("l", namespace)))
    return pooled.encode_entry([("", i, -p, -n, -1.0) for i, (p, n) in sorted(links.items())])


def test_an_async_client_opened_before_a_reshard_keeps_working(redis_url):
    import asyncio

    from heaprank.state.redis import AsyncRedisState

    prefix = unique_prefix()
    born_ms = int(time.time() * 1000)
    state = RedisState(redis_url, prefix=prefix)

    async def feed(client: AsyncRedisState, worker: int) -> None:
        for imp, update in workers.plan(worker, 40, born_ms):
            assert await client.put_impression(imp) == imp.recall_id
            await client.apply([update])

    async def run() -> None:
        client = AsyncRedisState.from_url(f"{redis_url}?prefix={prefix}")
        try:
            await feed(client, 0)  # at G = 32
            reshard(state, 16)
            await feed(client, 1)  # told by the scripts, it reloads the meta
            assert client.n_shards == 16
        finally:
            await client.aclose()
    try:
        asyncio.run(run())
        assert workers.snapshot(state) == workers.serial_snapshot(
            [*workers.plan(0, 40, born_ms), *workers.plan(1, 40, born_ms)])
    finally:
        state.clear()
        state.close()


def test_the_meta_spells_each_placement_once_and_places_every_feature_once():
    from heaprank.state.redis.layout import KeyLayout, crc

    for text in ["2:32", "2:64@1", "2:32@0>64:5", "2:64@1>8:17"]:
        assert Placement.parse(text).text() == text
    for text in ["2:32@0", "2:032", "2:32>64:1", "3:32"]:
        with pytest.raises(ValueError):
            Placement.parse(text)
    # 64 -> 8 moves the old shards of one new shard one after the other.
    assert Placement(64, 1, 8).order()[:8] == [0, 8, 16, 24, 32, 40, 48, 56]
    features = [f"f{i}" for i in range(2_000)]
    for placement in [Placement(64, 1, 8, 20), Placement(32, 0, 64, 7)]:
        layout = KeyLayout("p", placement.shards, placement)
        moved = set(placement.order()[:placement.moved])
        for f in features:
            s, old = layout.shard_of(f), crc(f) % placement.shards
            assert s == (placement.shards + crc(f) % placement.target if old in moved else old)
