"""Time candidate coercion, the first step of every rerank and feedback.

Run from the repository root (only heaprank and numpy are needed)::

    python benchmarks/bench_coerce.py [--repeats 200]

Converts 50 and 1,000 candidates, given as plain dicts ``{"id", "text", "score", "metadata":
{"created_at", "kind", "source", "thread", "position"}}`` and as :class:`heaprank.Candidate`
objects, with the default strict checks, and prints the median, fastest and p90 wall time per
call (on a shared machine the fastest call is the least disturbed one). The first calls of each
case are discarded as warm-up. To compare with another revision, run the
script with ``PYTHONPATH`` pointing at that revision's checkout.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from heaprank import Candidate
from heaprank.scoring.candidates import coerce_candidates

NOW = 1_750_000_000.0
KINDS = ("fact", "episode", "preference", "note")
SPEAKERS = ("maya", "assistant")


def make_dicts(n: int) -> list[dict[str, Any]]:
    """``n`` retriever results in the plain-dict shape, as a conversation memory returns them."""
    return [{"id": f"mem-{i}", "text": f"Turn {i}: we talked about Lisbon, flights and seat {i % 40}",
             "score": 1.0 - i / (2 * n),
             "metadata": {"created_at": NOW - 3600.0 * i, "kind": KINDS[i % len(KINDS)],
                          "source": SPEAKERS[i % 2], "thread": f"session-{i // 20}",
                          "position": i % 20}}
            for i in range(n)]


def make_candidates(n: int) -> list[Candidate]:
    """The same results as :class:`Candidate` objects."""
    return [Candidate(d["id"], d["text"], d["score"], d["metadata"]) for d in make_dicts(n)]


def time_calls(call: Callable[[], object], repeats: int, warmup: int = 20) -> list[float]:
    """Wall time of ``repeats`` calls, in microseconds."""
    for _ in range(warmup):
        call()
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        out.append((time.perf_counter() - start) * 1e6)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=300, help="timed calls per case")
    args = parser.parse_args()
    print(f"{'case':<22} {'median us':>10} {'best us':>10} {'p90 us':>10} {'median us/cand':>15}")
    for label, make in (("dicts", make_dicts), ("Candidates", make_candidates)):
        for n in (50, 1000):
            items = make(n)
            times = time_calls(lambda items=items: coerce_candidates(items, now=NOW), args.repeats)
            median = statistics.median(times)
            p90 = statistics.quantiles(times, n=10)[-1]
            print(f"{f'{n:,} {label}':<22} {median:>10.1f} {min(times):>10.1f} {p90:>10.1f} "
                  f"{median / n:>15.3f}")


if __name__ == "__main__":
    main()
