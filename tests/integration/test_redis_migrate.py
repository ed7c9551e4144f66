"""``heaprank state migrate``: a state of Redis layout 1 (written here key by key, as heaprank
0.1 kept it) becomes layout 2 while 4 writer processes of this version apply feedback; the
result equals all the feedbacks (the old ones and the writers') applied serially, exactly.
On one server and on a 3-master Cluster, where the 8 old shards' slots lie on every master."""

from __future__ import annotations

import multiprocessing
import random
import struct
import time
import zlib

import pytest
import redis

from heaprank import MemoryState
from heaprank.app.cli import main as cli
from heaprank.records import Impression
from heaprank.state.redis import RedisState
from heaprank.state.redis.connect import connect
from heaprank.state.redis.layout import key_slot, shard_tags
from tests.integration import redis_workers as workers
from tests.integration.redis_servers import unique_prefix

OLD_SHARDS = 8
WRITERS, FEEDBACKS = 4, 150


def old_plan(born_ms: int, names: list[str]):  # type: ignore[no-untyped-def]
    """One feedback per name (and three more on the writers' namespaces), uniform credit."""
    rng = random.Random(99)
    for j, ns in enumerate(names + list(workers.NAMESPACES) * 3):
        rid = f"{(born_ms << 20) | (0xF0000 + j):016x}"
        ids = tuple(f"doc{rng.randrange(20)}-{k}" for k in range(3))
        slots = tuple((rng.choice(workers.KINDS), rng.choice(workers.LENGTHS)) for _ in ids)
        imp = Impression(recall_id=rid, namespace=ns, qtype="when", time=1_750_000_000.0 + j,
                         time_explicit=True, ids=ids, slots=slots)
        yield imp, workers.update_of(imp, [rng.random() < 0.4 for _ in range(3)])


def write_layout_1(client: "redis.Redis", prefix: str, pairs) -> None:  # type: ignore[no-untyped-def]
    """The state of ``pairs`` in layout 1: keys tagged by one of 8 global shards."""
    serial = MemoryState()
    fed: dict[str, int] = {}
    for imp, update in pairs:
        serial.put_impression(imp)
        serial.apply([update])
        fed[imp.namespace] = fed.get(imp.namespace, 0) + 1
    tags = shard_tags(OLD_SHARDS, "")

    def key(ns: str | None, kind: str, tag: str | None = None) -> str:
        t = tag or tags[zlib.crc32((ns or "").encode()) % OLD_SHARDS]
        return f"{prefix}:{{{t}}}:{kind}" + (f":{ns}" if ns is not None else "")
    pipe = client.pipeline(transaction=False)
    pooled: dict[str, dict[str, list[float]]] = {t: {} for t in tags}
    for ns in serial.namespaces():
        features, pos, neg = serial.list_links(ns)
        pipe.hset(key(ns, "l"), mapping={f: struct.pack("<dd", p, n)
                                         for f, p, n in zip(features, pos, neg)})
        tag = tags[zlib.crc32(ns.encode()) % OLD_SHARDS]
        for f, p, n in zip(features, pos, neg):
            row = pooled[tag].setdefault(f, [0.0, 0.0, 0.0])
            row[0] += p
            row[1] += n
            row[2] += 1
        pipe.sadd(key(None, "n", tag), ns)
        docs = {i: struct.pack("<dd", last, uses) for i, last, uses in serial.iter_docs(ns)}
        pipe.hset(key(ns, "d"), mapping={**docs, "": fed[ns]})
        pipe.incrby(key(None, "c", tag), fed[ns])
    for tag, rows in pooled.items():
        if rows:
            pipe.hset(key(None, "g", tag), mapping={f: struct.pack("<ddd", *v) for f, v in rows.items()})
    for rid, ns, body in serial.iter_impressions():
        body_key = f"{key(ns, 'i')}:{rid}"
        pipe.set(body_key, body)
        tag = tags[zlib.crc32(ns.encode()) % OLD_SHARDS]
        pipe.set(f"{prefix}:r:{{{rid}}}", f"{tag}:{ns}")
        pipe.zadd(key(None, "f", tag), {body_key: int(rid, 16) >> 20})
    pipe.set(f"{prefix}:meta", str(OLD_SHARDS))
    pipe.execute()


def gated_writer(url: str, prefix: str, worker: int, born_ms: int) -> tuple[int, int, float, float]:
    """A writer of this version: waits until the state says layout 2, then writes."""
    client = connect(url, 5.0)
    deadline = time.monotonic() + 60
    while b":" not in (client.get(f"{prefix}:meta") or b"") and time.monotonic() < deadline:
        time.sleep(0.005)
    client.close()
    return workers.run_worker(url, prefix, worker, FEEDBACKS, born_ms, 10)


def old_keys_by_master(client: "redis.Redis", prefix: str) -> dict[str, int]:
    """How many layout-1 keys each master holds (one entry on a single server)."""
    if not hasattr(client, "get_primaries"):
        return {"single": sum(1 for _ in client.scan_iter(match=f"{prefix}:{{[0-7].*}}:*"))}
    held: dict[str, int] = {}
    for key in client.scan_iter(match=f"{prefix}:{{[0-7].*}}:*"):
        node = client.nodes_manager.get_node_from_slot(key_slot(key.decode()))
        held[node.name] = held.get(node.name, 0) + 1
    return held


@pytest.mark.parametrize("kind", ["redis", "redis-cluster"])
def test_migrating_while_4_writers_run_loses_and_doubles_nothing(kind, request, capsys):
    redis_url = request.getfixturevalue("redis_url" if kind == "redis" else "redis_cluster_url")
    prefix = unique_prefix()
    born_ms = int(time.time() * 1000)
    old = list(old_plan(born_ms - 5_000, [f"old{i:03d}" for i in range(400)]))
    client = connect(redis_url, 5.0)
    write_layout_1(client, prefix, old)
    spread = old_keys_by_master(client, prefix)
    assert len(spread) == (3 if kind == "redis-cluster" else 1), spread  # old keys on every master
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(WRITERS) as pool:
        running = pool.starmap_async(gated_writer, [(redis_url, prefix, 20 + w, born_ms)
                                                    for w in range(WRITERS)])
        time.sleep(3.0)  # the writers have started and wait for layout 2
        started = time.monotonic()
        assert cli(["state", "migrate", f"{redis_url}?prefix={prefix}"]) == 0
        ended = time.monotonic()
        results = running.get(120)
    assert "migrated" in capsys.readouterr().out
    print(f"migration {started:.2f}-{ended:.2f}; writers " + ", ".join(
        f"{r[2]:.2f}-{r[3]:.2f}" for r in results))
    # The writers really wrote during the migration.
    assert min(r[2] for r in results) < ended and started < max(r[3] for r in results)
    state = RedisState(redis_url, prefix=prefix)
    try:
        serial = MemoryState()
        for imp, update in old:
            serial.put_impression(imp)
            serial.apply([update])
        for w in range(WRITERS):
            workers.apply(serial, 20 + w, FEEDBACKS, born_ms)
        assert workers.snapshot(state) == workers.snapshot(serial)  # nothing lost or doubled
        got, want = state.stats(), serial.stats()
        assert got["feedbacks"] == want["feedbacks"] == len(old) + WRITERS * FEEDBACKS
        assert got["documents"] == want["documents"]
        assert sorted(i.recall_id for i in state.feedback_log()) == \
            sorted(i.recall_id for i in serial.feedback_log())
        # Run again: nothing left to do, nothing counted twice.
        assert cli(["state", "migrate", f"{redis_url}?prefix={prefix}"]) == 0
        assert workers.snapshot(state) == workers.snapshot(serial)
        assert not [k for k in client.scan_iter(match=f"{prefix}:{{[0-7].*}}:*")]  # old keys gone
    finally:
        state.clear()
        state.close()
        client.close()
