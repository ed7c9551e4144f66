"""Co-use edges in a PostgreSQL state: a feedback's edge change, written under the namespace's
edge version."""

from __future__ import annotations

from typing import Any

from ...records import EdgeChange

WRITE_EDGE = ("INSERT INTO edges (ns, a, b, strength, count, last) VALUES (%s, %s, %s, %s, %s, %s) "
               "ON CONFLICT (ns, a, b) DO UPDATE SET strength = excluded.strength, "
               "count = excluded.count, last = excluded.last")


def write_edges(conn: Any, ns: int, change: EdgeChange) -> bool:
    """Write a feedback's edge change if the namespace's edges are still at its version (and
    move them to the next one): whether it was written. The namespace's row is locked."""
    version = conn.execute("SELECT edges_version FROM namespaces WHERE id = %s",
                           (ns,)).fetchone()[0]
    if version != change.version:
        return False
    if change.deleted:
        conn.cursor().executemany("DELETE FROM edges WHERE ns = %s AND a = %s AND b = %s",
                                  [(ns, a, b) for a, b in change.deleted])
    if change.written:
        conn.cursor().executemany(WRITE_EDGE, [(ns, *row) for row in change.written])
    conn.execute("UPDATE namespaces SET edges_version = %s WHERE id = %s",
                 (change.version + 1, ns))
    return True
