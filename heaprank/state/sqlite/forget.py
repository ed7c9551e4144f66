"""Forgetting a namespace in a SQLite state: its rows, then the write-ahead log's old pages.

A forget deletes the namespace's rows and takes what it added to the pooled layer back out,
in the caller's transaction (:func:`forget_rows`); then :func:`truncate_wal` folds the log
into the file and truncates it, so no older page image of the namespace survives there.
"""

from __future__ import annotations

import sqlite3

from ...errors import ScrubIncompleteError
from .edges import version_key
from .failures import state_error

#: The tables holding a namespace's own rows (column ``ns``).
_OWN_TABLES = ("links", "docs", "impressions", "feedback_ids", "edges")


def forget_rows(conn: sqlite3.Connection, namespace: str, *, scrub_global: bool) -> bool:
    """Delete every row of ``namespace`` and, with ``scrub_global``, its share of the pooled
    counts; False when the state holds nothing of it."""
    row = conn.execute("SELECT id FROM namespaces WHERE name = ?", (namespace,)).fetchone()
    if row is None:
        return False
    ns = row[0]
    scrub = ("pos = MAX(features.pos - l.pos, 0), neg = MAX(features.neg - l.neg, 0), "
             if scrub_global else "")
    conn.execute(f"UPDATE features SET {scrub}nscount = nscount - 1 FROM "
                 f"(SELECT fid, pos, neg FROM links WHERE ns = ?) AS l "
                 f"WHERE features.id = l.fid", (ns,))
    conn.execute("DELETE FROM features WHERE nscount <= 0")
    # its feedbacks leave the total (a file written before they were counted per namespace
    # has no row of them: nothing to take off)
    conn.execute("UPDATE meta SET value = MAX(CAST(value AS INTEGER) - IFNULL((SELECT "
                 "CAST(value AS INTEGER) FROM meta WHERE key = ?1), 0), 0) "
                 "WHERE key = 'feedbacks'", (f"feedbacks:{ns}",))
    conn.execute("DELETE FROM meta WHERE key IN (?, ?)", (f"feedbacks:{ns}", version_key(ns)))
    for table in _OWN_TABLES:
        conn.execute(f"DELETE FROM {table} WHERE ns = ?", (ns,))
    conn.execute("DELETE FROM namespaces WHERE id = ?", (ns,))
    return True


def truncate_wal(conn: sqlite3.Connection, path: str, busy_timeout_s: float,
                 wait_s: float) -> None:
    """Fold the WAL into the file and truncate it. A reader holding a snapshot keeps the log's
    frames alive: wait for the readers (at most ``wait_s``, SQLite's busy handler), else
    :class:`ScrubIncompleteError`."""
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(wait_s * 1000)}")
        try:
            busy, frames, done = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
    except sqlite3.DatabaseError as exc:
        raise state_error(path, exc) from None
    if busy or frames > 0 or frames != done:  # not folded in and truncated
        raise ScrubIncompleteError(
            f"SQLite state {path!r}: the namespace is forgotten, but another connection's "
            f"open read keeps older copies of its pages in the write-ahead log ({path}-wal); "
            f"finish the scrub once the other readers are closed: SQLiteState(path)"
            f".checkpoint(), or sqlite3 FILE 'PRAGMA wal_checkpoint(TRUNCATE)'")
