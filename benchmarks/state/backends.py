"""``python -m benchmarks backends``: the state backends side by side, with concurrent clients.

For memory, SQLite (one WAL file), Redis (a server this command starts, or ``--redis-url``),
a Redis Cluster of 3 masters it starts on free local ports and PostgreSQL (a schema of its own
on ``--postgres-url``, dropped afterwards), with 1, 4 and 16 client processes:

* rerank latency p50/p95 at 50 candidates (k=10, impression tracked), every process timing its own
  calls, all processes started together;
* feedbacks per second: every process sends feedback (1 used + 9 ignored) for its own reranks
  through ``Reranker.feedback`` (read the impression, apply), total over the common wall time;
* round trips per rerank and per feedback, counted by the client (each request written to a
  socket, a pipeline being one), the server's command calls per operation from
  ``INFO commandstats`` (which also counts the commands a script runs), and the servers'
  main-thread CPU per operation (``INFO cpu``), what capacity is planned from;
* bytes per link (``MEMORY USAGE`` of each namespace's links hash / its links), per used
  document (its documents hash / its documents) and per impression; on PostgreSQL each table's
  ``pg_total_relation_size`` (rows, indexes, TOAST) over its rows;
* the optional local cache of the global layer: one process's rerank cost (wall time, round
  trips, server CPU) with ``global_cache_ttl`` off and on (warm: every pooled count cached);
* ``arerank`` + ``afeedback`` from one process's event loop, 16 answers in flight: on the async
  client (``redis.asyncio``) and on the sync client in worker threads (a state given a client
  object), answers per second.

Memory is per process (nothing shared): its rows show the cost of the ranking alone. Each
process warms up (reranks and feedback, untimed) before timing. The machine is shared, 2 cores:
with 16 processes the latency is mostly waiting for a core. Needs ``pip install 'heaprank[redis]'``
and ``redis-server``/``redis-cli`` for the Cluster.

Run: ``python -m benchmarks backends [--quick] [--calls N] [--json FILE] [--redis-url URL]
[--postgres-url URL] [--backends memory,sqlite,redis,redis-cluster,postgres] [--procs 1,4,16]``
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .. import REPO_ROOT, git

NOW = 1_750_000_000.0
QUERIES = ("When is my flight to Lisbon?", "What seat do I like?", "How much are flights?",
           "Who is Maya?", "Where does Ben live?", "Why did the build fail?")
TEXTS = ("My flight to Lisbon is on March {n}", "I prefer window seats, row {n}",
         "Flights usually cost ${n}00", "Maya is my sister, {n} years old", "ok",
         "Ben moved to Porto in 20{n}", "The build failed on test {n}", "Note {n} from Monday")
KINDS = ("fact", "preference", "event", "tool_result", "note")
NAMESPACES = 32


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true", help="fewer calls per process")
    p.add_argument("--calls", type=int, help="reranks per single process (split over several)")
    p.add_argument("--json", help="also write the figures to this JSON file")
    p.add_argument("--redis-url", help="a Redis server to use (default: start one, so no other "
                   "client shares its CPU)")
    p.add_argument("--postgres-url", default=os.environ.get("HEAPRANK_POSTGRES_URL")
                   or "postgresql://postgres@127.0.0.1:5432/test",
                   help="the PostgreSQL server (a schema of its own is made and dropped)")
    p.add_argument("--backends", default="memory,sqlite,redis,redis-cluster,postgres")
    p.add_argument("--procs", default="1,4,16")
    p.add_argument("--capacity-only", action="store_true",
                   help="only the Redis capacity figures and their verdicts (issue 23)")
    p.add_argument("--capacity-namespaces", type=int, default=10_000,
                   help="namespaces x 100 links loaded for the footprint (>= 10,000 for the verdict)")


def candidates(ns: int) -> list[dict[str, Any]]:
    """The 50 candidates a retriever returns in namespace ``ns`` (seeded)."""
    rng = random.Random(ns)
    return [{"id": f"m{j}", "text": rng.choice(TEXTS).format(n=rng.randrange(1, 30)),
             "score": rng.uniform(0, 10),
             "metadata": {"kind": rng.choice(KINDS), "source": rng.choice(("maya", "ben", "tool")),
                          "created_at": NOW - rng.uniform(0, 90 * 86_400)}} for j in range(50)]


def _worker(url: str, proc: int, calls: int, warmup: int, start_at: float) -> dict[str, Any]:
    from heaprank import Config, Refit, Reranker

    rng = random.Random(proc)
    pools = {ns: candidates(ns) for ns in range(NAMESPACES)}
    rr = Reranker(url, config=Config(refit=Refit(every=0)))  # the hot paths: re-fit cost is refit-cost's

    def one() -> tuple[float, Any]:
        ns = rng.randrange(NAMESPACES)
        t0 = time.perf_counter_ns()
        ranking = rr.rerank(rng.choice(QUERIES), pools[ns], namespace=f"ns{ns}", k=10, now=NOW)
        return (time.perf_counter_ns() - t0) / 1e6, ranking

    for _ in range(warmup):
        _, r = one()
        rr.feedback(r.recall_id, used=[r.ids[rng.randrange(3)]])
    time.sleep(max(0.0, start_at - time.time()))
    timed = [one() for _ in range(calls)]
    fb_start = time.time()
    for _, r in timed:
        rr.feedback(r.recall_id, used=[r.ids[rng.randrange(3)]])
    fb_end = time.time()
    rr.close()
    return {"rerank_ms": [t for t, _ in timed], "fb_start": fb_start, "fb_end": fb_end,
            "feedbacks": len(timed)}


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _run(url: str, procs: int, calls: int, warmup: int) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")
    start_at = time.time() + 3.0 + 0.4 * procs  # after every process has imported and warmed up
    with ctx.Pool(procs) as pool:
        rows = pool.starmap(_worker, [(url, p, calls, warmup, start_at) for p in range(procs)])
    latencies = [t for r in rows for t in r["rerank_ms"]]
    fb_wall = max(r["fb_end"] for r in rows) - min(r["fb_start"] for r in rows)
    late = sum(1 for r in rows if r["fb_start"] < start_at)
    return {"procs": procs, "reranks": len(latencies), "p50": _percentile(latencies, 0.5),
            "p95": _percentile(latencies, 0.95), "feedbacks": sum(r["feedbacks"] for r in rows),
            "feedbacks_per_s": sum(r["feedbacks"] for r in rows) / fb_wall, "late": late}


def _commandstats(clients: list[Any]) -> dict[str, float]:
    """Calls per command summed over the nodes, and the servers' main-thread CPU seconds
    (``"cpu"``): what a node spends per operation, network handling included."""
    total: dict[str, float] = {"cpu": 0.0}
    for client in clients:
        for name, row in client.info("commandstats").items():
            total[name] = total.get(name, 0) + int(row["calls"])
        cpu = client.info("cpu")
        total["cpu"] += cpu["used_cpu_user_main_thread"] + cpu["used_cpu_sys_main_thread"]
    return total


def _round_trips(url: str, n: int) -> dict[str, Any]:
    """Client requests, server command calls and CPU per rerank and per feedback, and the
    rerank's wall-time median, one process (options such as ``global_cache_ttl`` in ``url``)."""
    import redis

    from heaprank import Config, Refit, Reranker
    from heaprank.state.redis import RedisState
    from heaprank.state.redis.layout import redis_options

    sent = [0]

    class Counting(redis.connection.Connection):
        def send_packed_command(self, command: Any, check_health: bool = True) -> None:
            sent[0] += 1
            super().send_packed_command(command, check_health)

    base, options = redis_options(url)
    cluster = base.startswith("redis+cluster://")
    if cluster:
        client = redis.cluster.RedisCluster.from_url("redis://" + base[len("redis+cluster://"):],
                                                     connection_class=Counting)
        nodes = [redis.Redis(host=node.host, port=node.port) for node in client.get_primaries()]
    else:
        client = redis.Redis.from_url(base, connection_class=Counting)
        nodes = [redis.Redis.from_url(base)]
    rr = Reranker(RedisState(client=client, **options), config=Config(refit=Refit(every=0)))
    pool = candidates(0)
    for _ in range(20):  # warm: scripts loaded, connections open, links learned
        r = rr.rerank(QUERIES[0], pool, namespace="rt", k=10, now=NOW)
        rr.feedback(r.recall_id, used=[r.ids[0]])
    out: dict[str, Any] = {}
    rankings = []
    wall_ms = []
    for phase in ("rerank", "feedback"):
        before, sent[0] = _commandstats(nodes), 0
        for i in range(n):
            if phase == "rerank":
                t0 = time.perf_counter_ns()
                rankings.append(rr.rerank(QUERIES[i % len(QUERIES)], pool, namespace="rt", k=10,
                                          now=NOW))
                wall_ms.append((time.perf_counter_ns() - t0) / 1e6)
            else:
                rr.feedback(rankings[i].recall_id, used=[rankings[i].ids[0]])
        requests = sent[0]  # the INFO of this measurement goes through other clients
        after = _commandstats(nodes)
        calls = {k[len("cmdstat_"):]: (after[k] - before.get(k, 0)) / n for k in after
                 if k.startswith("cmdstat_") and k != "cmdstat_info"
                 and after[k] > before.get(k, 0)}  # less this INFO
        usec = (after["cpu"] - before["cpu"]) * 1e6 / n
        out[phase] = {"requests": requests / n, "server_calls": calls, "server_usec": usec}
    out["rerank"]["wall_ms_p50"] = _percentile(wall_ms, 0.5)
    rr.close()
    for node in nodes:
        node.close()
    return out


def _sizes(url: str) -> dict[str, Any]:
    """Bytes per link and per impression, by ``MEMORY USAGE``, of the state a run left."""
    from heaprank.state.redis import RedisState
    from heaprank.state.redis.layout import redis_options

    base, options = redis_options(url)
    state = RedisState(base, **options)
    links_bytes = links = doc_bytes = docs = 0
    by_encoding: dict[str, list[int]] = {}
    for ns in state.namespaces():
        usage = state.memory_usage(ns)
        links_bytes += int(usage["bytes"])
        links += int(usage["links"])
        doc_bytes += int(usage["doc_bytes"])
        docs += int(usage["documents"])
        row = by_encoding.setdefault(str(usage["encoding"]), [0, 0, 0])
        row[0] += 1
        row[1] += int(usage["links"])
        row[2] += int(usage["bytes"])
    hours = [key for kind in "hk"
             for key in state.client.scan_iter(match=f"{state.prefix}:{{*}}:{kind}:*", count=1000)]
    sample = hours[:200]  # hour hashes of impressions: MEMORY USAGE shared by their fields
    hash_bytes = sum(int(state.client.memory_usage(k, samples=0) or 0) for k in sample)
    values = [v for k in sample for v in state.client.hvals(k)]
    state.close()
    n = max(len(values), 1)
    return {"links": links, "bytes_per_link": links_bytes / max(links, 1),
            "documents": docs, "bytes_per_document": doc_bytes / max(docs, 1),
            "by_encoding": by_encoding, "impressions_sampled": len(values),
            "bytes_per_impression": hash_bytes / n, "hashes_sampled": len(sample),
            "codec_bytes": sum(map(len, values)) / n}


def _async_rate(url: str, n: int, in_flight: int = 16) -> dict[str, float]:
    """Answers (``arerank`` + ``afeedback``) per second from one event loop, ``in_flight`` at a
    time, on the async client and on the sync client run in worker threads."""
    import asyncio

    import redis

    from heaprank import Config, Refit, Reranker
    from heaprank.state.redis import RedisState
    from heaprank.state.redis.layout import redis_options

    base, options = redis_options(url)
    pools = {ns: candidates(ns) for ns in range(NAMESPACES)}

    async def answers(rr: Reranker) -> float:
        gate = asyncio.Semaphore(in_flight)

        async def one(i: int) -> None:
            async with gate:
                r = await rr.arerank(QUERIES[i % len(QUERIES)], pools[i % NAMESPACES],
                                     namespace=f"ns{i % NAMESPACES}", k=10, now=NOW)
                await rr.afeedback(r.recall_id, used=[r.ids[0]])
        await asyncio.gather(*(one(i) for i in range(in_flight)))  # warm: connections, scripts
        t0 = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(n)))
        return n / (time.perf_counter() - t0)

    async def both() -> dict[str, float]:
        on_loop = Reranker(RedisState(base, **options), config=Config(refit=Refit(every=0)))
        cluster = base.startswith("redis+cluster://")
        client = (redis.cluster.RedisCluster.from_url("redis://" + base[len("redis+cluster://"):])
                  if cluster else redis.Redis.from_url(base))
        threaded = Reranker(RedisState(client=client, **options),
                            config=Config(refit=Refit(every=0)))  # no async twin: threads
        try:
            return {"async_client": await answers(on_loop), "threads": await answers(threaded)}
        finally:
            await on_loop.aclose()
            threaded.close()
    return asyncio.run(both())


def _link_sizes(url: str) -> list[tuple[int, str, float]]:
    """Bytes per link of one namespace's links hash at 10 to 1,000 links (``MEMORY USAGE``),
    names like the real ones (``qt:when&kind:fact``, 17 characters on average here)."""
    import numpy as np

    from heaprank.state.copy import StateDump
    from heaprank.state.redis import RedisState
    from heaprank.state.redis.layout import redis_options

    base, options = redis_options(url)
    out = []
    for n in (10, 100, 128, 129, 500, 1000):
        state = RedisState(base, **{**options, "prefix": f"{options.get('prefix', 'b')}-size{n}"})
        features = [f"qt:when&kind:f{i:04d}" for i in range(n)]
        counts = np.full(n, 0.5)
        state.import_state(StateDump(global_links=(features, counts, counts),
                                     links={"ns": (features, counts, counts)}))
        usage = state.memory_usage("ns")
        out.append((n, str(usage["encoding"]), int(usage["bytes"]) / n))
        state.clear()
        state.close()
    return out


def _clear(url: str) -> None:
    from heaprank.state.redis import RedisState
    from heaprank.state.redis.layout import redis_options

    base, options = redis_options(url)
    state = RedisState(base, **options)
    state.clear()
    state.close()


def _postgres_fresh(server: str, schema: str) -> None:
    """Drop ``schema`` (with all it holds) and make heaprank's tables there again."""
    import psycopg

    from heaprank.state.postgres import PostgresState

    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    PostgresState(server, schema=schema).close()  # connects now: an unreachable server raises


def _postgres_drop(server: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def _postgres_sizes(server: str, schema: str) -> dict[str, Any]:
    """Bytes per row of the links, documents and impressions tables: each table's total size
    (rows, indexes, TOAST; after VACUUM, so dead rows do not count) over its live rows."""
    import psycopg

    out: dict[str, Any] = {}
    with psycopg.connect(server, autocommit=True) as conn:
        for table, key in (("links", "link"), ("docs", "document"), ("impressions", "impression")):
            conn.execute(f"VACUUM {schema}.{table}")
            rows, size = conn.execute(f"SELECT count(*), pg_total_relation_size('{schema}.{table}') "
                                      f"FROM {schema}.{table}").fetchone()
            out[f"{key}s"] = rows
            out[f"bytes_per_{key}"] = size / rows if rows else 0.0
    return out


def _postgres_ready(server: str) -> str:
    """Why the PostgreSQL rows cannot be measured here ("" when they can)."""
    try:
        import psycopg

        with psycopg.connect(server, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except ImportError:
        return "psycopg is not installed (pip install 'heaprank[postgres]')"
    except Exception as exc:  # noqa: BLE001 - reported, the other backends still run
        return f"no PostgreSQL server at {server} ({' '.join(str(exc).split())[:100]})"
    return ""


def run(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(REPO_ROOT))
    from heaprank import SQLiteState
    from tests.integration.redis_servers import RedisServer, start_cluster

    calls, warmup = (60, 10) if args.quick else (200, 20)
    if args.calls:
        calls, warmup = args.calls, min(warmup, args.calls)
    kinds = args.backends.split(",")
    procs = [int(p) for p in args.procs.split(",")]
    folder = Path(tempfile.mkdtemp(prefix="heaprank-bench-"))
    cluster = start_cluster(folder / "cluster") if "redis-cluster" in kinds else []
    nodes = list(cluster)
    if "redis" in kinds and not args.redis_url:
        nodes.append(RedisServer(folder / "single", "--appendonly", "no"))
        args.redis_url = nodes[-1].url
    tag = f"bench{os.getpid()}"
    if "postgres" in kinds and (why := _postgres_ready(args.postgres_url)):
        print(f"postgres: skipped, {why}")
        kinds.remove("postgres")
    pg_schema = f"heaprank_{tag}"
    urls = {"postgres": f"{args.postgres_url}{'&' if '?' in args.postgres_url else '?'}"
                        f"schema={pg_schema}",
            "memory": "memory://", "sqlite": f"sqlite:///{folder / 'state.db'}",
            "redis": f"{args.redis_url}?prefix={tag}",
            "redis-cluster": f"redis+cluster://127.0.0.1:{cluster[0].port}?prefix={tag}" if cluster else ""}
    started = time.time()
    if args.capacity_only:
        kinds = [k for k in kinds if k.startswith("redis")]
    report: dict[str, Any] = {"commit": git("rev-parse", "--short", "HEAD") or "?",
                              "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              "load": os.getloadavg(), "calls_per_process": calls, "rows": [],
                              "round_trips": {}, "sizes": {}, "link_sizes": {}, "cache": {},
                              "async": {}, "postgres_sizes": {}}
    try:
        for kind in [] if args.capacity_only else kinds:
            for p in procs:
                if kind == "sqlite":  # a fresh file, its schema made before the processes open it
                    for f in folder.glob("state.db*"):
                        f.unlink()
                    SQLiteState(folder / "state.db").close()
                if kind == "postgres":  # a fresh schema, made before the processes open it
                    _postgres_fresh(args.postgres_url, pg_schema)
                row = _run(urls[kind], p, max(calls * 4 // p, min(calls, 30)), warmup)
                report["rows"].append({"backend": kind, **row})
                if kind == "postgres" and p == procs[-1]:
                    report["postgres_sizes"] = _postgres_sizes(args.postgres_url, pg_schema)
                if kind.startswith("redis"):
                    if p == procs[-1]:
                        report["sizes"][kind] = _sizes(urls[kind])
                    _clear(urls[kind])
            if kind.startswith("redis"):
                report["round_trips"][kind] = _round_trips(urls[kind], 100)
                _clear(urls[kind])
                report["cache"][kind] = _round_trips(f"{urls[kind]}&global_cache_ttl=60", 100)
                _clear(urls[kind])
                report["async"][kind] = _async_rate(urls[kind], 400)
                report["link_sizes"][kind] = _link_sizes(urls[kind])
                _clear(urls[kind])
        report["capacity"] = _capacity(args, urls, nodes, cluster, tag, quick=args.quick)
    finally:
        for node in nodes:
            node.stop()
        shutil.rmtree(folder, ignore_errors=True)
        if "postgres" in kinds:
            _postgres_drop(args.postgres_url, pg_schema)
    report["seconds"] = round(time.time() - started)
    _print(report)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    return 0


def _capacity(args: argparse.Namespace, urls: dict[str, str], nodes: list[Any],
              cluster: list[Any], tag: str, quick: bool) -> dict[str, Any]:
    """The issue-23 figures (:mod:`.capacity`) on the server and the Cluster this run uses."""
    from urllib.parse import urlsplit

    from . import capacity as cap

    out: dict[str, Any] = {}
    answers = 150 if quick else 600
    if "redis" in urls and urls["redis"] and args.redis_url:
        base = args.redis_url
        port = urlsplit(base).port or 6379
        out["links"] = cap.load_links(base, f"{tag}-fp", args.capacity_namespaces)
        out["impressions"] = cap.impression_bytes(base, f"{tag}-imp", 500 if quick else 2_000)
        out["impressions_sparse"] = cap.impression_bytes(base, f"{tag}-one", 500 if quick else 2_000,
                                                         namespaces=500 if quick else 2_000)
        out["hot"] = cap.hottest_key(base, port, f"{tag}-hot", 300 if quick else 1_000)
        out["trips_server"] = cap.round_trips(f"{base}?prefix={tag}-rt")
        out["rate_server"] = cap.throughput(f"{base}?prefix={tag}-tp", [port], 4, answers)
        _clear(f"{base}?prefix={tag}-tp")
    if cluster:
        url = f"redis+cluster://127.0.0.1:{cluster[0].port}"
        out["trips_cluster"] = cap.round_trips(f"{url}?prefix={tag}-rt")
        out["rate_cluster"] = cap.throughput(f"{url}?prefix={tag}-tp", [n.port for n in cluster],
                                             4, answers)
        _clear(f"{url}?prefix={tag}-tp")
    return out


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def _print_capacity(c: dict[str, Any]) -> None:
    print("\nCapacity (issue 23 targets), Redis layout 2")
    if "links" in c:
        links, imp, hot = c["links"], c["impressions"], c["hot"]
        n = links["namespaces"]
        print(f"  footprint: {n:,} namespaces x {links['links'] // n} links loaded through "
              f"apply_feedback: {links['bytes_per_namespace']:.0f} B per namespace, "
              f"{links['bytes_per_link']:.1f} B per link (used_memory)")
        gb = links["million_x_100_bytes"] / 1e9
        print(f"  1M namespaces x 100 links: {gb:.2f} GB (target < 1 GB)  "
              f"{_verdict(gb < 1 and n >= 10_000)}")
        print(f"  impression (50 candidates, k=10): {imp['open']:.0f} B open, {imp['fed']:.0f} B "
              f"after feedback, feedback-log entry included (target <= 400 B)  "
              f"{_verdict(max(imp['open'], imp['fed']) <= 400)}")
        one = c.get("impressions_sparse")
        if one:
            print(f"  impression, one per namespace (each its bucket's only open one): "
                  f"{one['open']:.0f} B open, {one['fed']:.0f} B after feedback")
        print(f"  10,000 namespaces occupy {links['slots']:,} distinct slots (target >= 4,000)  "
              f"{_verdict(links['slots'] >= 4_000 and n >= 10_000)}")
        print(f"  hottest key: {hot['hottest']} takes {100 * hot['share']:.1f}% of {hot['accesses']:,} "
              f"key accesses over {hot['keys']:,} keys (MONITOR, 1,000 namespaces; target < 5%)  "
              f"{_verdict(hot['share'] < 0.05)}")
        print("    next: " + ", ".join(f"{k} {100 * v:.1f}%" for k, v in hot["top"][1:]))
        print(f"  round trips per rerank + feedback, one server: {c['trips_server']:.2f} "
              f"(target <= 3)  {_verdict(c['trips_server'] <= 3)}")
        rate = c["rate_server"]
        print(f"  one server, {rate['procs']} processes: {rate['answers_per_s']:.0f} answers/s, "
              f"{rate['server_us_per_answer']:.0f} us of server CPU per answer")
    if "rate_cluster" in c:
        rate = c["rate_cluster"]
        print(f"  round trips per rerank + feedback, Cluster: {c['trips_cluster']:.2f} "
              f"(target <= 4)  {_verdict(c['trips_cluster'] <= 4)}")
        split = rate["cpu_split"]
        print(f"  3-master Cluster, {rate['procs']} processes: {rate['answers_per_s']:.0f} answers/s, "
              f"{rate['server_us_per_answer']:.0f} us of server CPU per answer; CPU split "
              + "/".join(f"{100 * x:.0f}" for x in split)
              + f"% (busiest <= 40%)  {_verdict(max(split) <= 0.40)}")


def _print(report: dict[str, Any]) -> None:
    print(f"date {report['date']}  commit {report['commit']}  machine {os.cpu_count()} cores  "
          f"load {', '.join(f'{x:.1f}' for x in report['load'])}  run time {report['seconds']} s")
    print("\nRerank (50 candidates, k=10, tracked) and feedback (1 used + 9 ignored), "
          "every process on its own calls")
    print(f"{'backend':<14} {'procs':>5} {'reranks':>7} {'p50 ms':>7} {'p95 ms':>7} "
          f"{'feedbacks':>9} {'fb/s':>7}")
    for r in report["rows"]:
        print(f"{r['backend']:<14} {r['procs']:>5} {r['reranks']:>7} {r['p50']:>7.2f} "
              f"{r['p95']:>7.2f} {r['feedbacks']:>9} {r['feedbacks_per_s']:>7.0f}")
    for kind, rt in report["round_trips"].items():
        print(f"\nRound trips, {kind} (100 calls, one process; server calls from INFO commandstats, "
              f"commands inside scripts included)")
        for phase, row in rt.items():
            calls = ", ".join(f"{k} {v:g}" for k, v in sorted(row["server_calls"].items()))
            print(f"  per {phase:<8}: {row['requests']:g} client round trips, "
                  f"{row['server_usec']:.0f} us of server CPU; server calls: {calls}")
    if report.get("cache"):
        print("\nGlobal-layer cache (global_cache_ttl), one process, 100 reranks of 50 candidates:")
        print(f"{'backend':<14} {'cache':<9} {'p50 ms':>7} {'round trips':>11} {'server us':>9}  "
              f"server calls")
        for kind, cached in report["cache"].items():
            for label, row in (("off", report["round_trips"][kind]["rerank"]),
                               ("on, 60 s", cached["rerank"])):
                calls = ", ".join(f"{k} {v:g}" for k, v in sorted(row["server_calls"].items()))
                print(f"{kind:<14} {label:<9} {row['wall_ms_p50']:>7.2f} {row['requests']:>11g} "
                      f"{row['server_usec']:>9.0f}  {calls}")
    if report.get("async"):
        print("\narerank + afeedback from one event loop, 16 answers in flight, 400 answers:")
        for kind, rates in report["async"].items():
            print(f"  {kind:<14} async client {rates['async_client']:.0f} answers/s, sync client "
                  f"in worker threads {rates['threads']:.0f} answers/s")
    for kind, size in report["sizes"].items():
        print(f"\nMemory, {kind}: {size['links']} links, {size['bytes_per_link']:.1f} bytes per link "
              f"(MEMORY USAGE of the links hashes)")
        for enc, (count, links, nbytes) in sorted(size["by_encoding"].items()):
            print(f"  {enc:<10} {count:>3} namespaces, {links / count:.0f} links each, "
                  f"{nbytes / links:.1f} bytes per link")
        sweep = report["link_sizes"].get(kind, [])
        if sweep:
            print("  one namespace's links hash: " + ", ".join(
                f"{n} links {enc} {per:.1f} B/link" for n, enc, per in sweep))
        print(f"  used documents: {size['documents']}, {size['bytes_per_document']:.1f} bytes per "
              f"document (MEMORY USAGE of the documents hashes)")
        print(f"  impression: {size['bytes_per_impression']:.0f} bytes, its share of its "
              f"hash (field value: codec body and namespace, {size['codec_bytes']:.0f} bytes), "
              f"{size['impressions_sampled']} in {size['hashes_sampled']} hashes sampled")
    pg = report.get("postgres_sizes")
    if pg:
        print(f"\nDisk, postgres (pg_total_relation_size after VACUUM: rows, indexes, TOAST): "
              f"{pg['bytes_per_link']:.0f} bytes per link ({pg['links']} links), "
              f"{pg['bytes_per_document']:.0f} per used document ({pg['documents']}), "
              f"{pg['bytes_per_impression']:.0f} per impression ({pg['impressions']}, "
              f"50 candidates, k=10)")
    if report.get("capacity"):
        _print_capacity(report["capacity"])
