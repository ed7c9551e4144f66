"""The PostgreSQL state beyond the conformance suite: its URLs, its schema (created, versioned,
and refused when it is another application's), the missing driver, and a lost connection."""

from __future__ import annotations

import sys
import threading

import psycopg
import pytest

from heaprank import Reranker
from heaprank.errors import ConfigError, MissingDependencyError, StateError, StateUnavailableError
from heaprank.state import open_state
from tests.postgres_server import state_url

NOW = 1_750_000_000.0
CANDS = [{"id": f"d{i}", "text": f"Team meeting note {i} on Monday", "score": float(6 - i)}
         for i in range(6)]


def test_a_postgres_url_opens_a_state_in_its_schema(postgres_url, postgres_schema):
    from heaprank.state.postgres import PostgresState

    for scheme in ("postgresql", "postgres"):
        url = state_url(postgres_url.replace("postgresql://", f"{scheme}://", 1), postgres_schema,
                        pool_size=2, max_impressions=10)
        state = open_state(url)
        try:
            assert isinstance(state, PostgresState)
            assert (state.schema, state.pool_size, state.max_impressions) == (
                postgres_schema, 2, 10)
            assert "schema=" not in state.url and "pool_size" not in state.url
        finally:
            state.close()
    with psycopg.connect(postgres_url) as conn:
        meta = dict(conn.execute(f"SELECT key, value FROM {postgres_schema}.meta").fetchall())
    assert meta["application"] == "heaprank" and meta["schema_version"] == "1"


@pytest.mark.parametrize("option", ["schema=Bad-Name", "schema=a;drop", "pool_size=zero",
                                    "mode=rx", "max_impressions=0"])
def test_a_bad_url_option_is_a_config_error_naming_it(postgres_url, option):
    with pytest.raises(ConfigError, match=option.split("=")[0].replace("pool_size", "pool_size")):
        open_state(f"{postgres_url}?{option}")


def test_a_schema_of_another_application_is_refused_and_left_alone(postgres_url, postgres_schema):
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {postgres_schema}")
        conn.execute(f"CREATE TABLE {postgres_schema}.orders (id int)")
    with pytest.raises(StateError, match="another application"):
        open_state(state_url(postgres_url, postgres_schema))
    with psycopg.connect(postgres_url) as conn:
        tables = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s",
                              (postgres_schema,)).fetchall()
    assert tables == [("orders",)]


def test_a_table_heaprank_did_not_create_beside_its_own_is_refused(postgres_url, postgres_schema):
    open_state(state_url(postgres_url, postgres_schema)).close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {postgres_schema}.mine (id int)")
    with pytest.raises(StateError, match="did not create"):
        open_state(state_url(postgres_url, postgres_schema))


def test_a_newer_schema_version_is_refused(postgres_url, postgres_schema):
    open_state(state_url(postgres_url, postgres_schema)).close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"UPDATE {postgres_schema}.meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StateError, match="newer than this heaprank"):
        open_state(state_url(postgres_url, postgres_schema))


def test_read_only_creates_nothing_and_refuses_writes(postgres_url, postgres_schema):
    with pytest.raises(StateError, match="holds no heaprank state"):
        open_state(state_url(postgres_url, postgres_schema, mode="ro"))
    with Reranker(state_url(postgres_url, postgres_schema)) as rr:
        ranking = rr.rerank("When is the meeting?", CANDS, namespace="t", k=3, now=NOW)
        rr.feedback(ranking.recall_id, used=[ranking.ids[0]])
    state = open_state(state_url(postgres_url, postgres_schema, mode="ro"))
    try:
        assert state.stats()["feedbacks"] == 1
        with pytest.raises(StateError, match="read-only"):
            state.forget_namespace("t")
    finally:
        state.close()


def test_without_psycopg_the_error_names_the_extra(monkeypatch, postgres_url):
    monkeypatch.setitem(sys.modules, "psycopg", None)  # an import of it now fails
    with pytest.raises(MissingDependencyError, match=r"pip install 'heaprank\[postgres\]'"):
        open_state(postgres_url)


def _terminate(postgres_url: str, schema: str) -> int:
    """Terminate every server process of the state's pool (named by its search path)."""
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        return sum(1 for (done,) in conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> "
            "pg_backend_pid() AND datname = current_database() AND usename = current_user "
            "AND backend_type = 'client backend' AND application_name = %s",
            (f"heaprank-{schema}",)) if done)


def test_a_lost_connection_is_a_named_error_and_the_next_call_reconnects(postgres_url,
                                                                          postgres_schema):
    url = state_url(postgres_url, postgres_schema, application_name=f"heaprank-{postgres_schema}")
    rr = Reranker(url)
    try:
        first = rr.rerank("When is the meeting?", CANDS, namespace="t", k=3, now=NOW)
        rr.feedback(first.recall_id, used=[first.ids[0]])
        assert _terminate(postgres_url, postgres_schema) >= 1
        with pytest.raises(StateUnavailableError, match="connection .*lost"):
            rr.state.stats()
        assert rr.state.stats()["feedbacks"] == 1  # reconnected
        # a rerank during an outage degrades (ranked on the priors, flagged) instead of failing
        assert _terminate(postgres_url, postgres_schema) >= 1
        degraded = rr.rerank("When is the meeting?", CANDS, namespace="t", k=3, now=NOW + 1)
        assert len(degraded.ids) == 3
        assert any("unavailable" in flag for flag in degraded[0].flags), degraded[0].flags
        again = rr.rerank("When is the meeting?", CANDS, namespace="t", k=3, now=NOW + 2)
        out = rr.feedback(again.recall_id, used=[again.ids[0]])
        assert out.applied == (again.ids[0],)
        assert rr.stats()["feedbacks"] == 2
    finally:
        rr.close()


def test_a_busy_pool_makes_a_call_wait_and_never_opens_more_than_pool_size(postgres_url,
                                                                          postgres_schema):
    name = f"heaprank-{postgres_schema}"
    state = open_state(state_url(postgres_url, postgres_schema, pool_size=1, timeout=0.5,
                                 application_name=name))
    rr = Reranker(state)
    ranking = rr.rerank("When is the meeting?", CANDS, namespace="t", k=3, now=NOW)
    rr.feedback(ranking.recall_id, used=[ranking.ids[0]])
    with psycopg.connect(postgres_url) as holder:  # holds the namespace's row: forget waits
        holder.execute(f"SELECT 1 FROM {postgres_schema}.namespaces FOR UPDATE")
        forget = threading.Thread(target=state.forget_namespace, args=("t",))
        forget.start()
        try:
            for _ in range(2):  # the pool's one connection is busy: no call gets another
                with pytest.raises(StateUnavailableError, match="no connection"):
                    state.stats()
            opened = holder.execute("SELECT count(*) FROM pg_stat_activity WHERE "
                                    "application_name = %s", (name,)).fetchone()[0]
        finally:
            holder.rollback()
            forget.join(timeout=10)
    try:
        assert opened == 1
        assert not forget.is_alive() and state.stats()["namespaces"] == 0
    finally:
        rr.close()


def _naming(postgres_url: str, schema: str, ns_id: int, name: str) -> list[str]:
    """The ``table.column`` of every row of ``schema`` that holds namespace ``ns_id`` or text
    (or bytes) containing ``name``."""
    found = []
    with psycopg.connect(postgres_url) as conn:
        columns = conn.execute("SELECT table_name, column_name, data_type FROM "
                               "information_schema.columns WHERE table_schema = %s",
                               (schema,)).fetchall()
        for table, column, kind in columns:
            arg: object
            if column == "ns" or (table == "namespaces" and column == "id"):
                where, arg = f"{column} = %s", ns_id
            elif kind == "text":
                where, arg = f"{column} LIKE %s", f"%{name}%"
            elif kind == "bytea":
                where, arg = f"position(%s IN {column}) > 0", name.encode()
            else:
                continue
            if conn.execute(f"SELECT count(*) FROM {schema}.{table} WHERE {where}",
                            (arg,)).fetchone()[0]:
                found.append(f"{table}.{column}")
    return sorted(found)


def test_forget_leaves_no_row_of_the_tenant(postgres_url, postgres_schema):
    """After a forget no table of the schema holds a row of the namespace (by its id) nor any
    text naming it (its name, its private feature names, its document ids)."""
    with Reranker(state_url(postgres_url, postgres_schema)) as rr:
        for ns in ("alice", "bob"):
            cands = [{**c, "id": f"{ns}-{c['id']}", "metadata": {"source": f"{ns}@example.com"}}
                     for c in CANDS]
            ranking = rr.rerank("When is the meeting?", cands, namespace=ns, k=3, now=NOW)
            rr.feedback(ranking.recall_id, used=[ranking.ids[0]])
            rr.feedback(namespace=ns, query="Who?", shown=cands[:2], used=[cands[0]["id"]],
                        feedback_id=f"{ns}-1", now=NOW)
        with psycopg.connect(postgres_url) as conn:
            (alice,) = conn.execute(f"SELECT id FROM {postgres_schema}.namespaces WHERE name = "
                                    f"'alice'").fetchone()
        before = _naming(postgres_url, postgres_schema, alice, "alice")
        assert {"docs.ns", "feedback_ids.ns", "features.name", "impressions.body",
                "links.ns", "namespaces.name"} <= set(before)  # not vacuous
        rr.forget_namespace("alice")
    assert _naming(postgres_url, postgres_schema, alice, "alice") == []
    assert len(_naming(postgres_url, postgres_schema, -1, "bob")) >= 4  # bob's rows stay


def _feed_in_child(state) -> None:
    rr = Reranker(state)
    ranking = rr.rerank("When is the meeting?", CANDS, namespace="child", k=3, now=NOW)
    rr.feedback(ranking.recall_id, used=[ranking.ids[0]])


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_connects_anew_and_leaves_the_parents_connection_working(
        postgres_url, postgres_schema):
    import multiprocessing

    state = open_state(state_url(postgres_url, postgres_schema))
    try:
        rr = Reranker(state)
        first = rr.rerank("When is the meeting?", CANDS, namespace="parent", k=3, now=NOW)
        child = multiprocessing.get_context("fork").Process(target=_feed_in_child, args=(state,))
        child.start()
        child.join(timeout=60)
        assert child.exitcode == 0
        rr.feedback(first.recall_id, used=[first.ids[0]])  # the parent's pool still works
        assert state.namespaces() == ["child", "parent"]
        assert state.stats()["feedbacks"] == 2
    finally:
        state.close()
