"""Co-use associations under arbitrary feedback: the bounds always hold, SQLite keeps the same
edges as memory, the factor stays in [1, 1 + cap], and a zero weight changes no ranking."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from heaprank import Config, CoUse, Learning, MemoryState, Reranker, SQLiteState
from heaprank.model.co_use import decayed
from heaprank.scoring.spreading import spread
from tests.strategies import DAY, NOW, POOL, candidate_lists, feedback_sequences, queries

#: Tight bounds, so a dozen feedbacks over eight documents reach them.
TIGHT = CoUse(max_per_doc=2, max_edges=4, half_life_s=2 * DAY)


@pytest.fixture(scope="module")
def db_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("assoc")


def _replay(rr: Reranker, steps, gap_s: float) -> None:
    for t, (namespace, query, k, used) in enumerate(steps):
        ranking = rr.rerank(query, POOL, namespace=namespace, k=k, now=NOW + t * gap_s)
        rr.feedback(ranking.recall_id, used=[ranking.ids[r] for r in used])


@given(feedback_sequences, st.sampled_from([60.0, DAY, 20 * DAY]))
def test_the_bounds_hold_and_pruned_edges_are_gone(steps, gap_s):
    rr = Reranker(MemoryState(), config=Config(learning=Learning(co_use=TIGHT)))
    _replay(rr, steps, gap_s)
    last = NOW + (len(steps) - 1) * gap_s
    for namespace in ("alice", "bob", "carol"):
        edges = rr.state.list_edges(namespace)
        assert len(edges) <= TIGHT.max_edges
        degree: dict[str, int] = {}
        for a, b, strength, count, when in edges:
            assert a < b and 0.0 < strength < 1.0 and count >= 1 and when <= last
            degree[a] = degree.get(a, 0) + 1
            degree[b] = degree.get(b, 0) + 1
        assert max(degree.values(), default=0) <= TIGHT.max_per_doc
        # A namespace's count is exact: what the next eviction is decided on.
        ns = rr.state._links.ns.get(namespace)
        assert (ns.edge_count if ns else 0) == len(edges)


@given(feedback_sequences, st.sampled_from([60.0, 20 * DAY]))
def test_sqlite_keeps_the_same_edges_as_memory(db_dir, steps, gap_s):
    memory = Reranker(MemoryState(), config=Config(learning=Learning(co_use=TIGHT)))
    with Reranker(SQLiteState(db_dir / f"{uuid.uuid4().hex}.db"),
                  config=Config(learning=Learning(co_use=TIGHT))) as sqlite:
        _replay(memory, steps, gap_s)
        _replay(sqlite, steps, gap_s)
        for namespace in ("alice", "bob", "carol"):
            assert sqlite.state.list_edges(namespace) == memory.state.list_edges(namespace)


@st.composite
def edge_matrices(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = draw(st.integers(min_value=1, max_value=9))
    base = np.array(draw(st.lists(st.floats(min_value=-20, max_value=0), min_size=n, max_size=n)))
    upper = np.triu(np.array(draw(st.lists(st.sampled_from([0.0, 0.05, 0.3, 0.9, 1.0]),
                                           min_size=n * n, max_size=n * n))).reshape(n, n), 1)
    strength = upper + upper.T
    return base, strength, np.where(strength > 0, 2.0, 0.0)


@given(edge_matrices(), st.integers(min_value=1, max_value=4), st.integers(min_value=1, max_value=3),
       st.sampled_from([0.1, 0.5, 2.0]))
def test_the_factor_is_bounded_and_one_without_edges(matrices, seeds, depth, cap):
    base, strength, count = matrices
    cu = CoUse(seeds=seeds, depth=depth, cap=cap)
    out = spread(base, strength, count, cu)
    assert np.all(out.factor >= 1.0) and np.all(out.factor <= 1.0 + cap + 1e-12)
    alone = strength.sum(axis=1) == 0
    assert np.all(out.factor[alone] == 1.0)  # no edge, no association
    assert np.all((out.partner >= 0) == (out.factor > 1.0))
    # a stronger edge never gives less activation
    stronger = spread(base, np.minimum(strength * 1.5, 1.0), count, cu)
    assert np.all(stronger.factor >= out.factor - 1e-12)


@given(candidate_lists(min_size=2, max_size=10), queries, st.lists(
    st.tuples(st.integers(0, 9), st.integers(0, 9)), max_size=6))
def test_a_zero_weight_ranks_exactly_as_without_associations(cands, query, co_used):
    learning = Reranker(MemoryState(), config=Config(learning=Learning(co_use=CoUse())))
    ids = [c["id"] for c in cands]
    for t, (x, y) in enumerate(co_used):  # edges exist in the state
        used = sorted({ids[x % len(ids)], ids[y % len(ids)]})
        learning.feedback(namespace="ns", query="When?", shown=cands, used=used, now=NOW + t)
    plain = Reranker(learning.state)  # Config() on the same state
    a = learning.rerank(query, cands, namespace="ns", k=len(cands), now=NOW + 99, track=False)
    b = plain.rerank(query, cands, namespace="ns", k=len(cands), now=NOW + 99, track=False)
    assert a.ids == b.ids and a.order_ids == b.order_ids
    assert np.array_equal(a.log_scores, b.log_scores)
    assert [r.explain() for r in a] == [r.explain() for r in b]


def test_decay_never_raises_a_strength():
    cu = CoUse()
    for s in (0.05, 0.5, 0.99):
        for n in (1, 5):
            values = [decayed(s, n, NOW, NOW + d * DAY, cu) for d in range(0, 400, 7)]
            assert all(x >= y for x, y in zip(values, values[1:]))
