"""``python -m benchmarks row-cache``: the worst single rerank while the row cache fills with
labels it has not seen, with the C kernels and with ``HEAPRANK_PURE_PYTHON=1`` side by side.

Run (from the repository root)::

    python -m benchmarks row-cache [--reranks 6000] [--candidates 3]

One :class:`~heaprank.Reranker` (memory state) takes ``--reranks`` reranks of ``--candidates``
candidates each, one question, the same text, and ``source`` and ``kind`` metadata values
distinct per rerank: every rerank adds new shapes and feature rows to the caches (the row
table's keys then differ in their high bits only: the pattern that once made its probe chains
long, commit 4999fd7; and the tables' growth, placed again entry by entry in Python, once
took 100 ms). Each rerank is timed alone, by the wall clock and by the thread's CPU time (on
a busy host the wall clock also counts the time slices other processes took). The workload
runs in two child processes, one with the kernels as built and one with
``HEAPRANK_PURE_PYTHON=1`` set (the switch is read at import), one after the other. Printed
per mode: the median and the worst rerank in ms (wall and CPU) and the rerank at which the
worst CPU time came; then the worst CPU time of the reranks in which no full (generation 2)
garbage collection ran, and how many had one: a full collection walks every object the
process holds (the caches' shapes and rows among them), which is the interpreter's cost, not
the row cache's. The target is a worst rerank under ``TARGET_MS``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

#: The worst single rerank the row cache may cost, in ms.
TARGET_MS = 10.0
MODES = {"kernels": {}, "pure Python": {"HEAPRANK_PURE_PYTHON": "1"}}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--reranks", type=int, default=6000, help="reranks (default 6000)")
    parser.add_argument("--candidates", type=int, default=3, help="per rerank (default 3)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)


def measure(reranks: int, n: int) -> dict[str, Any]:
    """Each rerank's time in this process, summarised: median and worst ms (wall and CPU),
    where the worst CPU time came, the worst without a full collection in it, and whether the
    kernels were in use."""
    import gc

    from heaprank import Reranker
    from heaprank._accel import built

    full = [0]

    def count_full(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 2:
            full[0] += 1

    rr = Reranker()
    wall, cpu, collected = [], [], []
    gc.callbacks.append(count_full)
    try:
        for i in range(reranks):
            cands = [{"id": f"d{j}", "text": "Booked the flight to Lisbon",
                      "score": 1.0 - j / 10,
                      "metadata": {"source": f"src-{i}-{j}", "kind": f"kind-{i}-{j}"}}
                     for j in range(n)]
            before = full[0]
            t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
            rr.rerank("When is my flight?", cands, namespace="rows")
            cpu.append(time.thread_time_ns() - c0)
            wall.append(time.perf_counter_ns() - t0)
            collected.append(full[0] > before)
    finally:
        gc.callbacks.remove(count_full)
    worst = max(range(reranks), key=cpu.__getitem__)
    calm = [t for t, c in zip(cpu, collected) if not c]
    return {"median_ms": statistics.median(wall) / 1e6, "worst_ms": max(wall) / 1e6,
            "median_cpu_ms": statistics.median(cpu) / 1e6, "worst_cpu_ms": cpu[worst] / 1e6,
            "worst_at": worst, "worst_cpu_no_full_gc_ms": max(calm, default=0) / 1e6,
            "full_gcs": sum(collected), "kernels": any(built().values())}


def run(args: argparse.Namespace) -> int:
    from .. import REPO_ROOT  # (the children run from the checkout)

    if args.child:
        print(json.dumps(measure(args.reranks, args.candidates)))
        return 0
    print(f"{args.reranks:,} reranks of {args.candidates} candidates, source and kind distinct "
          f"per rerank, one Reranker (memory state); wall ms per rerank")
    print(f"{'mode':<12} {'median':>7} {'worst':>7} {'median':>7} {'worst':>7} {'worst at':>8}"
          f"  {'worst CPU, no full GC':>21} {'full GCs':>8}")
    print(f"{'':<12} {'wall ms':>7} {'wall ms':>7} {'CPU ms':>7} {'CPU ms':>7}")
    met = True
    for mode, env in MODES.items():
        child_env = {k: v for k, v in os.environ.items() if k != "HEAPRANK_PURE_PYTHON"}
        out = subprocess.run(
            [sys.executable, "-m", "benchmarks", "row-cache", "--child", "--reranks",
             str(args.reranks), "--candidates", str(args.candidates)],
            env={**child_env, **env}, cwd=REPO_ROOT, capture_output=True, text=True,
            check=True).stdout
        got = json.loads(out.strip().splitlines()[-1])
        label = mode if got["kernels"] or env else f"{mode} (not built)"
        ok = got["worst_cpu_no_full_gc_ms"] < TARGET_MS
        met = met and ok
        print(f"{label:<12} {got['median_ms']:>7.3f} {got['worst_ms']:>7.2f} "
              f"{got['median_cpu_ms']:>7.3f} {got['worst_cpu_ms']:>7.2f} {got['worst_at']:>8,}"
              f"  {got['worst_cpu_no_full_gc_ms']:>21.2f} {got['full_gcs']:>8}")
    print(f"target: the worst rerank under {TARGET_MS:g} ms (CPU, no full GC): "
          f"{'met' if met else 'MISSED'}")
    return 0 if met else 1
