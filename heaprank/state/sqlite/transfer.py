"""Copying a whole state into an empty SQLite state (``heaprank state copy``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING

from ...errors import StateError
from ...records import recall_key
from .. import codec

if TYPE_CHECKING:
    from ..copy import StateDump


def import_dump(conn: sqlite3.Connection, dump: StateDump, where: str,
                namespace_id: Callable[[sqlite3.Connection, str], int]) -> None:
    """Write a whole state (from :func:`heaprank.state.copy.export_state`) into the empty
    state of ``conn`` (``where``: its file, for the error), inside the caller's transaction."""
    holders = dump.holders()
    if conn.execute("SELECT (SELECT COUNT(*) FROM features) + "
                    "(SELECT COUNT(*) FROM impressions)").fetchone()[0]:
        raise StateError(f"SQLite state {where!r} is not empty")
    gf, gpos, gneg = dump.global_links
    conn.executemany("INSERT INTO features (name, pos, neg, nscount) VALUES (?, ?, ?, ?)",
                     [(f, p, n, holders.get(f, 0)) for f, p, n in
                      zip(gf, gpos.tolist(), gneg.tolist())])
    conn.executemany("INSERT OR IGNORE INTO features (name, nscount) VALUES (?, ?)",
                     list(holders.items()))
    fid = dict(conn.execute("SELECT name, id FROM features"))
    names = set(dump.links) | set(dump.docs) | set(dump.edges) | {
        ns for _, ns, _ in dump.impressions}
    ns_id = {ns: namespace_id(conn, ns) for ns in sorted(names)}
    for ns, (features, pos, neg) in dump.links.items():
        conn.executemany("INSERT INTO links VALUES (?, ?, ?, ?)", [
            (ns_id[ns], fid[f], p, n) for f, p, n in zip(features, pos.tolist(), neg.tolist())])
    for ns, rows in dump.docs.items():
        conn.executemany("INSERT INTO docs VALUES (?, ?, ?, ?)",
                         [(ns_id[ns], i, last, uses) for i, last, uses in rows])
    for ns, edge_rows in dump.edges.items():
        conn.executemany("INSERT INTO edges VALUES (?, ?, ?, ?, ?, ?)",
                         [(ns_id[ns], *row) for row in edge_rows])
    conn.executemany("INSERT INTO impressions VALUES (?, ?, ?, ?)", [
        (recall_key(rid), ns_id[ns], int(any(codec.verdicts_of(body))), body)
        for rid, ns, body in dump.impressions])
    conn.execute("UPDATE meta SET value = ? WHERE key = 'feedbacks'", (str(dump.feedbacks),))
