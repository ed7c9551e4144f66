"""What a PostgreSQL state reads: a rerank's links of both layers and documents' stats in one
statement, the audit's links, the counts of ``stats()``, and the SQL fragments they share."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...model.evidence import DocStats, LinkCounts

NS_ID = "(SELECT id FROM namespaces WHERE name = %(ns)s)"
#: The links of both layers and the documents' stats, in one statement (one round trip): rows
#: tagged 0 (links) and 1 (documents), each with its position in the caller's list.
READ = f"""
SELECT 0, j.ord - 1, f.pos, f.neg, COALESCE(l.pos, 0), COALESCE(l.neg, 0), f.nscount
FROM unnest(%(features)s::text[]) WITH ORDINALITY AS j(name, ord)
JOIN features f ON f.name = j.name
LEFT JOIN links l ON l.ns = {NS_ID} AND l.fid = f.id
UNION ALL
SELECT 1, j.ord - 1, d.last_used, d.use_count, 0, 0, 0
FROM unnest(%(ids)s::text[]) WITH ORDINALITY AS j(id, ord)
JOIN docs d ON d.ns = {NS_ID} AND d.id = j.id
"""
READ_EDGES = (f"SELECT a, b, strength, count, last FROM edges WHERE ns = {NS_ID} "
               f"AND a = ANY(%(ids)s) AND b = ANY(%(ids)s)")
LIVE = ("namespaces n WHERE EXISTS (SELECT 1 FROM links WHERE ns = n.id) "
         "OR EXISTS (SELECT 1 FROM docs WHERE ns = n.id)")
POOLED = "nscount > 0 AND left(name, 4) <> 'doc:'"


def split_rows(rows: Sequence[tuple[Any, ...]], n_features: int,
           n_ids: int) -> tuple[LinkCounts, DocStats]:
    """The tagged rows of ``READ`` as the link counts (a feature never credited has no row:
    all zero), with each feature's holders (``features.nscount``), and the documents' stats
    (never used: NaN, 0)."""
    links = np.zeros((n_features, 5))
    last_used, use_count = np.full(n_ids, math.nan), np.zeros(n_ids)
    for tag, at, a, b, c, d, held in rows:
        if tag == 0:
            links[at] = (a, b, c, d, held)
        else:
            last_used[at], use_count[at] = a, b
    return (LinkCounts(links[:, 2].copy(), links[:, 3].copy(), links[:, 0].copy(),
                       links[:, 1].copy(), links[:, 4].copy()), DocStats(last_used, use_count))


def links_of(conn: Any, namespace: str | None) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Every link's name and counts: the pooled layer's (``None``) or a namespace's own."""
    if namespace is None:
        data = conn.execute(f"SELECT name, pos, neg FROM features WHERE {POOLED} "
                            f"ORDER BY name").fetchall()
    else:
        data = conn.execute(f"SELECT f.name, l.pos, l.neg FROM links l JOIN features f "
                            f"ON f.id = l.fid WHERE l.ns = {NS_ID} ORDER BY f.name",
                            {"ns": namespace}).fetchall()
    arr = np.array([r[1:] for r in data], dtype=np.float64).reshape(-1, 2)
    return [r[0] for r in data], arr[:, 0].copy(), arr[:, 1].copy()


def counts_of(conn: Any) -> dict[str, int]:
    """The state's counts, as ``stats()`` reports them, in one statement."""
    row = conn.execute(
        f"SELECT (SELECT count(*) FROM {LIVE}), (SELECT count(*) FROM links), "
        f"(SELECT count(*) FROM features WHERE {POOLED}), (SELECT count(*) FROM docs), "
        f"(SELECT count(*) FROM impressions), (SELECT value::bigint FROM meta WHERE "
        f"key = 'feedbacks') + (SELECT COALESCE(sum(feedbacks), 0) FROM namespaces), "
        f"(SELECT count(*) FROM impressions WHERE NOT fed)").fetchone()
    keys = ("namespaces", "links", "global_links", "documents", "impressions", "feedbacks",
            "open_impressions")
    return {k: int(v) for k, v in zip(keys, row)}
