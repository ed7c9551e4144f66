"""``feature_cache_bytes`` bounds what the feature cache holds: its names, rows and slot ids,
its shapes, query readings and expanded rows, counted as held. Before, only the shapes counted:
40,000 reranks with distinct 200-character sources at 4 MB grew RSS by 598 MB (issue 36,
item 7)."""

from __future__ import annotations

import tracemalloc

from heaprank import Reranker

BUDGET = 1 * 2**20
NOW = 1_750_000_000.0


def _candidates(i: int) -> list[dict]:
    """Five candidates, each with a source of 200 characters never seen before: a new slot,
    new feature names and new rows per candidate."""
    return [{"id": f"d{j}", "text": f"The meeting with the team is on day {j}",
             "score": 1 - j / 10, "metadata": {"source": f"{i:08d}-{j}-" + "s" * 189}}
            for j in range(5)]


def test_the_counted_bytes_stay_within_the_budget_with_distinct_sources():
    rr = Reranker(feature_cache_bytes=BUDGET)
    space = rr._space
    most = 0
    for i in range(1_000):
        rr.rerank("When is the meeting?", _candidates(i), track=False, now=NOW)
        most = max(most, space.held_bytes())
        assert space.held_bytes() <= BUDGET
    assert most > BUDGET // 4  # the caches were used, and reset to stay within the bound
    assert space.generation > 3


def test_what_the_feature_cache_keeps_in_memory_is_bounded_by_the_budget():
    """Measured by tracemalloc, not by the count: the memory the caches' code keeps (the
    evidence reader's cache, which is bounded by entries and holds some of the same names, is
    emptied before each measure)."""
    rr = Reranker(feature_cache_bytes=BUDGET)
    for i in range(100):  # warm up: the first allocations of every path
        rr.rerank("When is the meeting?", _candidates(10**7 + i), track=False, now=NOW)
    tracemalloc.start()
    try:
        rr._evidence.clear()
        before = _cache_bytes(tracemalloc.take_snapshot())
        for i in range(800):
            rr.rerank("When is the meeting?", _candidates(i), track=False, now=NOW)
        rr._evidence.clear()
        grown = _cache_bytes(tracemalloc.take_snapshot()) - before
    finally:
        tracemalloc.stop()
    # (before the fix they kept every name and row: ~15 KB more per rerank, never released)
    assert grown <= BUDGET, f"the caches kept {grown / 2**20:.1f} MB for a budget of 1 MB"


def _cache_bytes(snapshot: tracemalloc.Snapshot) -> int:
    """The bytes held by memory allocated in the feature cache's code (the feature space,
    its generations and tables, and the featurisation whose strings it keeps)."""
    kept = snapshot.filter_traces([
        tracemalloc.Filter(True, "*heaprank/scoring/space.py"),
        tracemalloc.Filter(True, "*heaprank/scoring/generation.py"),
        tracemalloc.Filter(True, "*heaprank/_accel/tables.py"),
        tracemalloc.Filter(True, "*heaprank/model/features.py"),
        tracemalloc.Filter(True, "*heaprank/model/questions.py"),
        tracemalloc.Filter(True, "*heaprank/model/text.py"),
    ])
    return sum(stat.size for stat in kept.statistics("filename"))
