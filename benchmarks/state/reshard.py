"""``python -m benchmarks reshard``: ``heaprank state reshard`` of a loaded state (32 -> 64 pooled
shards by default) on one Redis server and on a 3-master Cluster while writer processes apply
feedback.

A ``redis-server`` (or a Cluster of three) is started on free ports; ``--features`` distinct
pooled features are loaded through the public API (feedbacks of 10 items x 10 features);
``--writers`` processes then apply feedback without pause (each its own namespace, 4 items x 4
features drawn from the loaded ones) and the reshard runs meanwhile. Measured: the reshard's wall
time, pooled rows moved per second, the time of each old shard's move (one script: the longest is how long the
server is blocked at once), and the writers' feedbacks per second in the second before the
reshard and during it. The pooled rows before and after are counted (they must be equal).
In a Cluster "one old shard's move" is one group's (freeze, complete, copy, tombstone).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--features", type=int, default=100_000,
                        help="distinct pooled features loaded (default 100,000)")
    parser.add_argument("--shards", default="32,64", help="from,to (default 32,64)")
    parser.add_argument("--writers", type=int, default=4, help="writer processes (default 4)")
    parser.add_argument("--backends", default="redis,redis-cluster",
                        help="comma-separated, of redis and redis-cluster")
    parser.add_argument("--json", metavar="FILE", help="also write the figures here")


def _batch(state: Any, ns: str, rid: str, features: list[list[str]]) -> None:
    """One impression of ``len(features)`` items and its feedback (the first item used)."""
    from heaprank.records import Impression

    from .fill import update_of

    ids = tuple(f"d{k}" for k in range(len(features)))
    imp = Impression(recall_id=rid, namespace=ns, qtype="when", time=1_750_000_000.0,
                     time_explicit=True, ids=ids, slots=tuple(("x", "y") for _ in ids))
    state.put_impression(imp)
    state.apply([update_of(imp, features, [k == 0 for k in range(len(ids))])])


def _rid(born_ms: int, n: int) -> str:
    return f"{(born_ms << 20) | n:016x}"


def _writer(url: str, shards: int, w: int, features: int, stop: Any, ready: Any) -> list[float]:
    """Apply feedbacks until ``stop``; the time each one ended."""
    import random

    from heaprank.state.redis import RedisState

    state = RedisState(url, prefix="reshard", global_shards=shards)
    rng, born, ends = random.Random(w), int(time.time() * 1000), []
    ready.wait(60)
    n = 0
    while not stop.is_set():
        chosen = [[f"f{rng.randrange(features)}" for _ in range(4)] for _ in range(4)]
        _batch(state, f"writer{w}", _rid(born, (w << 16) | n), chosen)
        ends.append(time.monotonic())
        n += 1
    state.close()
    return ends


def _rows(client: Any) -> int:
    """Pooled rows (a tombstone of a Cluster's reshard holds its version alone)."""
    return sum(int(client.hlen(k)) - 1 for k in client.scan_iter(match="reshard:{g*}:g"))


def measure(url: str, client: Any, args: argparse.Namespace) -> dict[str, Any]:
    from heaprank.state.redis import RedisState
    from heaprank.state.redis.reshard import reshard

    old, new = (int(x) for x in args.shards.split(","))
    state = RedisState(url, prefix="reshard", global_shards=old)
    born = int(time.time() * 1000)
    for j in range(0, args.features, 100):
        _batch(state, f"load{j % 97}", _rid(born, j),
               [[f"f{j + 10 * k + q}" for q in range(10)] for k in range(10)])
    state.drain()  # (a Cluster: the loader's last deltas still wait in its batch)
    before = _rows(client)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager, ctx.Pool(args.writers) as pool:
        stop, ready = manager.Event(), manager.Barrier(args.writers + 1)
        running = pool.starmap_async(_writer, [(url, old, w, args.features, stop, ready)
                                               for w in range(args.writers)])
        ready.wait(120)
        time.sleep(2.0)
        moves: list[float] = []
        started = time.monotonic()
        figures = reshard(state, new, on_move=lambda k: moves.append(time.monotonic()))
        ended = time.monotonic()
        time.sleep(0.5)
        stop.set()
        ends = [t for w in running.get(120) for t in w]
    steps = [b - a for a, b in zip([started, *moves], moves)]
    during = sum(started <= t < ended for t in ends) / (ended - started)
    state.close()
    return {"backend": "redis-cluster" if state.cluster else "redis",
            "from": old, "to": new, "rows_before": before, "rows_after": _rows(client),
            "seconds": ended - started, "rows_per_s": figures["rows"] / (ended - started),
            "move_median_ms": statistics.median(steps) * 1000, "move_max_ms": max(steps) * 1000,
            "feedbacks_per_s_before": sum(started - 1 <= t < started for t in ends),
            "feedbacks_per_s_during": during, "writers": args.writers}


def report(row: dict[str, Any]) -> str:
    return "\n".join([
        f"reshard {row['from']} -> {row['to']} pooled shards, {row['backend']}, {row['writers']} "
        f"writers running; pooled rows {row['rows_before']:,} before, {row['rows_after']:,} after",
        f"  wall time {row['seconds']:.3f} s, {row['rows_per_s']:,.0f} rows/s; one old shard's "
        f"move: median {row['move_median_ms']:.1f} ms, longest {row['move_max_ms']:.1f} ms",
        f"  writers' feedbacks/s: {row['feedbacks_per_s_before']:,.0f} in the second before, "
        f"{row['feedbacks_per_s_during']:,.0f} during"])


def _one(kind: str, folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Start a server (or a 3-master Cluster) in ``folder``, measure, stop it."""
    from heaprank.state.redis.connect import connect
    from tests.integration.redis_servers import RedisServer, start_cluster

    nodes = start_cluster(folder) if kind == "redis-cluster" else [
        RedisServer(folder, "--appendonly", "no")]
    try:
        url = (f"redis+cluster://127.0.0.1:{nodes[0].port}" if kind == "redis-cluster"
               else f"redis://127.0.0.1:{nodes[0].port}/0")
        client = connect(url, 5.0)
        row = measure(url, client, args)
        client.close()
        return row
    finally:
        for node in nodes:
            node.stop()


def run(args: argparse.Namespace) -> int:
    from tests.integration.redis_servers import have_binaries

    from .. import MissingRequirement, require

    redis = require("redis", feature="reshard")
    if not have_binaries():
        raise MissingRequirement("reshard needs redis-server and redis-cli on the PATH")
    rows = []
    for kind in [k for k in args.backends.split(",") if k]:
        with tempfile.TemporaryDirectory(prefix="heaprank-reshard-") as tmp:
            rows.append(_one(kind, Path(tmp), args))
        print(report(rows[-1]))
    version = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout
    print(f"({version.strip()}; redis-py {redis.__version__}; load {os.getloadavg()[0]:.1f})")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "redis_server": version.strip()},
                                              indent=2))
    return 0
