"""``python -m benchmarks latency-runs FILE...``: several latency runs side by side, one line each.

Reads the JSON that ``python -m benchmarks latency --out FILE`` writes and prints, per run, the
machine's memory latency at its start and end (the 64 MB pointer chase), the side-by-side pair
at 50 candidates (heapdb-memory's recall and heaprank's rerank, call by call) and every target's
measured value, with how many were met. On a shared host the memory latency moves from minute to
minute, and the cold-cache figures with it: runs made minutes apart show by how much.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

#: Columns of the targets, in the order ``benchmarks.speed.latency`` reports them.
TARGET_COLUMNS = ("x faster", "1k/50", "sqlite/mem", "feedback/s", "FULL/s", "NORMAL/s",
                  "NORMAL 4p/s")


def row(path: Path, width: int = 22, commit_width: int = 8) -> str:
    run = json.loads(path.read_text(encoding="utf-8"))
    probe = run["machine"].get("memory_probe_ns") or []
    memory = " -> ".join(f"{ns:.0f}" for ns in probe) or "?"
    pair = run["side_by_side"]["rows"]
    values = [t["value"] for t in run["targets"]]
    met = sum(bool(t["met"]) for t in run["targets"])
    cells = [f"{v:{w}.2f}" if v < 100 else f"{v:{w},.0f}"
             for v, w in zip(values, (len(c) for c in TARGET_COLUMNS))]
    commit = run["software"]["commit"]
    return (f"{path.name:<{width}} {run['started_utc'][11:16]:>5}  {commit:<{commit_width}} "
            f"{memory:>10}  {pair['heapdb-memory recall+explain']['p50_ms']:6.3f}  "
            f"{pair['heaprank rerank+explain']['p50_ms']:6.3f}  " + "  ".join(cells)
            + f"  {met} of {len(values)}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", type=Path, help="JSON of benchmarks latency --out")


def run(args: argparse.Namespace) -> int:
    width = max(22, *(len(path.name) for path in args.files))
    commits = [json.loads(path.read_text(encoding="utf-8"))["software"]["commit"]
               for path in args.files]
    commit_width = max(8, *map(len, commits))  # "+dirty": a tree with changes
    print(f"{'run':<{width}} {'UTC':>5}  {'commit':<{commit_width}} {'memory ns':>10}  "
          f"{'recall':>6}  {'rerank':>6}  " + "  ".join(TARGET_COLUMNS) + "  targets met")
    for path in args.files:
        print(row(path, width, commit_width))
    return 0

