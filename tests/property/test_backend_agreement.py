"""MemoryState is the reference: SQLiteState must agree with it exactly after any feedback."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from hypothesis import given
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
    memory = Reranker(MemoryState())
    sqlite = Reranker(SQLiteState(db_dir / f"{uuid.uuid4().hex}.db"))
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
                prior = memory.config.prior
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
    finally:
        sqlite.close()


def _links(rr: Reranker):
    return [rr.links("*")] + [rr.links(ns) for ns in ("alice", "bob", "carol")]
