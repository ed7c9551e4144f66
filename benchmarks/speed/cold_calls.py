"""What a string of small numpy calls costs with warm and with cold CPU caches, beside plain
Python work.

Run (from the repository root)::

    python -m benchmarks cold-calls [--reps 2000] [--cold-mb 8]

Why: a rerank of 50 candidates is a few dozen calls on arrays of 50, and in the latency
benchmark's side-by-side block it runs right after heapdb-memory's recall, which evicts the
caches. The first block times 19 numpy calls of the kind a rerank made (a normalisation, a
recency, a log-sum and a lexsort on 50 values) and, for scale, 300 dict inserts of plain
Python, each warm (the same call again) and after reading ``--cold-mb`` megabytes; medians in
microseconds. (The order kernel this once timed beside ``np.lexsort``, ``_rank.best_first``,
is gone with issue 31: the rank stage is numpy only.)
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

import numpy as np


def _numpy_calls(x: np.ndarray, m: np.ndarray, w: np.ndarray) -> np.ndarray:
    lo, hi = float(np.minimum.reduce(x)), float(np.maximum.reduce(x))
    out = x - lo
    out /= hi - lo
    out.round(12, out=out)
    out *= 0.9
    out += 0.1
    r = np.maximum(x, 0.0)
    r /= -3.0
    np.exp2(r, out=r)
    r *= 0.9
    r += 0.1
    math.isnan(np.add.reduce(r))
    terms = np.log(m)
    terms *= w
    total = terms.sum(axis=1)
    return np.lexsort((-x, -total))


def _python_work() -> dict[int, tuple[int, str]]:
    return {i: (i, str(i)) for i in range(300)}


def median_us(work: Callable[[], object], reps: int, before: Callable[[], object] | None) -> float:
    times = []
    for _ in range(reps):
        if before is not None:
            before()
        t0 = time.perf_counter_ns()
        work()
        times.append(time.perf_counter_ns() - t0)
    times.sort()
    return times[len(times) // 2] / 1e3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--cold-mb", type=float, default=8.0)
    parser.add_argument("--seed", type=int, default=0)


def run(args: argparse.Namespace) -> int:
    rng = np.random.default_rng(args.seed)
    buffer = np.ones(int(args.cold_mb * 2**20) // 8)
    evict = buffer.sum  # reads every byte of it
    x, m, w = rng.random(50), rng.random((50, 6)) + 0.01, rng.random(6)
    print(f"median us of {args.reps} calls; cold: {args.cold_mb:g} MB read before each")
    print(f"{'work':<40} {'warm':>8} {'cold':>8}")
    for name, work in (("19 numpy calls on arrays of 50", lambda: _numpy_calls(x, m, w)),
                       ("300 dict inserts (plain Python)", _python_work)):
        warm, cold = median_us(work, args.reps, None), median_us(work, args.reps, evict)
        print(f"{name:<40} {warm:>8.1f} {cold:>8.1f}")
    return 0
