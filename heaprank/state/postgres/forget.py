"""Forgetting a namespace in a PostgreSQL state: its rows, and its share of the pool."""

from __future__ import annotations

from typing import Any

#: The tables holding a namespace's own rows (column ``ns``).
_OWN_TABLES = ("links", "docs", "impressions", "feedback_ids", "edges")


def forget_rows(conn: Any, namespace: str, *, scrub_global: bool) -> None:
    """Delete every row of ``namespace`` and, with ``scrub_global``, its share of the pooled
    counts, in the caller's transaction (the feature rows locked in name order first)."""
    row = conn.execute("SELECT id FROM namespaces WHERE name = %s FOR UPDATE",
                       (namespace,)).fetchone()
    if row is None:
        return
    ns = row[0]
    conn.execute("SELECT f.id FROM features f JOIN links l ON l.fid = f.id "
                 "WHERE l.ns = %s ORDER BY f.name FOR UPDATE OF f", (ns,))
    scrub = ("pos = GREATEST(f.pos - l.pos, 0), neg = GREATEST(f.neg - l.neg, 0), "
             if scrub_global else "")
    conn.execute(f"UPDATE features f SET {scrub}nscount = f.nscount - 1 FROM links l "
                 f"WHERE l.ns = %s AND f.id = l.fid", (ns,))
    conn.execute("DELETE FROM features WHERE nscount <= 0")
    for table in _OWN_TABLES:
        conn.execute(f"DELETE FROM {table} WHERE ns = %s", (ns,))
    conn.execute("DELETE FROM namespaces WHERE id = %s", (ns,))
