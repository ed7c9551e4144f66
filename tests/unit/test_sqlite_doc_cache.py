"""SQLite keeps the document rows it has read while no other connection commits: a read from
the kept rows is always what a fresh read of the file gives, whoever wrote to it, and nothing
of a forgotten namespace stays in the process."""

from __future__ import annotations

import math
import sqlite3

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from heaprank import Reranker, SQLiteState
from heaprank.model.evidence import DocStats
from heaprank.state.sqlite import doc_cache

NOW = 1_750_000_000.0
CANDS = [{"id": f"m{i}", "text": text, "score": float(10 - i),
          "metadata": {"kind": kind, "created_at": NOW - 3600.0 * i}}
         for i, (text, kind) in enumerate([
             ("Flight to Lisbon on Monday at 9", "fact"), ("Tea with Ben", "note"),
             ("Booked seat 14C for 212 euros", "tool_result"), ("Maya likes jazz", "fact"),
             ("We talked about the trip", "episode"), ("Dentist on Friday", "note")])]
IDS = tuple(c["id"] for c in CANDS)


def _on_file(path, namespace: str, ids: tuple[str, ...]) -> list[tuple[float, float]]:
    """What a fresh connection reads of these documents: (last used, use count), NaN and 0
    for a document never used."""
    conn = sqlite3.connect(path)
    try:
        found = dict((d, (last, uses)) for d, last, uses in conn.execute(
            "SELECT d.id, d.last_used, d.use_count FROM docs d JOIN namespaces n ON n.id = d.ns "
            "WHERE n.name = ?", (namespace,)))
    finally:
        conn.close()
    return [found.get(d, (math.nan, 0.0)) for d in ids]


def _read(state: SQLiteState, namespace: str, ids: tuple[str, ...]) -> list[tuple[float, float]]:
    docs = state.read_docs(namespace, ids)
    return list(zip(docs.last_used.tolist(), docs.use_count.tolist()))


def _same(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> bool:
    return all((x[0] == y[0] or (math.isnan(x[0]) and math.isnan(y[0]))) and x[1] == y[1]
               for x, y in zip(a, b, strict=True))


def _docs_statements(state: SQLiteState) -> list[str]:
    """Record the statements of the state's connection that read the docs table."""
    seen: list[str] = []
    state._connect().set_trace_callback(
        lambda sql: seen.append(sql) if "docs AS d" in sql else None)
    return seen


def _used(rr: Reranker, namespace: str, query: str, used: list[int], now: float) -> None:
    ranking = rr.rerank(query, CANDS, namespace=namespace, k=len(CANDS), now=now)
    rr.feedback(ranking.recall_id, used=[IDS[i] for i in used], now=now)


def test_a_second_read_of_the_same_documents_runs_no_query(tmp_path):
    with SQLiteState(tmp_path / "s.db") as state:
        rr = Reranker(state)
        _used(rr, "ana", "When is the flight?", [0, 2], NOW)
        statements = _docs_statements(state)
        first = _read(state, "ana", IDS)
        assert len(statements) == 1
        assert _same(_read(state, "ana", IDS), first)  # the kept rows: no statement
        assert _same(_read(state, "ana", IDS[:3]), first[:3])
        assert len(statements) == 1
        _read(state, "ana", IDS + ("m99",))  # one id never read: all read again
        assert len(statements) == 2
        assert _same(first, _on_file(tmp_path / "s.db", "ana", IDS))
        assert first[0][1] == 1.0 and first[1][1] == 0.0


def test_own_feedback_is_read_back_at_once(tmp_path):
    with SQLiteState(tmp_path / "s.db") as state:
        rr = Reranker(state)
        before = _read(state, "ana", IDS)
        assert all(uses == 0.0 for _, uses in before)
        _used(rr, "ana", "When is the flight?", [1], NOW + 60)
        after = _read(state, "ana", IDS)
        assert after[1] == (NOW + 60, 1.0)
        assert _same(after, _on_file(tmp_path / "s.db", "ana", IDS))


def test_another_connections_feedback_is_read_back_at_once(tmp_path):
    path = tmp_path / "s.db"
    with SQLiteState(path) as mine, SQLiteState(path) as other:
        _read(mine, "ana", IDS)  # kept
        _used(Reranker(other), "ana", "When is the flight?", [3], NOW + 5)
        assert _read(mine, "ana", IDS)[3] == (NOW + 5, 1.0)
        assert _same(_read(mine, "ana", IDS), _on_file(path, "ana", IDS))


def test_forgetting_a_namespace_leaves_none_of_its_ids_in_the_process(tmp_path):
    path = tmp_path / "s.db"
    with SQLiteState(path) as state, SQLiteState(path) as other:
        rr = Reranker(state)
        for ns in ("ana", "ben"):
            _used(rr, ns, "When is the flight?", [0], NOW)
            _read(state, ns, IDS)
        assert state._doc_rows.namespaces() == ["ana", "ben"]
        rr.forget_namespace("ana")
        assert len(state._doc_rows) == 0  # at once, not at the next read
        assert all(uses == 0.0 for _, uses in _read(state, "ana", IDS))
        # forgotten through another connection: gone at this one's next read
        _read(other, "ben", IDS)
        state.forget_namespace("ben")
        assert _read(other, "ana", IDS) is not None
        assert "ben" not in other._doc_rows.namespaces()
        assert all(uses == 0.0 for _, uses in _read(other, "ben", IDS))


def test_closing_the_state_drops_the_kept_rows(tmp_path):
    state = SQLiteState(tmp_path / "s.db")
    _used(Reranker(state), "ana", "When is the flight?", [0], NOW)
    _read(state, "ana", IDS)
    state.close()
    assert len(state._doc_rows) == 0


def test_the_kept_rows_are_bounded_in_number_and_age(tmp_path, monkeypatch):
    monkeypatch.setattr(doc_cache, "MAX_ENTRIES", 8)
    with SQLiteState(tmp_path / "s.db") as state:
        for ns in ("a", "b", "c", "d"):
            _read(state, ns, IDS)
            assert len(state._doc_rows) <= 8
        statements = _docs_statements(state)
        _read(state, "d", IDS)
        assert statements == []  # the latest read is kept
        clock = [doc_cache.time.monotonic() + doc_cache.MAX_AGE_S + 1]
        monkeypatch.setattr(doc_cache.time, "monotonic", lambda: clock[0])
        _read(state, "d", IDS)  # kept too long ago: dropped, read again
        _read(state, "d", IDS)
        assert len(statements) == 1


OPS = st.one_of(
    st.tuples(st.just("read"), st.integers(0, 1), st.sampled_from(["ana", "ben"]),
              st.lists(st.integers(0, len(IDS) - 1), min_size=1, max_size=len(IDS),
                       unique=True)),
    st.tuples(st.just("feedback"), st.integers(0, 1), st.sampled_from(["ana", "ben"]),
              st.lists(st.integers(0, len(IDS) - 1), max_size=3, unique=True)),
    st.tuples(st.just("forget"), st.integers(0, 1), st.sampled_from(["ana", "ben"]),
              st.just([])),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OPS, min_size=1, max_size=12))
def test_every_read_is_what_the_file_holds_whoever_wrote(tmp_path_factory, ops):
    """Two connections on one file, reads, feedbacks and forgets in any order: every read,
    of some documents or (after each step) of all of them, by either connection, gives what a
    fresh connection reads of the file at that moment."""
    path = tmp_path_factory.mktemp("docs") / "s.db"
    with SQLiteState(path) as one, SQLiteState(path) as two:
        states = (one, two)
        rerankers = (Reranker(one), Reranker(two))
        for step, (op, who, ns, picks) in enumerate(ops):
            if op == "read":
                ids = tuple(IDS[i] for i in picks)
                assert _same(_read(states[who], ns, ids), _on_file(path, ns, ids))
            elif op == "feedback":
                _used(rerankers[who], ns, "When is the flight?", picks, NOW + step)
            else:
                rerankers[who].forget_namespace(ns)
            for state in states:
                for name in ("ana", "ben"):
                    assert _same(_read(state, name, IDS), _on_file(path, name, IDS))


def test_the_cache_is_checked_by_key():
    """A read under another key than the rows were kept with finds nothing, and rows read
    under an old key are not kept."""
    cache = doc_cache.DocCache()
    stats = DocStats(np.array([NOW, math.nan]), np.array([2.0, 0.0]))
    assert cache.get(("k", 1), "ana", ("a", "b")) is None  # takes the key
    cache.put(("k", 1), "ana", ("a", "b"), stats)
    kept = cache.get(("k", 1), "ana", ("b", "a"))
    assert kept is not None and kept.use_count.tolist() == [0.0, 2.0]
    assert cache.get(("k", 1), "ben", ("a",)) is None  # another namespace's ids are its own
    assert cache.get(("k", 2), "ana", ("a",)) is None and len(cache) == 0
    cache.put(("k", 1), "ana", ("a", "b"), stats)  # read under the old key: not kept
    assert len(cache) == 0 and cache.get(("k", 2), "ana", ("a",)) is None
