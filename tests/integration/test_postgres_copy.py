"""``heaprank state copy`` and ``state migrate`` with PostgreSQL: SQLite -> PostgreSQL -> SQLite
gives back the same state (every layer, document, edge, impression and the feedback count), and
both copies rank alike and keep an impression's feedback going."""

from __future__ import annotations

import psycopg
import pytest

from heaprank import Config, CoUse, Learning, Refit, Reranker, SQLiteState
from heaprank.app.cli import main
from heaprank.state import open_state
from heaprank.state.copy import export_state
from tests.integration.test_redis_copy import CANDIDATES, NOW, PLAN, _teach
from tests.postgres_server import state_url

CONFIG = Config(learning=Learning(co_use=CoUse(max_per_doc=3, max_edges=8)),
                refit=Refit(every=0)).with_weights(association=1.0)


def _dump(url: str) -> dict:
    """Everything ``state copy`` moves, as plain comparable values."""
    state = open_state(url)
    try:
        dump = export_state(state)
    finally:
        state.close()
    return {"global": (dump.global_links[0], dump.global_links[1].tolist(),
                       dump.global_links[2].tolist()),
            "links": {ns: (f, p.tolist(), n.tolist()) for ns, (f, p, n) in dump.links.items()},
            "docs": dump.docs, "edges": dump.edges, "impressions": dump.impressions,
            "feedbacks": dump.feedbacks}


def test_copy_sqlite_to_postgres_and_back_keeps_everything(tmp_path, capsys, postgres_url,
                                                           postgres_schema):
    source = f"sqlite:///{tmp_path / 'source.db'}"
    with Reranker(source, config=CONFIG) as rr:
        waiting = _teach(rr)
    middle = state_url(postgres_url, postgres_schema)
    back = f"sqlite:///{tmp_path / 'back.db'}"
    assert main(["state", "copy", source, middle]) == 0
    assert main(["state", "copy", middle, back]) == 0
    out = capsys.readouterr().out
    assert f"copied {source} -> {middle}" in out and "feedbacks 12" in out
    want = _dump(source)
    assert want["links"] and want["edges"] and want["impressions"]  # not vacuous
    assert _dump(middle) == want
    assert _dump(back) == want
    with Reranker(source, config=CONFIG) as a, Reranker(middle, config=CONFIG) as b:
        for ns in ("maya", "ben", "zoe"):
            for _, query, _ in PLAN:
                ra = a.rerank(query, CANDIDATES, namespace=ns, k=4, now=NOW + 3600, track=False)
                rb = b.rerank(query, CANDIDATES, namespace=ns, k=4, now=NOW + 3600, track=False)
                assert ra.ids == rb.ids
                assert [r.score for r in ra] == [r.score for r in rb]
                assert [r.explain() for r in ra] == [r.explain() for r in rb]
        # the impression waiting in the source takes its feedback in the copy
        assert b.feedback(waiting, used=["lisbon"]).applied == ("lisbon",)
    assert SQLiteState(tmp_path / "back.db").stats()["feedbacks"] == 12


def test_copy_into_a_postgres_state_that_holds_something_is_refused(tmp_path, capsys,
                                                                    postgres_url, postgres_schema):
    source = f"sqlite:///{tmp_path / 'source.db'}"
    target = state_url(postgres_url, postgres_schema)
    with Reranker(source) as rr:
        _teach(rr)
    assert main(["state", "copy", source, target]) == 0
    assert main(["state", "copy", source, target]) == 2
    assert "is not empty" in capsys.readouterr().err


def test_migrate_creates_the_schema_then_checks_it(capsys, postgres_url, postgres_schema):
    url = state_url(postgres_url, postgres_schema)
    assert main(["state", "migrate", url]) == 0
    assert f"created the heaprank schema {postgres_schema} (version 1)" in capsys.readouterr().out
    assert main(["state", "migrate", "--json", url]) == 0
    assert '"created": 0' in capsys.readouterr().out
    with psycopg.connect(postgres_url) as conn:
        tables = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE "
                                             "schemaname = %s", (postgres_schema,))}
    assert {"meta", "links", "impressions"} <= tables


def test_migrate_refuses_a_schema_of_another_application(capsys, postgres_url, postgres_schema):
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {postgres_schema}")
        conn.execute(f"CREATE TABLE {postgres_schema}.invoices (id int)")
    assert main(["state", "migrate", state_url(postgres_url, postgres_schema)]) == 2
    assert "another application" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["stats"], ["links", "--namespace", "*"]])
def test_inspecting_a_missing_postgres_state_creates_nothing(capsys, postgres_url,
                                                             postgres_schema, command):
    url = state_url(postgres_url, postgres_schema)
    assert main([*command, "--state", url]) == 2
    assert "holds no heaprank state" in capsys.readouterr().err
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s",
                            (postgres_schema,)).fetchone()[0] == 0
