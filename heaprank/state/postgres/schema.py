"""The PostgreSQL state's schema: its tables (in a schema of their own), the check that the
schema is heaprank's and of a version this heaprank reads, and its creation.

A schema is heaprank's when it holds a ``meta`` table whose ``application`` row says so; a
schema holding anything else (another application's tables, or tables heaprank did not create
beside its own) is refused, never altered. Creation is one transaction under an advisory lock,
so processes that start together create it once.

Every text column uses the ``"C"`` collation: names sort by code point, as the other backends
sort them, whatever the database's locale.
"""

from __future__ import annotations

import re
from typing import Any

from ...errors import StateCorruptError, StateError

SCHEMA_VERSION = 1
APPLICATION = "heaprank"
#: A schema name heaprank accepts: a plain lower-case identifier (no quoting needed).
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")

#: The tables of schema version 1, in creation order.
TABLES = ("meta", "namespaces", "features", "links", "docs", "impressions", "feedback_ids",
          "edges")
#: Tables heaprank creates on request: ``grants``, with row-level security (:mod:`.rls`).
OPTIONAL_TABLES = ("grants",)

_DDL = """
CREATE TABLE {s}.meta (key TEXT COLLATE "C" PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE {s}.namespaces (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, name TEXT COLLATE "C" NOT NULL UNIQUE,
    feedbacks BIGINT NOT NULL DEFAULT 0, edges_version BIGINT NOT NULL DEFAULT 0);
CREATE TABLE {s}.features (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, name TEXT COLLATE "C" NOT NULL UNIQUE,
    pos DOUBLE PRECISION NOT NULL DEFAULT 0, neg DOUBLE PRECISION NOT NULL DEFAULT 0,
    nscount INTEGER NOT NULL DEFAULT 0);
CREATE TABLE {s}.links (
    ns BIGINT NOT NULL, fid BIGINT NOT NULL, pos DOUBLE PRECISION NOT NULL,
    neg DOUBLE PRECISION NOT NULL, PRIMARY KEY (ns, fid));
CREATE INDEX links_fid ON {s}.links (fid);
CREATE TABLE {s}.docs (
    ns BIGINT NOT NULL, id TEXT COLLATE "C" NOT NULL, last_used DOUBLE PRECISION NOT NULL,
    use_count DOUBLE PRECISION NOT NULL, PRIMARY KEY (ns, id));
CREATE TABLE {s}.impressions (
    key BIGINT PRIMARY KEY, ns BIGINT NOT NULL, fed BOOLEAN NOT NULL, body BYTEA NOT NULL);
CREATE INDEX impressions_ns ON {s}.impressions (ns, key);
CREATE INDEX impressions_fed ON {s}.impressions (fed, key);
CREATE TABLE {s}.feedback_ids (
    ns BIGINT NOT NULL, fid TEXT COLLATE "C" NOT NULL, key BIGINT NOT NULL,
    PRIMARY KEY (ns, fid));
CREATE TABLE {s}.edges (
    ns BIGINT NOT NULL, a TEXT COLLATE "C" NOT NULL, b TEXT COLLATE "C" NOT NULL,
    strength DOUBLE PRECISION NOT NULL, count DOUBLE PRECISION NOT NULL,
    last DOUBLE PRECISION NOT NULL, PRIMARY KEY (ns, a, b));
CREATE INDEX edges_b ON {s}.edges (ns, b)
"""


def schema_name(name: str) -> str:
    """``name`` if it is a schema name heaprank accepts, else ConfigError."""
    from ...errors import ConfigError

    if not isinstance(name, str) or not _SCHEMA_NAME.fullmatch(name):
        raise ConfigError(f"schema: {name!r} is not a plain lower-case identifier "
                          f"(letters, digits, _; at most 63)")
    return name


def lock_key(schema: str) -> int:
    """The advisory lock key of a schema's creation (and its weights' swaps)."""
    import zlib

    return zlib.crc32(f"heaprank:{schema}".encode()) - 2**31


def _tables(conn: Any, schema: str) -> set[str]:
    rows = conn.execute("SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = "
                        "c.relnamespace WHERE n.nspname = %s AND c.relkind IN "
                        "('r', 'p', 'v', 'm', 'f')", (schema,)).fetchall()
    return {r[0] for r in rows}


def read_meta(conn: Any, schema: str, where: str) -> dict[str, str] | None:
    """The meta rows of a heaprank schema (None: the schema is missing or empty); a schema
    holding tables heaprank did not create is refused."""
    tables = _tables(conn, schema)
    if not tables:
        return None
    if "meta" not in tables:
        raise StateError(f"{where}: schema {schema!r} holds tables of another application (no "
                         f"heaprank meta table); refusing to use or alter it")
    try:
        meta = dict(conn.execute(f"SELECT key, value FROM {schema}.meta").fetchall())
    except Exception:  # a meta table of another shape (the caller's transaction, if any, ends)
        raise StateError(f"{where}: schema {schema!r} holds tables of another application (its "
                         f"meta table is not heaprank's); refusing to use or alter it") from None
    if meta.get("application") != APPLICATION or "schema_version" not in meta:
        raise StateError(f"{where}: schema {schema!r} holds tables of another application (its "
                         f"meta table names no heaprank application); refusing to use or alter it")
    foreign = sorted(tables - set(TABLES) - set(OPTIONAL_TABLES))
    if foreign:
        raise StateError(f"{where}: schema {schema!r} holds tables heaprank did not create "
                         f"({', '.join(foreign[:5])}); refusing to use it (give heaprank a schema "
                         f"of its own: ?schema=...)")
    return meta


def check_schema(conn: Any, schema: str, where: str, *, read_only: bool) -> int:
    """Create the schema when missing or empty, refuse another application's or a newer one;
    returns its version. ``conn`` is in autocommit mode."""
    meta = read_meta(conn, schema, where)
    if meta is None:
        if read_only:
            raise StateError(f"{where}: schema {schema!r} holds no heaprank state")
        return create(conn, schema, where)
    try:
        version = int(meta["schema_version"])
    except ValueError:
        raise StateCorruptError(f"{where}: {schema}.meta.schema_version holds "
                                f"{meta['schema_version'][:40]!r}, not a number") from None
    if version > SCHEMA_VERSION:
        raise StateError(f"{where}: schema {schema!r} has heaprank schema version {version}, "
                         f"newer than this heaprank ({SCHEMA_VERSION}); upgrade heaprank")
    return version


def create(conn: Any, schema: str, where: str) -> int:
    """Create heaprank's tables in ``schema`` (made if missing), in one transaction under an
    advisory lock: a process that waited finds them made and checks them instead."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(schema),))
        if read_meta(conn, schema, where) is None:
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
            for statement in _DDL.format(s=schema).split(";"):
                conn.execute(statement)
            conn.execute(f"INSERT INTO {schema}.meta VALUES ('application', %s), "
                         f"('schema_version', %s), ('feedbacks', '0')",
                         (APPLICATION, str(SCHEMA_VERSION)))
    return SCHEMA_VERSION
