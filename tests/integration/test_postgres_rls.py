"""Row-level security per namespace in a PostgreSQL state, on the real server, with roles of
this test's own: an owner (no superuser) migrates the schema with ``rls=on`` and grants app role
A ``user:a`` and the prefix ``team:a:*``, app role B ``user:b``. Then A ranks and learns for its
namespaces as without row-level security, while B's rows stay out of its reach: heaprank's calls
raise a StateError naming A and the namespace A asked for, and A's own hand-written SQL sees and
changes none of them. The pooled counts take every app's feedback; the owner forgets anything."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import psycopg
import pytest

from heaprank import Reranker
from heaprank.app.cli import main
from heaprank.errors import ConfigError, FeedbackError, StateError
from heaprank.state import open_state
from tests.postgres_server import drop_schema, state_url

NOW = 1_750_000_000.0
A_DOCS = [{"id": f"a{i}", "text": f"Alpha project meeting note {i} on Monday", "score": 6.0 - i}
          for i in range(5)]
B_DOCS = [{"id": f"SECRETB{i}", "text": f"Budget review {i} with the board", "score": 6.0 - i}
          for i in range(5)]
OWN_TABLES = ("namespaces", "links", "docs", "impressions", "feedback_ids", "edges")


@dataclass
class Roles:
    """The test's roles and the state URL of each (the owner's, A's, B's)."""

    schema: str
    owner: str
    a: str
    b: str
    admin: str  # the superuser's URL of the server (checks and clean-up)

    def url(self, role: str) -> str:
        parts = urlsplit(self.admin)
        host = parts.netloc.rsplit("@", 1)[-1]
        return state_url(urlunsplit(parts._replace(netloc=f"{role}@{host}")), self.schema)


@pytest.fixture()
def roles(postgres_url: str, postgres_schema: str) -> Iterator[Roles]:
    tag = uuid.uuid4().hex[:10]
    made = Roles(postgres_schema, f"hr_owner_{tag}", f"hr_app_a_{tag}", f"hr_app_b_{tag}",
                 postgres_url)
    database = urlsplit(postgres_url).path.lstrip("/")
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        for role in (made.owner, made.a, made.b):
            conn.execute(f"CREATE ROLE {role} LOGIN NOSUPERUSER NOBYPASSRLS")
        conn.execute(f'GRANT CREATE ON DATABASE "{database}" TO {made.owner}')
    try:
        assert main(["state", "migrate", f"{made.url(made.owner)}&rls=on"]) == 0
        for role, namespace in ((made.a, "user:a"), (made.a, "team:a:*"), (made.b, "user:b")):
            assert main(["state", "grant", made.url(made.owner), role, namespace]) == 0
        yield made
    finally:
        drop_schema(postgres_url, postgres_schema)
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            for role in (made.owner, made.a, made.b):
                conn.execute(f"DROP OWNED BY {role} CASCADE")
                conn.execute(f"DROP ROLE {role}")


def _learn(rr: Reranker, namespace: str, docs: list[dict], rounds: int = 3) -> list[tuple]:
    """Rank and give feedback ``rounds`` times: each ranking's ids and log scores."""
    seen = []
    for i in range(rounds):
        ranking = rr.rerank("When is the project meeting?", docs, namespace=namespace, k=3,
                            now=NOW + i)
        rr.feedback(ranking.recall_id, used=[ranking.ids[-1]])
        seen.append((ranking.ids, ranking.log_scores.round(12).tolist()))
    return seen


def _rows(roles: Roles, namespace: str) -> dict[str, int]:
    """How many rows of each namespace table hold ``namespace`` (read as the superuser)."""
    s = roles.schema
    with psycopg.connect(roles.admin) as conn:
        return {t: conn.execute(
            f"SELECT count(*) FROM {s}.{t} WHERE {'name' if t == 'namespaces' else 'ns'} = "
            f"{'%s' if t == 'namespaces' else f'(SELECT id FROM {s}.namespaces WHERE name = %s)'}",
            (namespace,)).fetchone()[0] for t in OWN_TABLES}


def test_migrate_puts_forced_row_level_security_on_the_namespace_tables_only(roles):
    with psycopg.connect(roles.admin) as conn:
        flags = dict((r[0], (r[1], r[2])) for r in conn.execute(
            "SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity FROM pg_class c JOIN "
            "pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
            (roles.schema,)))
    assert {t: flags[t] for t in OWN_TABLES} == {t: (True, True) for t in OWN_TABLES}
    assert flags["features"] == flags["meta"] == (False, False)


def test_a_granted_role_ranks_and_learns_for_its_namespaces(roles):
    with Reranker(roles.url(roles.a)) as rr:
        _learn(rr, "user:a", A_DOCS)
        _learn(rr, "team:a:1", A_DOCS, rounds=1)
        assert rr.state.namespaces() == ["team:a:1", "user:a"]
        assert rr.stats()["feedbacks"] == 4
        assert rr.links("user:a")
    assert _rows(roles, "user:a")["links"] > 0


def test_another_namespace_is_a_state_error_naming_only_the_callers_request(roles):
    with Reranker(roles.url(roles.b)) as rr_b:
        b_recall = rr_b.rerank("Budget?", B_DOCS, namespace="user:b", k=3, now=NOW).recall_id
        _learn(rr_b, "user:b", B_DOCS)
    b_rows = _rows(roles, "user:b")
    state = open_state(roles.url(roles.a))
    try:
        calls = [lambda: state.read("user:b", ["w:budget"], ["SECRETB0"]),
                 lambda: state.list_links("user:b"), lambda: state.iter_docs("user:b"),
                 lambda: list(state.feedback_log("user:b")), lambda: state.list_edges("user:b"),
                 lambda: state.forget_namespace("user:b"),
                 lambda: state.read("team:ab:1", [], [])]  # a prefix is not a substring
        for call in calls:
            with pytest.raises(StateError, match=f"role '{roles.a}' is not granted namespace") as e:
                call()
            assert "SECRETB" not in str(e.value) and roles.b not in str(e.value)
        assert state.get_impression(b_recall) is None  # B's impression is not A's to read
        rr_a = Reranker(state)
        with pytest.raises(FeedbackError):
            rr_a.feedback(b_recall, used=["SECRETB0"])
        degraded = rr_a.rerank("Budget?", B_DOCS, namespace="user:b", k=3, now=NOW)
        assert all("state failed" in item.explain() for item in degraded.items)
        with pytest.raises(StateError, match="not granted namespace 'user:b'"):
            Reranker(state, strict=True).rerank("Budget?", B_DOCS, namespace="user:b", now=NOW)
        assert state.stats()["namespaces"] == 0 and list(state.feedback_log()) == []
    finally:
        state.close()
    assert _rows(roles, "user:b") == b_rows  # untouched by A's forget
    assert b_rows["links"] > 0 and b_rows["impressions"] == 4


def test_hand_written_sql_of_a_role_reaches_no_other_namespace(roles):
    with Reranker(roles.url(roles.b)) as rr_b:
        _learn(rr_b, "user:b", B_DOCS)
    with Reranker(roles.url(roles.a)) as rr_a:
        _learn(rr_a, "user:a", A_DOCS)
    b_rows = _rows(roles, "user:b")
    s = roles.schema
    with psycopg.connect(roles.admin) as conn:
        b_id = conn.execute(f"SELECT id FROM {s}.namespaces WHERE name = 'user:b'").fetchone()[0]
    with psycopg.connect(roles.url(roles.a).split("?")[0], autocommit=True) as conn:
        assert [r[0] for r in conn.execute(f"SELECT name FROM {s}.namespaces")] == ["user:a"]
        for table in OWN_TABLES[1:]:
            assert conn.execute(f"SELECT count(*) FROM {s}.{table} WHERE ns = %s",
                                (b_id,)).fetchone()[0] == 0
        assert conn.execute(f"UPDATE {s}.docs SET use_count = 99 WHERE ns = %s",
                            (b_id,)).rowcount == 0
        assert conn.execute(f"DELETE FROM {s}.links WHERE ns = %s", (b_id,)).rowcount == 0
        assert conn.execute(f"UPDATE {s}.namespaces SET name = 'user:a2' WHERE name = "
                            f"'user:b'").rowcount == 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            conn.execute(f"INSERT INTO {s}.docs VALUES (%s, 'planted', 0, 1)", (b_id,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            conn.execute(f"INSERT INTO {s}.namespaces (name) VALUES ('user:c')")
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            conn.execute(f"UPDATE {s}.docs SET ns = %s", (b_id,))
        assert conn.execute(f"SELECT role, namespace FROM {s}.grants ORDER BY namespace"
                            ).fetchall() == [(roles.a, "team:a:"), (roles.a, "user:a")]
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(f"INSERT INTO {s}.grants VALUES (%s, 'user:b', false)", (roles.a,))
    assert _rows(roles, "user:b") == b_rows and b_rows["docs"] > 0


def test_rankings_and_counts_are_the_same_with_row_level_security_on_and_off(roles,
                                                                             postgres_url):
    plain = f"hrtest_{uuid.uuid4().hex[:12]}"
    try:
        with Reranker(state_url(postgres_url, plain)) as rr_plain:
            expected = _learn(rr_plain, "user:b", B_DOCS, 2) + _learn(rr_plain, "user:a", A_DOCS)
            pooled = rr_plain.state.list_links(None)
            own = rr_plain.state.list_links("user:a")
        with Reranker(roles.url(roles.b)) as rr_b, Reranker(roles.url(roles.a)) as rr_a:
            got = _learn(rr_b, "user:b", B_DOCS, 2) + _learn(rr_a, "user:a", A_DOCS)
            assert got == expected
            assert rr_a.state.list_links("user:a")[0] == own[0]
            np.testing.assert_array_equal(rr_a.state.list_links("user:a")[1], own[1])
            pooled_a = rr_a.state.list_links(None)  # B's feedback is in the pool A reads
            assert pooled_a[0] == pooled[0]
            np.testing.assert_array_equal(pooled_a[1], pooled[1])
            np.testing.assert_array_equal(pooled_a[2], pooled[2])
    finally:
        drop_schema(postgres_url, plain)


def test_the_owner_forgets_every_row_and_a_revoked_role_loses_its_namespace(roles):
    with Reranker(roles.url(roles.a)) as rr_a:
        _learn(rr_a, "user:a", A_DOCS)
    owner = open_state(roles.url(roles.owner))
    try:
        assert owner.namespaces() == ["user:a"]
        owner.forget_namespace("user:a")
    finally:
        owner.close()
    assert set(_rows(roles, "user:a").values()) == {0}
    assert main(["state", "revoke", roles.url(roles.owner), roles.a, "user:a"]) == 0
    state = open_state(roles.url(roles.a))
    try:
        with pytest.raises(StateError, match="not granted namespace 'user:a'"):
            state.read("user:a", [], ["a0"])
        assert state.read("team:a:9", [], ["a0"])[1].use_count.tolist() == [0.0]
    finally:
        state.close()
    assert main(["state", "revoke", roles.url(roles.owner), roles.b, "user:b"]) == 0
    with psycopg.connect(roles.url(roles.b).split("?")[0]) as conn:  # its last: no rights left
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(f"SELECT count(*) FROM {roles.schema}.features")


def test_only_the_owner_turns_it_on_and_a_state_url_refuses_the_option(roles, capsys, tmp_path):
    assert main(["state", "migrate", f"{roles.url(roles.a)}&rls=off"]) == 2
    assert "only the owner" in capsys.readouterr().err
    assert main(["state", "grant", f"sqlite:///{tmp_path / 's.db'}", roles.a, "user:a"]) == 2
    assert "a PostgreSQL URL is needed" in capsys.readouterr().err
    assert main(["state", "grant", roles.url(roles.owner), roles.a, "*"]) == 2
    assert "NAMESPACE" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="rls="):
        open_state(f"{roles.url(roles.a)}&rls=on")
    assert main(["state", "migrate", f"{roles.url(roles.owner)}&rls=off", "--json"]) == 0
    assert '"rls": 0' in capsys.readouterr().out
    with Reranker(roles.url(roles.a)) as rr_a:  # off: the table rights alone, every namespace
        assert _learn(rr_a, "user:b", B_DOCS, 1)
    assert main(["state", "grant", roles.url(roles.owner), roles.a, "user:b"]) == 2
    assert "row-level security is off" in capsys.readouterr().err
