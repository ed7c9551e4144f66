"""LeaveNamespaceOut: a namespace read through the view looks like a newcomer to the same pool."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from heaprank import MemoryState, Reranker, SQLiteState, StateBackend, StateError
from heaprank.learning.evaluation import LeaveNamespaceOut

NOW = 1_750_000_000.0
DAY = 86_400.0
QUERY = "When is my flight to Lisbon?"
CANDIDATES = [
    {"id": "flight", "text": "My flight to Lisbon is on March 3", "score": 7.0,
     "metadata": {"kind": "fact", "created_at": NOW - 20 * DAY, "source": "calendar"}},
    {"id": "price", "text": "Flights to Lisbon cost $400", "score": 6.5,
     "metadata": {"kind": "tool_result", "created_at": NOW - DAY, "source": "search"}},
    {"id": "seat", "text": "I prefer window seats", "score": 5.0,
     "metadata": {"kind": "preference", "created_at": NOW - 2 * DAY}},
    {"id": "chat", "text": "ok thanks", "score": 1.0, "metadata": {"created_at": NOW - DAY}},
]


def open_backend(kind: str, tmp_path: Path, name: str) -> StateBackend:
    return MemoryState() if kind == "memory" else SQLiteState(str(tmp_path / f"{name}.db"))


def teach(rr: Reranker, namespace: str, used: str, times: int) -> None:
    for i in range(times):
        ranking = rr.rerank(QUERY, CANDIDATES, namespace=namespace, k=4, now=NOW + i)
        rr.feedback(ranking.recall_id, used=[used], now=NOW + i)


@pytest.fixture(params=["memory", "sqlite"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture()
def pooled(kind: str, tmp_path: Path) -> Iterator[Reranker]:
    """bob's feedback first, then alice's: bob's increments do not depend on alice's."""
    rr = Reranker(open_backend(kind, tmp_path, "pooled"))
    teach(rr, "bob", "flight", 6)
    teach(rr, "alice", "price", 6)
    yield rr
    rr.close()


@pytest.fixture()
def bob_only(kind: str, tmp_path: Path) -> Iterator[Reranker]:
    """The same state had alice never given feedback: what the view must show alice."""
    rr = Reranker(open_backend(kind, tmp_path, "bob_only"))
    teach(rr, "bob", "flight", 6)
    yield rr
    rr.close()


def all_features(rr: Reranker) -> list[str]:
    return rr.state.list_links(None)[0]


def test_own_evidence_reads_as_zero_and_the_pool_loses_only_the_namespaces_share(pooled, bob_only):
    features = all_features(pooled)
    stored = pooled.state.read_links("alice", features)
    assert stored.pos.sum() > 0 and stored.neg.sum() > 0  # alice has evidence to hide
    seen = LeaveNamespaceOut(pooled.state).read_links("alice", features)
    assert not seen.pos.any() and not seen.neg.any()
    without_alice = bob_only.state.read_links("nobody", features)
    np.testing.assert_allclose(seen.gpos, without_alice.gpos, atol=1e-9)
    np.testing.assert_allclose(seen.gneg, without_alice.gneg, atol=1e-9)


def test_document_usage_is_hidden(pooled):
    ids = [c["id"] for c in CANDIDATES]
    stored = pooled.state.read_docs("alice", ids)
    assert stored.use_count.sum() > 0  # alice used "price"
    seen = LeaveNamespaceOut(pooled.state).read_docs("alice", ids)
    assert all(math.isnan(t) for t in seen.last_used.tolist())
    assert seen.use_count.tolist() == [0.0] * len(ids)


def test_ranking_through_the_view_equals_a_newcomer_to_the_other_namespaces_pool(pooled, bob_only):
    own = pooled.rerank(QUERY, CANDIDATES, namespace="alice", k=4, now=NOW, track=False)
    viewed = pooled.with_state(LeaveNamespaceOut(pooled.state)).rerank(
        QUERY, CANDIDATES, namespace="alice", k=4, now=NOW, track=False)
    newcomer = bob_only.rerank(QUERY, CANDIDATES, namespace="carol", k=4, now=NOW, track=False)
    assert [r.candidate.id for r in viewed] == [r.candidate.id for r in newcomer]
    assert [r.score for r in viewed] == pytest.approx([r.score for r in newcomer], rel=1e-9)
    # alice's own history did change her ranking: the view is not a no-op.
    assert [r.score for r in own] != pytest.approx([r.score for r in viewed], rel=1e-9)


def test_writes_are_refused_and_the_wrapped_state_is_untouched(pooled):
    ranking = pooled.rerank(QUERY, CANDIDATES, namespace="alice", now=NOW)  # recorded in the base
    before = pooled.state.stats()
    view_rr = pooled.with_state(LeaveNamespaceOut(pooled.state))
    # track=True would record: the view refuses, so the ranking comes back untracked, flagged
    untracked = view_rr.rerank(QUERY, CANDIDATES, namespace="alice", now=NOW)
    assert "state read-only: not tracked" in untracked[0].flags
    assert view_rr.state.get_impression(untracked.recall_id) is None
    with pytest.raises(StateError, match="read-only"):
        view_rr.feedback(namespace="alice", query=QUERY, shown=CANDIDATES, used=["seat"], now=NOW)
    with pytest.raises(StateError, match="read-only"):
        view_rr.state.forget_namespace("alice")
    assert view_rr.state.get_impression(ranking.recall_id) is None
    assert pooled.state.get_impression(ranking.recall_id) is not None
    view_rr.close()
    assert pooled.state.stats() == before
    assert pooled.state.namespaces() == ["alice", "bob"]  # still open, nothing forgotten


def test_inspection_passes_through(pooled):
    view = LeaveNamespaceOut(pooled.state)
    assert view.namespaces() == pooled.state.namespaces()
    assert view.stats() == pooled.state.stats()
    features, pos, neg = view.list_links("alice")
    base_features, base_pos, base_neg = pooled.state.list_links("alice")
    assert features == base_features
    assert pos.tolist() == base_pos.tolist() and neg.tolist() == base_neg.tolist()


def test_the_view_satisfies_the_state_protocol(pooled):
    assert isinstance(LeaveNamespaceOut(pooled.state), StateBackend)
