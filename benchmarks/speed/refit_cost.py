"""``python -m benchmarks refit-cost``: what one continuous re-fit (``Config.refit.every``)
costs, by the size of the impression log and the backend.

A re-fit runs at feedback time, after the feedback is stored (never inside a rerank): it reads
the state's whole impression log, fits the conditional logit with its held-out check
(:func:`heaprank.learning.tuning.tune`) and stores the record. Here each state is filled with
``n`` impressions with feedback (10 shown items each, one used, drawn from a known
conditional-logit model, written as a reranker writes them), then :meth:`Reranker.refit` is
timed (median of ``--repeats``), split into reading the log and the rest (fit, check, store).
Divided by ``refit.every`` it is the cost a re-fit adds per feedback.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

SHOWN = 10
COLUMNS = ("relevance", "age_days", "importance", "usefulness", "rules")
NOW = 1_750_000_000.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sizes", default="1000,5000,20000",
                        help="impressions in the log, comma-separated (default 1000,5000,20000)")
    parser.add_argument("--backends", default="memory,sqlite",
                        help="memory, sqlite, redis (needs --redis-url), comma-separated")
    parser.add_argument("--redis-url", default=None, help="a Redis URL (a db of your own)")
    parser.add_argument("--repeats", type=int, default=3, help="timed re-fits per cell")
    parser.add_argument("--reranks", type=int, default=3000,
                        help="timed reranks of 50 candidates + EXPLAIN per setting (default 3000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--out", metavar="FILE", help="also write the JSON result here")


def _fill(state: Any, n: int, seed: int) -> None:
    """``n`` impressions with feedback, as a reranker writes them (one namespace per 100)."""
    from heaprank import Config, Refit, Reranker
    from heaprank.records import Impression, new_recall_id

    rng = np.random.default_rng(seed)
    rr = Reranker(state, config=Config(refit=Refit(every=0)))
    true = np.array([1.0, 1.0, 1.0, 1.5])
    taken: set[str] = set()
    requests = []
    for i in range(n):
        rel, age = rng.uniform(0.02, 1.0, SHOWN), rng.exponential(20.0, SHOWN)
        imp, use = rng.choice([0.6, 1.0, 1.3], SHOWN), rng.uniform(0.01, 0.6, SHOWN)
        rec = 0.9 + 0.1 * 2 ** (-age / 30.0)
        u = np.log(np.column_stack([rel, rec, imp, use])) @ true
        p = np.exp(u - u.max())
        chosen = int(rng.choice(SHOWN, p=p / p.sum()))
        recall_id = new_recall_id()
        while recall_id in taken:
            recall_id = new_recall_id()
        taken.add(recall_id)
        ids = tuple(f"d{i}-{j}" for j in range(SHOWN))
        signals = np.column_stack([rel, age, imp, use, np.ones(SHOWN)]).astype(np.float32)
        state.put_impression(Impression(
            recall_id=recall_id, namespace=f"ns{i // 100}", qtype="what", time=NOW + 60.0 * i,
            time_explicit=True, ids=ids, slots=(("kind:fact", "len:<=10"),) * SHOWN,
            signal_names=COLUMNS, signals=tuple(map(tuple, signals.tolist()))))
        requests.append((recall_id, [ids[chosen]]))
    for start in range(0, n, 500):
        for outcome in rr.feedback_many(requests[start:start + 500]):
            assert not isinstance(outcome, Exception), outcome


def _open(backend: str, url: str | None, tmp: Path, n: int) -> Any:
    from heaprank import MemoryState, SQLiteState

    if backend == "memory":
        return MemoryState()
    if backend == "sqlite":
        return SQLiteState(tmp / f"refit-{n}.db")
    if backend == "redis":
        if not url:
            raise ValueError("--backends redis needs --redis-url")
        from heaprank.state.redis import RedisState

        return RedisState(url, prefix=f"hrbench-refit-{n}-{int(time.time())}")
    raise ValueError(f"unknown backend {backend!r}")


def _cell(backend: str, n: int, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    from heaprank import Config, Reranker

    state = _open(backend, args.redis_url, tmp, n)
    try:
        _fill(state, n, args.seed)
        rr = Reranker(state, config=Config())
        totals, reads = [], []
        record = None
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            sum(1 for _ in state.feedback_log(None))
            reads.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            record = rr.refit()
            totals.append(time.perf_counter() - t0)
        assert record is not None
        total, read = statistics.median(totals), statistics.median(reads)
        return {"backend": backend, "impressions": n, "refit_ms": round(1000 * total, 1),
                "read_log_ms": round(1000 * read, 1),
                "fit_and_store_ms": round(1000 * max(total - read, 0.0), 1),
                "per_feedback_ms_at_default_n": round(1000 * total / Config().refit.every, 2),
                "moved": record.moved, "gain": None if record.gain is None else round(record.gain, 4)}
    finally:
        if hasattr(state, "clear"):
            state.clear()
        state.close()


def _rerank_us(config: Any, state: Any, n: int) -> float:
    """Median microseconds of one rerank of 50 candidates plus its EXPLAIN on ``state``."""
    from heaprank import Reranker

    rr = Reranker(state, config=config)
    cands = [{"id": f"c{j}", "text": f"memory {j} about topic {j % 7} on day {j % 5}",
              "score": 1.0 / (1 + j)} for j in range(50)]
    times = []
    for i in range(n + 200):
        t0 = time.perf_counter_ns()
        ranking = rr.rerank("when did we meet?", cands, namespace="ns", k=10, now=NOW + i,
                            track=False)
        ranking.explain()
        if i >= 200:  # (warm-up first)
            times.append(time.perf_counter_ns() - t0)
    return statistics.median(times) / 1000.0


def _hot_path(n: int) -> dict[str, float]:
    """The rerank path with continuous re-fits on (it compares a clock with the next poll, and
    reads the stored record every ``refit.poll_s``) and off, interleaved, on a state that
    holds a fitted record."""
    from heaprank import Config, MemoryState, Refit, Reranker

    state = MemoryState()
    _fill(state, 200, 0)
    Reranker(state).refit()
    on, off = [], []
    for _ in range(3):
        on.append(_rerank_us(Config(), state, n // 3))
        off.append(_rerank_us(Config(refit=Refit(every=0)), state, n // 3))
    return {"refit_on_us": round(statistics.median(on), 1),
            "refit_off_us": round(statistics.median(off), 1)}


def run(args: argparse.Namespace) -> int:
    from heaprank import Config

    try:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
        backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    except ValueError as exc:
        print(f"python -m benchmarks refit-cost: {exc}", file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for backend in backends:
            for n in sizes:
                try:
                    rows.append(_cell(backend, n, args, Path(tmp)))
                except ValueError as exc:
                    print(f"python -m benchmarks refit-cost: {exc}", file=sys.stderr)
                    return 2
    hot = _hot_path(args.reranks)
    result = {"benchmark": "refit-cost", "shown": SHOWN, "repeats": args.repeats,
              "refit_every": Config().refit.every, "rows": rows, "rerank_50_explain": hot}
    text = json.dumps(result, indent=1)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    if args.json:
        print(text)
        return 0
    print(f"One continuous re-fit (Reranker.refit: read the log, fit with the held-out check, "
          f"store), {SHOWN} shown items per impression, median of {args.repeats}; per feedback "
          f"at the default refit_every={result['refit_every']}")
    print()
    print(f"{'backend':<8} {'impressions':>11} {'re-fit ms':>10} {'read log ms':>12} "
          f"{'fit+store ms':>13} {'per feedback ms':>16}")
    for r in rows:
        print(f"{r['backend']:<8} {r['impressions']:>11} {r['refit_ms']:>10.1f} "
              f"{r['read_log_ms']:>12.1f} {r['fit_and_store_ms']:>13.1f} "
              f"{r['per_feedback_ms_at_default_n']:>16.2f}")
    print()
    print(f"rerank 50 + EXPLAIN on memory (median of {args.reranks}): continuous re-fits on "
          f"{hot['refit_on_us']:.1f} us, off {hot['refit_off_us']:.1f} us")
    return 0
