"""Copying a whole state into an empty PostgreSQL schema (``heaprank state copy``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...errors import StateError
from ...records import recall_key
from .. import codec
from .reads import NS_ID

if TYPE_CHECKING:
    from ..copy import StateDump


def import_dump(conn: Any, dump: StateDump, where: str,
            namespace_id: Callable[[Any, str], int]) -> None:
    """The rows of a whole state, written into the empty schema of ``conn``."""
    if conn.execute("SELECT (SELECT count(*) FROM features) + "
                    "(SELECT count(*) FROM impressions)").fetchone()[0]:
        raise StateError(f"{where} is not empty")
    holders = dump.holders()
    cur = conn.cursor()
    gf, gpos, gneg = dump.global_links
    cur.executemany("INSERT INTO features (name, pos, neg, nscount) VALUES (%s, %s, %s, %s)",
                    [(f, p, n, holders.get(f, 0)) for f, p, n in
                     zip(gf, gpos.tolist(), gneg.tolist())])
    cur.executemany("INSERT INTO features (name, nscount) VALUES (%s, %s) "
                    "ON CONFLICT (name) DO NOTHING", sorted(holders.items()))
    fid = dict(conn.execute("SELECT name, id FROM features").fetchall())
    names = set(dump.links) | set(dump.docs) | set(dump.edges) | {
        ns for _, ns, _ in dump.impressions}
    ns_id = {ns: namespace_id(conn, ns) for ns in sorted(names)}
    for ns, (features, pos, neg) in dump.links.items():
        cur.executemany("INSERT INTO links VALUES (%s, %s, %s, %s)", [
            (ns_id[ns], fid[f], p, n) for f, p, n in zip(features, pos.tolist(), neg.tolist())])
    for ns, rows in dump.docs.items():
        cur.executemany("INSERT INTO docs VALUES (%s, %s, %s, %s)",
                        [(ns_id[ns], i, last, uses) for i, last, uses in rows])
    for ns, edge_rows in dump.edges.items():
        cur.executemany("INSERT INTO edges VALUES (%s, %s, %s, %s, %s, %s)",
                        [(ns_id[ns], *row) for row in edge_rows])
    cur.executemany("INSERT INTO impressions VALUES (%s, %s, %s, %s)", [
        (recall_key(rid), ns_id[ns], any(codec.verdicts_of(body)), body)
        for rid, ns, body in dump.impressions])
    conn.execute("UPDATE meta SET value = %s WHERE key = 'feedbacks'", (str(dump.feedbacks),))


def export_docs(conn: Any, namespace: str) -> list[tuple[str, float, float]]:
    """``(id, last_used, use_count)`` of each used document of ``namespace``."""
    return [(i, last, uses) for i, last, uses in conn.execute(
        f"SELECT id, last_used, use_count FROM docs WHERE ns = {NS_ID} ORDER BY id",
        {"ns": namespace})]


def export_impressions(conn: Any) -> list[tuple[str, str, bytes]]:
    """``(recall_id, namespace, codec bytes)`` of every stored impression."""
    return [(f"{key:016x}", name, bytes(body)) for key, name, body in conn.execute(
        "SELECT i.key, n.name, i.body FROM impressions i JOIN namespaces n "
        "ON n.id = i.ns ORDER BY i.key")]
