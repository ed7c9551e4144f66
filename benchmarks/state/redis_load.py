"""``python -m benchmarks redis-load``: how long a Redis server holding a heaprank state takes to
come back after a restart, with AOF and with RDB (issue 23's persistence advice).

For each mode a ``redis-server`` is started on a free port in a folder of its own; N namespaces
x 100 links (one fed impression each, its feedback-log entry, and one open impression) are
loaded through the public API (``RedisState.put_impression`` / ``apply_feedback``); the server
is stopped and started again, and the time from the start until it answers PING (it answers
LOADING until its file is read) and ``INFO persistence`` says ``loading:0`` is measured, with
the file's size and ``used_memory`` after the load. Modes:

- ``aof``: ``appendonly yes`` (``appendfsync everysec``), automatic rewrites off, the file as
  the writes left it: the history of every command, replayed on start;
- ``aof-rewritten``: the same after ``BGREWRITEAOF`` (Redis 7 writes an RDB preamble);
- ``rdb``: ``appendonly no``, one ``SAVE`` after the load.

The figures per 1M namespaces are the measured ones scaled linearly (N -> 1,000,000), not
measured; the bare start of an empty server is printed beside them as the fixed cost.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

MODES = {"aof": ("--appendonly", "yes", "--appendfsync", "everysec",
                 "--auto-aof-rewrite-percentage", "0"),  # keep the whole history
         "aof-rewritten": ("--appendonly", "yes", "--appendfsync", "everysec"),
         "rdb": ("--appendonly", "no")}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--namespaces", type=int, default=10_000,
                        help="namespaces loaded, 100 links each (default 10,000)")
    parser.add_argument("--modes", default=",".join(MODES),
                        help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--json", metavar="FILE", help="also write the figures here")


def _wait_loaded(client: Any, timeout_s: float = 600.0) -> None:
    deadline = time.monotonic() + timeout_s
    while client.info("persistence")["loading"] != 0:
        if time.monotonic() > deadline:
            raise RuntimeError("redis-server still loading")
        time.sleep(0.001)


def _file_bytes(folder: Path, mode: str) -> int:
    if mode == "rdb":
        return (folder / "dump.rdb").stat().st_size
    return sum(p.stat().st_size for p in (folder / "appendonlydir").iterdir())  # Redis 7 layout


def aof_shares(folder: Path) -> dict[str, float]:
    """The share of an AOF's bytes by command and key kind (``HSET g``: a pooled shard's hash),
    read from its RESP commands: what makes the history large."""
    data = b"".join(p.read_bytes() for p in sorted((folder / "appendonlydir").glob("*.incr.aof")))
    size: dict[str, int] = {}
    at = 0
    while at < len(data):
        end = data.index(b"\r\n", at)  # "*<count>\r\n", then count "$<length>\r\n<bytes>\r\n"
        count, at = int(data[at + 1:end]), end + 2
        parts = []
        for _ in range(count):
            end = data.index(b"\r\n", at)
            length = int(data[at + 1:end])
            parts.append(data[end + 2:end + 2 + length])
            at = end + 4 + length
        fields = parts[1].decode("utf-8", "replace").split(":") if len(parts) > 1 else []
        # the kind is the first part after the prefix that is not a hash tag: ``P:{t}:g`` is a
        # pooled shard, ``P:r:{<rid>}`` a recall id's pointer (one name for all of them)
        kind = next((f for f in fields[1:] if not f.startswith("{")), "")
        name = f"{parts[0].decode().upper()} {kind}".strip()
        size[name] = size.get(name, 0) + sum(len(p) for p in parts)
    total = sum(size.values()) or 1
    return {k: v / total for k, v in sorted(size.items(), key=lambda kv: -kv[1])}


def _restart_s(server: Any) -> float:
    """Stop ``server`` (SIGTERM) and start it again: seconds until it answers with its data."""
    import redis

    server.stop()
    started = time.monotonic()
    server.start(timeout_s=600.0)
    client = redis.Redis(port=server.port)
    _wait_loaded(client)
    took = time.monotonic() - started
    client.close()
    return took


def _persist(client: Any, mode: str) -> None:
    """Put the loaded state on disk as ``mode`` keeps it."""
    if mode == "rdb":
        client.save()
    elif mode == "aof-rewritten":
        client.bgrewriteaof()
        while client.info("persistence")["aof_rewrite_in_progress"] or \
                client.info("persistence")["aof_rewrite_scheduled"]:
            time.sleep(0.05)
    else:
        time.sleep(1.5)  # appendfsync everysec: the last second reaches the file


def measure(folder: Path, mode: str, namespaces: int) -> dict[str, Any]:
    """Load ``namespaces`` into a fresh server of ``mode``, restart it, and measure."""
    import redis

    from heaprank.state.redis import RedisState
    from tests.integration.redis_servers import RedisServer

    from .capacity import feed_namespace

    server = RedisServer(folder / mode, *MODES[mode])
    try:
        url = f"redis://127.0.0.1:{server.port}/0"
        client = redis.Redis(port=server.port)
        empty = int(client.info("memory")["used_memory"])
        state = RedisState(url, prefix="load", max_impressions=10 * namespaces)
        loading = time.monotonic()
        for i in range(namespaces):
            feed_namespace(state, i, open_impression=True)
        loaded_s = time.monotonic() - loading
        stats = state.stats()
        state.close()
        _persist(client, mode)
        used = int(client.info("memory")["used_memory"])
        keys = int(client.dbsize())
        client.close()
        size = _file_bytes(folder / mode, mode)
        shares = aof_shares(folder / mode) if mode == "aof" else {}
        restart = _restart_s(server)
        check = RedisState(url, prefix="load")
        assert check.stats()["links"] == stats["links"], "the restart lost links"
        check.close()
    finally:
        server.stop()
    return {"mode": mode, "namespaces": namespaces, "links": stats["links"], "keys": keys,
            "load_through_api_s": loaded_s, "file_bytes": size, "used_memory": used,
            "used_memory_growth": used - empty,
            "restart_s": restart, "aof_byte_shares": shares}


def empty_start_s(folder: Path) -> float:
    """A bare server's restart, nothing to load: the fixed cost in every figure."""
    from tests.integration.redis_servers import RedisServer

    server = RedisServer(folder / "empty", "--appendonly", "no")
    try:
        return _restart_s(server)
    finally:
        server.stop()


def report(rows: list[dict[str, Any]], empty_s: float) -> str:
    """The table; the 1M columns scale the load's growth (file, ``used_memory`` over the empty
    server's, restart time over the empty server's) by 1M / N and add the fixed part back."""
    n = rows[0]["namespaces"]
    scale = 1e6 / n
    lines = [f"Redis restart with the data loaded ({n:,} namespaces x 100 links, one fed and one "
             "open impression each, loaded through RedisState)",
             f"{'mode':<14} {'keys':>7} {'file MB':>8} {'used_memory MB':>15} {'restart s':>10}"
             f" | 1M namespaces (linear): {'file GB':>8} {'memory GB':>10} {'restart s':>10}"]
    for r in rows:
        memory = r["used_memory"] + r["used_memory_growth"] * (scale - 1)
        restart = empty_s + (r["restart_s"] - empty_s) * scale
        lines.append(f"{r['mode']:<14} {r['keys']:>7,} {r['file_bytes'] / 1e6:>8.1f} "
                     f"{r['used_memory'] / 1e6:>15.1f} {r['restart_s']:>10.3f} | {'':>23} "
                     f"{r['file_bytes'] * scale / 1e9:>8.2f} {memory / 1e9:>10.2f} {restart:>10.1f}")
    for r in rows:
        if r["aof_byte_shares"]:
            top = list(r["aof_byte_shares"].items())[:3]
            lines.append(f"{r['mode']} bytes by command and key kind: " +
                         ", ".join(f"{k} {v:.0%}" for k, v in top))
    lines.append(f"an empty server restarts in {empty_s:.3f} s; the 1M columns are a linear "
                 "extrapolation, not a measurement")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from tests.integration.redis_servers import have_binaries

    from .. import MissingRequirement, require

    require("redis", feature="redis-load")
    if not have_binaries():
        raise MissingRequirement("redis-load needs redis-server and redis-cli on the PATH")
    modes = [m for m in args.modes.split(",") if m]
    unknown = set(modes) - set(MODES)
    if unknown:
        raise SystemExit(f"unknown modes: {', '.join(sorted(unknown))}")
    with tempfile.TemporaryDirectory(prefix="heaprank-redis-load-") as tmp:
        folder = Path(tmp)
        rows = [measure(folder, mode, args.namespaces) for mode in modes]
        empty_s = empty_start_s(folder)
    import redis as redis_py

    version = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout
    print(report(rows, empty_s))
    print(f"({version.strip()}; redis-py {redis_py.__version__})")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "empty_restart_s": empty_s,
                                               "redis_server": version.strip()}, indent=2))
    return 0
