"""Co-use edges in the SQLite state: one row per edge, ``a < b``, found from either document.
A namespace's edges carry a version (``meta`` row ``edges:<namespace id>``, absent: 0): a
feedback's change is written only while they are still at the version it was worked out from,
inside the feedback's own transaction."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from ...model import co_use
from ...records import EdgeChange, EdgeState
from .writes import json_array

#: The edges among some documents of a namespace (``{ns}``: how the namespace is found).
READ_EDGES = ("SELECT a, b, strength, count, last FROM edges WHERE ns = {ns} "
              "AND a IN (SELECT value FROM json_each(?)) AND b IN (SELECT value FROM json_each(?))")
_AROUND = ("SELECT a, b, strength, count, last FROM edges WHERE ns = ?1 AND (a IN "
           "(SELECT value FROM json_each(?2)) OR b IN (SELECT value FROM json_each(?2)))")


def version_key(ns: int) -> str:
    """The ``meta`` key of a namespace's edge version."""
    return f"edges:{ns}"


def edge_state(conn: sqlite3.Connection, namespace: str, docs: Sequence[str]) -> EdgeState:
    """Every edge of ``docs`` in ``namespace``, the edges' version and their count."""
    row = conn.execute("SELECT id FROM namespaces WHERE name = ?", (namespace,)).fetchone()
    if row is None:
        return EdgeState(0, 0, {})
    ns = row[0]
    adj = co_use.adjacency(conn.execute(_AROUND, (ns, json_array(docs))))
    total = conn.execute("SELECT COUNT(*) FROM edges WHERE ns = ?", (ns,)).fetchone()[0]
    return EdgeState(_version(conn, ns), total, adj)


def write_edges(conn: sqlite3.Connection, ns: int, change: EdgeChange) -> bool:
    """Write a feedback's edge change if the namespace's edges are still at its version (and
    move them to the next one): whether it was written."""
    if _version(conn, ns) != change.version:
        return False
    conn.executemany("DELETE FROM edges WHERE ns = ? AND a = ? AND b = ?",
                     [(ns, a, b) for a, b in change.deleted])
    conn.executemany("INSERT OR REPLACE INTO edges VALUES (?, ?, ?, ?, ?, ?)",
                     [(ns, *row) for row in change.written])
    conn.execute("INSERT INTO meta VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = "
                 "excluded.value", (version_key(ns), str(change.version + 1)))
    return True


def _version(conn: sqlite3.Connection, ns: int) -> int:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (version_key(ns),)).fetchone()
    return 0 if row is None else int(row[0])
