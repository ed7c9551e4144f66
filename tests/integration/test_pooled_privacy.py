"""The pooled view publishes no tenant's strings, on every backend (memory, SQLite in a real file,
Redis on the shared server).

Tenant A ranks with its own kind, source and document ids (``Config(features=Features(doc_features=True))``).
Then: A's document features never enter the pooled layer (they stay A's), the pooled listing
(``Reranker.links("*")`` and ``heaprank links --namespace '*'``) shows every name holding a
caller's value as a digest, the same name always the same digest, and leaves a value out until
``Config.learning.pooled_min_namespaces`` namespaces hold it; A's own listing still shows A's names; and
the pool still teaches a new namespace through the codebook features."""

from __future__ import annotations

import hashlib
import sqlite3

import pytest

from heaprank import Config, Features, Learning, MemoryState, Reranker, SQLiteState
from heaprank.app.cli import main
from tests.integration.redis_servers import unique_prefix

SECRETS = ("SECRETSRCA", "SECRETKINDA", "SECRETIDA1", "SECRETIDA2")
A_CANDIDATES = [
    {"id": "SECRETIDA1", "text": "Flight to Lisbon on March 3", "score": 2.0,
     "metadata": {"kind": "SECRETKINDA", "source": "SECRETSRCA"}},
    {"id": "SECRETIDA2", "text": "ok", "score": 1.0, "metadata": {"kind": "fact"}},
]
B_CANDIDATES = [
    {"id": "b1", "text": "Dinner with Ana on Friday", "score": 2.0, "metadata": {"kind": "fact"}},
    {"id": "b2", "text": "ok", "score": 1.0, "metadata": {"kind": "note"}},
]


@pytest.fixture(params=["memory", "sqlite", "redis"])
def state_and_url(request, tmp_path):
    if request.param == "memory":
        backend, url = MemoryState(), None
    elif request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'state.db'}"
        backend = SQLiteState(tmp_path / "state.db")
    else:
        from heaprank.state.redis import RedisState

        prefix = unique_prefix()
        base = request.getfixturevalue("redis_url")
        url = f"{base}{'&' if '?' in base else '?'}prefix={prefix}"
        backend = RedisState(base, prefix=prefix)
    yield backend, url
    if hasattr(backend, "clear"):
        backend.clear()
    backend.close()


def _teach(rr: Reranker) -> None:
    for _ in range(3):
        for namespace, cands, used in (("A", A_CANDIDATES, "SECRETIDA1"), ("B", B_CANDIDATES, "b1")):
            ranking = rr.rerank("When is it?", cands, namespace=namespace)
            rr.feedback(ranking.recall_id, used=[used])


def _stored_pooled_names(state) -> list[str]:
    """The feature names of the pooled layer's stored rows that hold evidence."""
    if isinstance(state, MemoryState):
        links = state._links
        return [name for i, name in enumerate(links.fname) if name is not None
                and (links.gpos[i] != 0 or links.gneg[i] != 0)]
    if isinstance(state, SQLiteState):
        with sqlite3.connect(state.path) as conn:
            return [r[0] for r in conn.execute(
                "SELECT name FROM features WHERE pos != 0 OR neg != 0")]
    names = []  # Redis: every field of every global shard, held or not
    for key in state.layout.pooled:
        names += [f.decode("utf-8") for f in state.client.hkeys(key) if f]  # "": the version
    return names


def test_the_pooled_view_holds_no_tenant_strings(state_and_url, capsys):
    state, url = state_and_url
    # (every pooled name listed, however few namespaces hold it: the k-anonymity below is off)
    rr = Reranker(state, config=Config(features=Features(doc_features=True),
                                       learning=Learning(pooled_min_namespaces=1)))
    _teach(rr)
    pooled = [link.feature for link in rr.links("*")]
    assert pooled and not [f for f in pooled if any(s in f for s in SECRETS)]
    digest = hashlib.sha256(b"source:SECRETSRCA").hexdigest()[:16]
    assert f"source:#{digest}" in pooled  # the same name, always the same digest
    assert f"qt:when&source:#{hashlib.sha256(b'qt:when&source:SECRETSRCA').hexdigest()[:16]}" \
        in pooled
    assert "kind:fact" in pooled and "source:none" in pooled  # codebook names as they are
    stored = _stored_pooled_names(state)
    assert stored and not [f for f in stored if f.startswith("doc:")]
    own = [link.feature for link in rr.links("A")]
    assert {"source:SECRETSRCA", "kind:SECRETKINDA", "doc:SECRETIDA1"} <= set(own)
    if url is not None:
        assert main(["links", "--state", url, "--namespace", "*", "--limit", "0"]) == 0
        assert main(["links", "--state", url, "--namespace", "*", "--json"]) == 0
        out = capsys.readouterr().out
        assert "kind:fact" in out and not [s for s in SECRETS if s in out]


def test_the_pool_still_teaches_a_new_namespace_through_the_codebook(state_and_url):
    state, _ = state_and_url
    rr = Reranker(state, config=Config(features=Features(doc_features=True)))
    _teach(rr)
    counts = state.read_links("new", ["kind:fact", "qt:when&kind:fact", "doc:SECRETIDA1"])
    assert counts.pos.tolist() == [0.0, 0.0, 0.0]  # nothing of its own yet
    assert counts.gpos[0] > 0 and counts.gpos[1] > 0  # the pooled codebook evidence
    assert counts.gpos[2] == 0 and counts.gneg[2] == 0  # A's document is A's alone


def test_the_pooled_view_leaves_out_a_value_until_enough_namespaces_hold_it(state_and_url):
    """A digest is the same for every caller who hashes the same name, so a listed digest
    would tell a tenant who guessed a value that another used it: with the default
    ``learning.pooled_min_namespaces`` (5) a caller's value is listed only once 5 namespaces hold it."""
    state, _ = state_and_url
    rr = Reranker(state, config=Config(features=Features(doc_features=True)))
    _teach(rr)
    digest = f"source:#{hashlib.sha256(b'source:SECRETSRCA').hexdigest()[:16]}"
    pooled = [link.feature for link in rr.links("*")]
    assert "kind:fact" in pooled and digest not in pooled
    for n in range(3):  # A and 3 more: 4 namespaces
        ranking = rr.rerank("When is it?", A_CANDIDATES, namespace=f"T{n}")
        rr.feedback(ranking.recall_id, used=["SECRETIDA1"])
    assert digest not in [link.feature for link in rr.links("*")]
    ranking = rr.rerank("When is it?", A_CANDIDATES, namespace="T3")  # the fifth
    rr.feedback(ranking.recall_id, used=["SECRETIDA1"])
    assert digest in [link.feature for link in rr.links("*")]
