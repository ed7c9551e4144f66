"""The SQLite state's reads: one statement per rerank for the links of both layers and one for
the documents, and the counts ``stats()`` reports."""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Sequence

import numpy as np

from ...model.evidence import DocStats, LinkCounts
from .failures import not_a_number
from .writes import json_array

NS_ID = "(SELECT id FROM namespaces WHERE name = ?)"
#: The namespaces that hold something (a link or a used document), as ``n``.
LIVE = ("namespaces n WHERE EXISTS (SELECT 1 FROM links WHERE ns = n.id) "
        "OR EXISTS (SELECT 1 FROM docs WHERE ns = n.id)")
#: The features of the pooled layer: held by a namespace, and not a document's (``doc:``
#: features stay in their namespace: their pooled counts are never written).
POOLED = "nscount > 0 AND substr(name, 1, 4) != 'doc:'"
# The hot reads walk the caller's list (json_each) and seek each entry, returning its position
# (``j.key``) rather than its text: no temporary index of the list is built, and the arrays are
# filled by position. CROSS JOIN keeps the list as the outer loop (the planner may not reorder it).
READ_LINKS = (f"SELECT j.key, f.pos, f.neg, IFNULL(l.pos, 0.0), IFNULL(l.neg, 0.0), f.nscount "
               f"FROM json_each(?) AS j CROSS JOIN features AS f LEFT JOIN links AS l "
               f"ON l.ns = {NS_ID} AND l.fid = f.id WHERE f.name = j.value")
READ_DOCS = (f"SELECT j.key, d.last_used, d.use_count FROM json_each(?) AS j CROSS JOIN docs AS d "
              f"WHERE d.ns = {NS_ID} AND d.id = j.value")


def link_counts(conn: sqlite3.Connection, namespace: str, features: Sequence[str]) -> LinkCounts:
    out = np.zeros((len(features), 5))  # a feature never credited has no row: all zero
    found = conn.execute(READ_LINKS, (json_array(features), namespace)).fetchall()
    if found:
        try:
            rows = np.array(found, dtype=np.float64)
        except (ValueError, TypeError):
            raise not_a_number("features.pos/neg/nscount or links.pos/neg") from None
        out[rows[:, 0].astype(np.intp)] = rows[:, 1:]
    return LinkCounts(out[:, 2].copy(), out[:, 3].copy(), out[:, 0].copy(), out[:, 1].copy(),
                      out[:, 4].copy())


def doc_stats(conn: sqlite3.Connection, namespace: str, ids: Sequence[str]) -> DocStats:
    last_used, use_count = np.full(len(ids), math.nan), np.zeros(len(ids))
    found = conn.execute(READ_DOCS, (json_array(ids), namespace)).fetchall()
    try:
        for at, last, uses in found:  # few: only documents used before have a row
            last_used[at], use_count[at] = last, uses
    except (ValueError, TypeError):
        raise not_a_number("docs.last_used or docs.use_count") from None
    return DocStats(last_used, use_count)


def counts_of(conn: sqlite3.Connection) -> dict[str, int]:
    """What ``stats()`` reports: namespaces, links, pooled links, documents, impressions,
    feedbacks, impressions without feedback."""
    def one(sql: str) -> int:
        value = conn.execute(sql).fetchone()[0]
        try:
            return int(value)
        except (ValueError, TypeError):
            raise not_a_number("meta.feedbacks", value) from None

    return {
        "namespaces": one(f"SELECT COUNT(*) FROM {LIVE}"),
        "links": one("SELECT COUNT(*) FROM links"),
        "global_links": one(f"SELECT COUNT(*) FROM features WHERE {POOLED}"),
        "documents": one("SELECT COUNT(*) FROM docs"),
        "impressions": one("SELECT COUNT(*) FROM impressions"),
        "feedbacks": one("SELECT value FROM meta WHERE key = 'feedbacks'"),
        "open_impressions": one("SELECT COUNT(*) FROM impressions WHERE fed = 0"),
    }
