"""``python -m benchmarks mcp-overhead``: what serving rerank + feedback over MCP stdio adds to
the same two calls in process.

One run, side by side, round by round: a rerank of ``--candidates`` candidates (top ``--k``,
EXPLAIN included) then a feedback naming one used result, timed three ways on three states of
the same backend (one each, so no path waits on another's writes):

- ``in-process``: ``Reranker.rerank`` + ``Reranker.feedback`` in this process;
- ``stdio raw``: ``tools/call`` requests written as JSON lines to a ``python -m heaprank mcp``
  subprocess and its answers read back (the transport and the server alone);
- ``stdio SDK``: the same calls through the MCP SDK's own client session (what a Python agent
  pays, client-side validation included).

Each round uses the next of ``--sets`` candidate lists (made-up texts, shuffled scores); the
first ``--warmup`` rounds are not counted. Reported: the median and p95 of a rerank+feedback
pair per path, each stdio path's median minus the in-process median (the overhead), and the CPU
time per pair in process and on the raw stdio path (client and server process together, from
/proc): the work serving adds, apart from waiting for a core on a busy machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

WORDS = ("flight lisbon hotel dinner window seat booked train meeting doctor birthday gift "
         "tuesday morning evening sister brother office project deadline coffee museum").split()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rounds", type=int, default=400, help="timed rounds (default 400)")
    parser.add_argument("--warmup", type=int, default=40, help="rounds not counted (default 40)")
    parser.add_argument("--candidates", type=int, default=50, help="per rerank (default 50)")
    parser.add_argument("-k", type=int, default=10, help="results per rerank (default 10)")
    parser.add_argument("--sets", type=int, default=20, help="distinct candidate lists")
    parser.add_argument("--backend", choices=("sqlite", "memory", "redis"), default="sqlite",
                        help="the state of each path (default: a SQLite file each)")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0",
                        help="with --backend redis: the server (a key prefix of its own per "
                        "path, deleted after the run)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--out", metavar="FILE", help="also write the JSON result here")


def _sets(args: argparse.Namespace) -> list[tuple[str, list[dict[str, Any]]]]:
    """``--sets`` (query, candidates) pairs of made-up memories, scores best first."""
    rng = random.Random(args.seed)
    out = []
    for s in range(args.sets):
        query = "when is the " + " ".join(rng.sample(WORDS, 3)) + "?"
        scores = sorted((rng.uniform(0.2, 0.9) for _ in range(args.candidates)), reverse=True)
        out.append((query, [
            {"id": f"s{s}-m{i}", "text": " ".join(rng.choices(WORDS, k=rng.randint(6, 30))),
             "score": round(score, 4),
             "metadata": {"kind": rng.choice(["fact", "event", "preference"]),
                          "source": rng.choice(["user", "assistant"]),
                          "created_at": 1_750_000_000 - rng.randint(0, 90) * 86_400}}
            for i, score in enumerate(scores)]))
    return out


class RawStdio:
    """A ``heaprank mcp`` subprocess spoken to in JSON lines, one request at a time."""

    def __init__(self, command: list[str]) -> None:
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self.next_id = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "0"}})
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        self._send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        assert self.proc.stdout is not None
        answer = json.loads(self.proc.stdout.readline())
        if "error" in answer or answer["result"].get("isError"):
            raise RuntimeError(f"{method}: {answer}")
        return dict(answer["result"])

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return dict(self.request("tools/call", {"name": tool, "arguments": arguments})[
            "structuredContent"])

    def close(self) -> None:
        self.proc.communicate(timeout=30)


def _quantiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"median_ms": statistics.median(ordered),
            "p95_ms": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]}


def _cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system, every thread) process ``pid`` has used, from /proc (Linux)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Paths:
    """The three paths of one run and what they took: wall ms per pair, and CPU seconds spent
    in the timed rounds (in process; the raw path's client and server)."""

    def __init__(self, reranker: Any, raw: RawStdio, client: Any, k: int) -> None:
        self.reranker, self.raw, self.client, self.k = reranker, raw, client, k
        self.times: dict[str, list[float]] = {"in-process": [], "stdio raw": [], "stdio SDK": []}
        self.cpu = {"in-process": 0.0, "stdio raw": 0.0}

    async def round(self, query: str, cands: list[dict[str, Any]], counted: bool) -> None:
        pair: dict[str, float] = {}
        cpu, start = time.process_time(), time.perf_counter()
        ranking = self.reranker.rerank(query, cands, k=self.k)
        self.reranker.feedback(ranking.recall_id, used=[ranking.ids[1]])
        pair["in-process"] = time.perf_counter() - start
        in_cpu, cpu, start = time.process_time() - cpu, time.process_time(), time.perf_counter()
        out = self.raw.call("rerank", {"query": query, "candidates": cands, "k": self.k})
        self.raw.call("feedback", {"recall_id": out["recall_id"],
                                   "used": [out["results"][1]["id"]]})
        pair["stdio raw"] = time.perf_counter() - start
        raw_cpu, start = time.process_time() - cpu, time.perf_counter()
        got = await self.client.call_tool("rerank", {"query": query, "candidates": cands,
                                                     "k": self.k})
        out = got.structured_content or {}
        await self.client.call_tool("feedback", {"recall_id": out["recall_id"],
                                                 "used": [out["results"][1]["id"]]})
        pair["stdio SDK"] = time.perf_counter() - start
        if counted:
            for path, seconds in pair.items():
                self.times[path].append(seconds * 1000.0)
            self.cpu["in-process"] += in_cpu
            self.cpu["stdio raw"] += raw_cpu  # the client's share; the server's is added after


async def _measure(args: argparse.Namespace, tmp: Path) -> Paths:
    from mcp import Client, StdioServerParameters

    from heaprank import Reranker

    def url(name: str) -> str:
        if args.backend == "redis":
            return f"{args.redis_url}{'&' if '?' in args.redis_url else '?'}prefix={tmp.name}-{name}"
        return "memory://" if args.backend == "memory" else f"sqlite:///{tmp}/{name}.db"

    def server(name: str) -> list[str]:
        return [sys.executable, "-m", "heaprank", "mcp", "--state", url(name),
                "--log-level", "WARNING"]

    sets = _sets(args)
    reranker = Reranker(url("in_process"), strict=True)
    raw = RawStdio(server("raw"))
    sdk_server = StdioServerParameters(command=server("sdk")[0], args=server("sdk")[1:])
    try:
        async with Client(sdk_server) as client:
            paths = Paths(reranker, raw, client, args.k)
            for n in range(args.warmup):
                await paths.round(*sets[n % len(sets)], counted=False)
            server_cpu = _cpu_seconds(raw.proc.pid)
            for n in range(args.warmup, args.warmup + args.rounds):
                await paths.round(*sets[n % len(sets)], counted=True)
            used = _cpu_seconds(raw.proc.pid)
            paths.cpu["stdio raw"] += (used - server_cpu) if used and server_cpu else float("nan")
    finally:
        raw.close()
        await reranker.aclose()
        if args.backend == "redis":  # the three paths' keys
            for name in ("in_process", "raw", "sdk"):
                with Reranker(url(name)) as done:
                    done.state.clear()  # type: ignore[attr-defined]
    return paths


def run(args: argparse.Namespace) -> int:
    from benchmarks import MissingRequirement

    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise MissingRequirement("the MCP overhead benchmark needs the 'mcp' package: "
                                 "pip install 'heaprank[mcp]'") from exc
    with tempfile.TemporaryDirectory(prefix="heaprank-mcp-bench-") as tmp:
        measured = asyncio.run(_measure(args, Path(tmp)))
    paths: dict[str, dict[str, float]] = {path: _quantiles(values)
                                          for path, values in measured.times.items()}
    base = paths["in-process"]["median_ms"]
    for path in ("stdio raw", "stdio SDK"):
        paths[path]["added_ms"] = paths[path]["median_ms"] - base
    for path, seconds in measured.cpu.items():
        paths[path]["cpu_ms"] = seconds * 1000.0 / args.rounds
    report = {"benchmark": "mcp-overhead", "backend": args.backend, "rounds": args.rounds,
              "candidates": args.candidates, "k": args.k, "paths": paths,
              "load_average_1min": os.getloadavg()[0], "cpus": os.cpu_count()}
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"rerank of {args.candidates} candidates (top {args.k}, EXPLAIN) + feedback, "
          f"{args.backend} state, {args.rounds} rounds side by side (load average "
          f"{report['load_average_1min']:.1f} on {report['cpus']} CPUs)")
    print(f"{'path':<12} {'median ms':>10} {'p95 ms':>8} {'added ms':>9} {'CPU ms':>7}")
    for path, row in paths.items():
        added = f"{row['added_ms']:9.2f}" if "added_ms" in row else f"{'-':>9}"
        cpu = f"{row['cpu_ms']:7.2f}" if "cpu_ms" in row else f"{'-':>7}"
        print(f"{path:<12} {row['median_ms']:10.2f} {row['p95_ms']:8.2f} {added} {cpu}")
    return 0
