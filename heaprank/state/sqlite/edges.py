"""Co-use edges in the SQLite state: one row per edge, ``a < b``, found from either document;
strengthened inside the feedback's own transaction."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

from ...records import FeedbackBatch
from .. import edges
from .writes import json_array

#: The edges among some documents of a namespace (``{ns}``: how the namespace is found).
READ_EDGES = ("SELECT a, b, strength, count, last FROM edges WHERE ns = {ns} "
               "AND a IN (SELECT value FROM json_each(?)) AND b IN (SELECT value FROM json_each(?))")

def adjacency(rows: Iterator[Any]) -> edges.Adjacency:
    """Edge rows ``(a, b, strength, count, last)`` as an adjacency map, each edge's list shared
    by its two documents."""
    adj: edges.Adjacency = {}
    for a, b, strength, count, last in rows:
        row = [strength, count, last]
        adj.setdefault(a, {})[b] = row
        adj.setdefault(b, {})[a] = row
    return adj


def co_use(conn: sqlite3.Connection, ns: int, batch: FeedbackBatch, verdicts: Sequence[int],
            todo: Sequence[Any]) -> None:
    """Strengthen the co-use edges of this feedback, inside its transaction."""
    co_use = batch.co_use
    assert co_use is not None
    pairs = edges.co_use_pairs(batch.shown, verdicts, todo, co_use.max_rank)
    if not pairs:
        return
    docs = json_array(sorted({d for pair in pairs for d in pair}))
    adj = adjacency(conn.execute(
        "SELECT a, b, strength, count, last FROM edges WHERE ns = ? AND (a IN (SELECT value "
        "FROM json_each(?)) OR b IN (SELECT value FROM json_each(?)))", (ns, docs, docs)))
    count = conn.execute("SELECT COUNT(*) FROM edges WHERE ns = ?", (ns,)).fetchone()[0]
    _, written, deleted = edges.update(adj, count, pairs, batch.time, co_use, lambda: adjacency(
        conn.execute("SELECT a, b, strength, count, last FROM edges WHERE ns = ?", (ns,))))
    conn.executemany("DELETE FROM edges WHERE ns = ? AND a = ? AND b = ?",
                     [(ns, a, b) for a, b in sorted(deleted)])
    conn.executemany("INSERT OR REPLACE INTO edges VALUES (?, ?, ?, ?, ?, ?)",
                     [(ns, a, b, *adj[a][b]) for a, b in sorted(written)])
