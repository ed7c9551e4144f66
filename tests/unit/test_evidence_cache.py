"""The links a reranker keeps per distinct-row set (``EvidenceReader._kept``): bounded, and
full, it drops its oldest entry per new one rather than all of them at once."""

from __future__ import annotations

from heaprank import Reranker
from heaprank.learning import evidence


def _rerank(rr: Reranker, i: int) -> None:
    cands = [{"id": f"d{j}", "text": "Booked the flight to Lisbon",
              "metadata": {"source": f"src-{i}-{j}", "kind": f"kind-{i}"}} for j in range(2)]
    rr.rerank("When is my flight?", cands, namespace="ns")


def test_a_full_links_cache_drops_its_oldest_entry_not_all_of_them(monkeypatch):
    monkeypatch.setattr(evidence, "ROW_CACHE_ENTRIES", 8)
    rr = Reranker()
    for i in range(8):
        _rerank(rr, i)
    kept = rr._evidence._kept
    assert len(kept) == 8
    first, *rest = list(kept)
    _rerank(rr, 8)
    assert len(kept) == 8 and first not in kept and list(kept)[:7] == rest


def test_dropping_the_oldest_of_an_empty_cache_drops_nothing():
    kept: dict[str, int] = {}
    evidence._drop_oldest(kept)
    assert kept == {}
