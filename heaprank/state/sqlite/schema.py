"""The SQLite state's schema: its tables, the check that a file is heaprank's and of a schema
this version reads, and the migrations from older schemas (each one transaction)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from ...errors import StateCorruptError, StateError

SCHEMA_VERSION = 3
APPLICATION = "heaprank"

#: Co-use edges (schema 3): one row per edge, ``a < b``, found from either document.
_EDGES_SCHEMA = """
CREATE TABLE edges (ns INTEGER NOT NULL, a TEXT NOT NULL, b TEXT NOT NULL, strength REAL NOT NULL,
    count REAL NOT NULL, last REAL NOT NULL, PRIMARY KEY (ns, a, b)) WITHOUT ROWID;
CREATE INDEX edges_b ON edges (ns, b)
"""

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE namespaces (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE);
CREATE TABLE features (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,
    pos REAL NOT NULL DEFAULT 0, neg REAL NOT NULL DEFAULT 0, nscount INTEGER NOT NULL DEFAULT 0);
CREATE TABLE links (
    ns INTEGER NOT NULL, fid INTEGER NOT NULL, pos REAL NOT NULL, neg REAL NOT NULL,
    PRIMARY KEY (ns, fid)) WITHOUT ROWID;
CREATE TABLE docs (
    ns INTEGER NOT NULL, id TEXT NOT NULL, last_used REAL NOT NULL, use_count REAL NOT NULL,
    PRIMARY KEY (ns, id)) WITHOUT ROWID;
CREATE TABLE impressions (key INTEGER PRIMARY KEY, ns INTEGER NOT NULL, fed INTEGER NOT NULL,
    body BLOB NOT NULL);
CREATE TABLE feedback_ids (ns INTEGER NOT NULL, fid TEXT NOT NULL, key INTEGER NOT NULL,
    PRIMARY KEY (ns, fid)) WITHOUT ROWID;
""" + _EDGES_SCHEMA


def read_meta(conn: sqlite3.Connection, path: str) -> dict[str, str] | None:
    """The meta table of a heaprank file (None: an empty file); another application's file is
    refused."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not tables:
        return None
    if "meta" not in tables:
        raise StateError(f"{path!r} is a SQLite file of another application (it has no "
                         f"heaprank meta table); refusing to use or alter it")
    try:
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    except sqlite3.OperationalError:  # a meta table of another shape
        raise StateError(f"{path!r} is a SQLite file of another application (its meta table is "
                         f"not heaprank's); refusing to use or alter it") from None
    if meta.get("application") != APPLICATION and not _schema_1(tables, meta):
        raise StateError(f"{path!r} is a SQLite file of another application (its meta table "
                         f"names no heaprank application); refusing to use or alter it")
    if "schema_version" not in meta:
        raise StateError(f"{path!r} is a SQLite file of another application; refusing "
                         f"to use or alter it")
    return meta


#: The tables of a schema-1 file, the only heaprank files written without an application row.
_SCHEMA_1_TABLES = frozenset({"meta", "links", "global_links", "docs", "impressions",
                              "resolutions"})


def _schema_1(tables: set[str], meta: dict[str, str]) -> bool:
    """Whether a file without the application marker is a schema-1 heaprank state (which
    wrote none): exactly its tables, and schema version 1."""
    own = {t for t in tables if not t.startswith("sqlite_")}  # (SQLite's own: sqlite_sequence)
    return meta.get("schema_version") == "1" and "application" not in meta \
        and own == _SCHEMA_1_TABLES

def check_schema(conn: sqlite3.Connection, path: str, read_only: bool) -> None:
    """Create the schema of an empty file, migrate an older one, refuse a newer one."""
    meta = read_meta(conn, path)
    if meta is None:
        if read_only:
            raise StateError(f"SQLite state {path!r} is empty")
        _create(conn)
        return
    for key in ("schema_version", "feedbacks"):
        try:
            int(meta.get(key, "0"))
        except ValueError:
            raise StateCorruptError(f"SQLite state {path!r}: meta.{key} holds "
                                    f"{meta[key][:40]!r}, not a number; the file was damaged "
                                    f"or edited by hand") from None
    version = int(meta["schema_version"])
    if version > SCHEMA_VERSION:
        raise StateError(f"SQLite state {path!r} has schema {version}, newer than this "
                         f"heaprank ({SCHEMA_VERSION}); upgrade heaprank")
    if version < SCHEMA_VERSION:
        if read_only:
            raise StateError(f"SQLite state {path!r} has schema {version}; open it "
                             f"writable once to migrate it to {SCHEMA_VERSION}")
        _migrate_from_1(conn)
        _migrate_from_2(conn)

@contextmanager
def _schema_change(conn: sqlite3.Connection) -> Iterator[int | None]:
    """One ``BEGIN IMMEDIATE`` transaction around a schema change, yielding the schema
    version as it stands inside it (None for an empty file); rolled back on any error."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        row = None
        if conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0]:
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        yield None if row is None else int(row[0])
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:  # (SQLite may have rolled back already)
            conn.execute("ROLLBACK")
        raise

def _create(conn: sqlite3.Connection) -> None:
    with _schema_change(conn) as version:
        if version is None:
            for statement in _SCHEMA.split(";"):
                conn.execute(statement)
            conn.executemany("INSERT INTO meta VALUES (?, ?)", [
                ("application", APPLICATION), ("schema_version", str(SCHEMA_VERSION)),
                ("feedbacks", "0")])

def _migrate_from_1(conn: sqlite3.Connection) -> None:
    """Schema 1 (names repeated in every row, JSON impressions) to the current one. Links,
    the pool and document use are kept; old impressions are dropped (feedback for them
    reports an unknown recall)."""
    with _schema_change(conn) as version:
        if version == 1:
            for old in ("links", "global_links", "docs", "impressions", "resolutions"):
                conn.execute(f"ALTER TABLE {old} RENAME TO v1_{old}")
            conn.execute("DROP INDEX IF EXISTS impressions_ns")
            for statement in _SCHEMA.split(";")[1:]:
                conn.execute(statement)
            conn.execute("INSERT INTO namespaces (name) SELECT namespace FROM v1_links "
                         "UNION SELECT namespace FROM v1_docs WHERE use_count > 0")
            conn.execute("INSERT INTO features (name, pos, neg, nscount) SELECT g.feature, "
                         "g.pos, g.neg, (SELECT COUNT(*) FROM v1_links l WHERE l.feature = "
                         "g.feature) FROM v1_global_links g")
            conn.execute("INSERT INTO links SELECT n.id, f.id, l.pos, l.neg FROM v1_links l "
                         "JOIN namespaces n ON n.name = l.namespace "
                         "JOIN features f ON f.name = l.feature")
            conn.execute("INSERT INTO docs SELECT n.id, d.id, d.last_used, d.use_count "
                         "FROM v1_docs d JOIN namespaces n ON n.name = d.namespace "
                         "WHERE d.use_count > 0 AND d.last_used IS NOT NULL")
            for old in ("links", "global_links", "docs", "impressions", "resolutions"):
                conn.execute(f"DROP TABLE v1_{old}")
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('application', ?)", (APPLICATION,))
            conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                         (str(SCHEMA_VERSION),))

def _migrate_from_2(conn: sqlite3.Connection) -> None:
    """Schema 2 to 3: the co-use edges table, empty. Nothing else changes; an older heaprank
    then refuses the file, as it would not forget a namespace's edges."""
    with _schema_change(conn) as version:
        if version == 2:
            for statement in _EDGES_SCHEMA.split(";"):
                conn.execute(statement)
            conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                         (str(SCHEMA_VERSION),))
