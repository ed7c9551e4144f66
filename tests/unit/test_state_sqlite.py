"""SQLiteState specifics: the file, its schema version, reopening, and what it refuses."""

from __future__ import annotations

import sqlite3

import pytest

from heaprank import ConfigError, Reranker, SQLiteState, StateError
from heaprank.state import open_state
from heaprank.state.sqlite import SCHEMA_VERSION

NOW = 1_750_000_000.0
CANDS = [{"id": "a", "text": "Flight on Monday", "score": 2.0},
         {"id": "b", "text": "Tea", "score": 1.0}]


def test_file_is_created_in_wal_mode_with_a_schema_version(tmp_path):
    path = tmp_path / "deep" / "dir" / "state.db"
    with SQLiteState(path) as state:
        assert state.integrity_check() == "ok"
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        assert int(version[0]) == SCHEMA_VERSION
    finally:
        conn.close()


def test_a_newer_schema_is_refused(tmp_path):
    path = tmp_path / "future.db"
    SQLiteState(path).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                 (str(SCHEMA_VERSION + 1),))
    conn.commit()
    conn.close()
    with pytest.raises(StateError, match="newer than this heaprank"):
        SQLiteState(path)


def test_a_file_that_is_not_a_database_is_a_state_error(tmp_path):
    path = tmp_path / "garbage.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StateError, match="cannot open SQLite state"):
        SQLiteState(path)


def test_reopening_keeps_everything(tmp_path):
    path = tmp_path / "keep.db"
    with Reranker(SQLiteState(path)) as rr:
        ranking = rr.rerank("When is the flight?", CANDS, namespace="n", k=2, now=NOW)
        rr.feedback(ranking.recall_id, used=["a"])
        links, stats = rr.links("*"), rr.stats()
    with Reranker(SQLiteState(path)) as rr:
        assert rr.links("*") == links and rr.stats() == stats
        assert rr.state.get_impression(ranking.recall_id).resolved == {"a": True, "b": False}


def test_close_is_idempotent_and_the_state_reconnects(tmp_path):
    state = SQLiteState(tmp_path / "x.db")
    state.close()
    state.close()
    assert state.stats()["feedbacks"] == 0  # used again: reconnects lazily
    state.close()


def test_in_memory_database(tmp_path):
    with Reranker(SQLiteState(":memory:")) as rr:
        ranking = rr.rerank("When is the flight?", CANDS, k=2, now=NOW)
        assert rr.feedback(ranking.recall_id, used=["a"]).applied == ("a", "b")


@pytest.mark.parametrize("kwargs, match", [
    ({"max_impressions": 0}, "max_impressions"),
    ({"synchronous": "SOMETIMES"}, "synchronous"),
])
def test_bad_options(tmp_path, kwargs, match):
    with pytest.raises(ValueError, match=match):
        SQLiteState(tmp_path / "bad.db", **kwargs)


@pytest.mark.parametrize("url, match", [
    ("sqlite://", "names no file"),
    ("postgres://x/y", "unknown backend URL"),
])
def test_bad_state_urls(url, match):
    with pytest.raises(ConfigError, match=match):
        open_state(url)


def test_relative_sqlite_url(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    state = open_state("sqlite:///rel.db")
    try:
        assert (tmp_path / "rel.db").exists()
    finally:
        state.close()


def test_the_log_stays_bounded_across_short_lived_connections(tmp_path):
    """A CLI or a worker that opens the file, reranks once and exits must still prune."""
    from heaprank.state.base import Impression

    path = tmp_path / "short.db"
    for i in range(40):
        with SQLiteState(path, max_impressions=10) as state:
            state.put_impression(Impression(
                recall_id=f"r{i}", namespace="n", query="q", qtype="other", time=NOW + i,
                time_explicit=True, ids=("a",), features=(("kind:none",),)))
    with SQLiteState(path, max_impressions=10) as state:
        assert state.stats()["impressions"] < 40
        assert state.get_impression("r0") is None
        assert all(state.get_impression(f"r{i}") is not None for i in range(30, 40))
