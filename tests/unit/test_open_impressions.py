"""Impressions waiting for feedback are bounded in memory: a tracked rerank that never gets
feedback must not cost memory forever (290k of them once held 432 MiB). ``MemoryState`` keeps
at most ``max_open_impressions`` of them (oldest dropped first), frees the namespaces only they
held, and ``stats()`` shows the open count, the cap and every namespace object that exists."""

from __future__ import annotations

import gc
import tracemalloc

import pytest

from heaprank import MemoryState, Reranker, SQLiteState
from heaprank.errors import ConfigError, FeedbackError
from heaprank.state import open_state

CANDIDATES = [{"id": f"m{i}", "text": f"Note {i} from Monday", "score": float(i)}
              for i in range(6)]


def _reranks(rr: Reranker, start: int, stop: int) -> None:
    for j in range(start, stop):  # each in a namespace of its own, none with feedback
        rr.rerank("When was it?", CANDIDATES, namespace=f"tenant-{j}", k=4)


def test_open_impressions_stay_at_the_cap_and_memory_stays_flat():
    state = MemoryState(max_open_impressions=500)
    rr = Reranker(state)
    tracemalloc.start()
    try:
        _reranks(rr, 0, 1_500)  # warm: the cap reached, every cache filled
        stats = rr.stats()
        assert (stats["open_impressions"], stats["max_open_impressions"]) == (500, 500)
        assert stats["impressions"] == 500
        assert stats["namespaces"] == 500  # the namespaces the open impressions hold, no more
        gc.collect()  # garbage awaiting a cycle pass is noise of +-150 KB, not growth
        before = tracemalloc.take_snapshot()
        _reranks(rr, 1_500, 4_500)
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    grown = sum(s.size_diff for s in after.compare_to(before, "filename"))
    assert grown < 256 * 1024, f"{grown} bytes more after 3000 reranks past the cap"
    stats = rr.stats()
    assert (stats["open_impressions"], stats["namespaces"]) == (500, 500)


def test_the_oldest_open_impression_is_dropped_first():
    rr = Reranker(MemoryState(max_open_impressions=3))
    rankings = [rr.rerank("q", CANDIDATES, namespace="ns") for _ in range(4)]
    with pytest.raises(FeedbackError, match="unknown"):
        rr.feedback(rankings[0].recall_id, used=[rankings[0].ids[0]])
    for ranking in rankings[1:]:
        assert rr.feedback(ranking.recall_id, used=[ranking.ids[0]]).applied
    stats = rr.stats()
    assert (stats["open_impressions"], stats["impressions"], stats["feedbacks"]) == (0, 3, 3)


def test_a_namespace_with_learned_links_outlives_its_impressions():
    rr = Reranker(MemoryState(max_open_impressions=2, max_impressions=1))
    ranking = rr.rerank("q", CANDIDATES, namespace="kept")
    rr.feedback(ranking.recall_id, used=[ranking.ids[0]])
    _reranks(rr, 0, 300)
    rr.state.prune()
    assert "kept" in rr.state.namespaces() and rr.links("kept")
    assert rr.stats()["namespaces"] == 3  # "kept" and the two holding an open impression


def test_the_cap_is_documented_defaults_to_100_000_and_is_checked():
    assert MemoryState().max_open_impressions == 100_000
    assert "max_open_impressions" in (MemoryState.__doc__ or "")
    assert MemoryState().stats()["max_open_impressions"] == 100_000
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="max_open_impressions"):
            MemoryState(max_open_impressions=bad)


def test_memory_urls_take_the_cap_and_refuse_unknown_options():
    state = open_state("memory://?max_open_impressions=7&max_impressions=9&impression_ttl=60")
    assert isinstance(state, MemoryState)
    assert (state.max_open_impressions, state.max_impressions, state.impression_ttl_s) == (7, 9, 60)
    with pytest.raises(ConfigError, match="bogus"):
        open_state("memory://?bogus=1")
    with pytest.raises(ConfigError, match="max_open_impressions"):
        open_state("memory://?max_open_impressions=lots")


def test_sqlite_bounds_its_open_impressions_by_the_same_cap(tmp_path):
    state = SQLiteState(tmp_path / "state.db", max_open_impressions=50)
    rr = Reranker(state)
    _reranks(rr, 0, 600)
    state.prune()
    stats = rr.stats()
    assert (stats["open_impressions"], stats["max_open_impressions"]) == (50, 50)
    state.close()
    url_state = open_state(f"sqlite:///{tmp_path / 'url.db'}?max_open_impressions=5")
    assert isinstance(url_state, SQLiteState) and url_state.max_open_impressions == 5
    url_state.close()
