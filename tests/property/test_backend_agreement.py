"""MemoryState is the reference: SQLiteState and PostgresState must agree with it exactly after
any feedback (links, documents, stats, and the rankings, scores and EXPLAIN they give)."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from heaprank import MemoryState, Reranker, SQLiteState
from heaprank.model.links import posterior, posterior_mean
from tests.strategies import NOW, POOL, feedback_sequences


@pytest.fixture(scope="module")
def db_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("agree")


def _replay(rr: Reranker, steps, forget: str | None) -> None:
    for t, (namespace, query, k, used) in enumerate(steps):
        ranking = rr.rerank(query, POOL, namespace=namespace, k=k, now=NOW + t)
        rr.feedback(ranking.recall_id, used=[ranking.ids[r] for r in used])
    if forget is not None:
        rr.forget_namespace(forget, scrub_global=forget != "carol")


@given(feedback_sequences, st.sampled_from([None, "alice", "carol"]))
def test_memory_and_sqlite_agree_after_the_same_feedback(db_dir, steps, forget):
    _agree(Reranker(SQLiteState(db_dir / f"{uuid.uuid4().hex}.db")), steps, forget)


@given(feedback_sequences, st.sampled_from([None, "alice", "carol"]))
@settings(max_examples=40)
def test_memory_and_postgres_agree_after_the_same_feedback(postgres_url, steps, forget):
    from heaprank.state.postgres import PostgresState
    from tests.postgres_server import drop_schema, unique_schema

    schema = unique_schema()
    try:
        _agree(Reranker(PostgresState(postgres_url, schema=schema, pool_size=1)), steps, forget)
    finally:
        drop_schema(postgres_url, schema)


def _agree(sqlite: Reranker, steps, forget) -> None:
    """Replay ``steps`` on a memory state and on ``sqlite`` (a stored state) and compare every
    layer, the stats, and the rankings (scores and EXPLAIN included) each namespace now gets."""
    memory = Reranker(MemoryState())
    try:
        _replay(memory, steps, forget)
        _replay(sqlite, steps, forget)
        for namespace in (None, "alice", "bob", "carol", "dave"):
            fm, pm, nm = memory.state.list_links(namespace)
            fs, ps, ns = sqlite.state.list_links(namespace)
            assert fm == fs
            assert np.array_equal(pm, ps) and np.array_equal(nm, ns)
            if namespace is not None:
                every = sorted(set(memory.state.list_links(None)[0]))
                cm = memory.state.read_links(namespace, every)
                cs = sqlite.state.read_links(namespace, every)
                prior = memory.config.learning.prior
                np.testing.assert_allclose(posterior_mean(*posterior(cm, prior)),
                                           posterior_mean(*posterior(cs, prior)), rtol=1e-12)
                ids = [c["id"] for c in POOL]
                dm = memory.state.read_docs(namespace, ids)
                ds = sqlite.state.read_docs(namespace, ids)
                np.testing.assert_array_equal(dm.last_used, ds.last_used)
                np.testing.assert_array_equal(dm.use_count, ds.use_count)
        assert memory.stats() == sqlite.stats()
        assert memory.state.namespaces() == sqlite.state.namespaces()
        assert _links(memory) == _links(sqlite)
        for namespace in ("alice", "bob", "carol"):
            a = memory.rerank("When was it?", POOL, namespace=namespace, now=NOW + 1e4, track=False)
            b = sqlite.rerank("When was it?", POOL, namespace=namespace, now=NOW + 1e4, track=False)
            assert a.ids == b.ids
            assert [r.score for r in a] == [r.score for r in b]
            assert [r.explain() for r in a] == [r.explain() for r in b]
    finally:
        sqlite.close()


def _links(rr: Reranker):
    return [rr.links("*")] + [rr.links(ns) for ns in ("alice", "bob", "carol")]
