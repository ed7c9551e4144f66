"""The link and document writes of one SQLite feedback transaction, written once at its end.

A transaction may apply several updates (``feedback_many``: a group commit), and they mostly add
to the same few dozen shape features. Their increments are summed here per row, then each row
is read once, checked, and written once, just before the commit: the rows a group touches cost
one read and one write each, however many feedbacks it holds.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from ...records import Update
from ..base import LAST_USED_SKEW_S, OWN_PREFIX
from .failures import numbers

_FEATURE_ROWS = ("SELECT j.key, f.id, f.pos, f.neg, l.pos, l.neg FROM json_each(?) AS j "
                 "CROSS JOIN features AS f LEFT JOIN links AS l ON l.ns = ? AND l.fid = f.id "
                 "WHERE f.name = j.value")
_WRITE_LINK = ("INSERT INTO links (ns, fid, pos, neg) VALUES (?, ?, ?, ?) ON CONFLICT (ns, fid) "
               "DO UPDATE SET pos = excluded.pos, neg = excluded.neg")
_WRITE_FEATURE = "UPDATE features SET pos = ?2, neg = ?3, nscount = nscount + ?4 WHERE id = ?1"
_WRITE_DOC = ("INSERT INTO docs (ns, id, last_used, use_count) VALUES (?, ?, ?, 1) "
              "ON CONFLICT (ns, id) DO UPDATE SET use_count = use_count + 1, last_used = "
              f"CASE WHEN last_used > excluded.last_used + {LAST_USED_SKEW_S!r} "
              "THEN excluded.last_used ELSE MAX(last_used, excluded.last_used) END")


def json_array(items: Sequence[str]) -> str:
    """A JSON array of strings (for ``json_each``): joined directly when no string needs an
    escape (the usual feature names and ids), through ``json.dumps`` otherwise."""
    joined = '","'.join(items)
    # Only the separators' quotes (two each): no string holds a quote, a backslash or a
    # character JSON would escape.
    if joined.isprintable() and "\\" not in joined \
            and joined.count('"') == 2 * (len(items) - 1):
        return f'["{joined}"]'
    return json.dumps(list(items), ensure_ascii=False)  # (an empty list too: "[]")


class Tally:
    """The updates one transaction applies, added to the stored counts at its end: each row
    read once, the updates' increments added to it in order (the same additions, in the same
    order, as one transaction per update would make), then written once."""

    def __init__(self) -> None:
        self._updates: list[tuple[int, Update]] = []

    def add(self, ns: int, update: Update) -> None:
        """Count one applied update in (namespace id ``ns``)."""
        self._updates.append((ns, update))

    def write(self, conn: sqlite3.Connection) -> None:
        """Add the updates' increments to the stored rows and write each row once (a feature
        new to a namespace counts one more namespace holding it)."""
        names: dict[int, set[str]] = {}
        for ns, update in self._updates:
            names.setdefault(ns, set()).update(update.features)
        rows = {ns: _rows(conn, ns, sorted(held)) for ns, held in names.items()}
        features: dict[str, list[float]] = {}  # name -> [id, pooled pos, pooled neg, gained]
        links: dict[tuple[int, str], list[float]] = {}  # (ns, name) -> [pos, neg]
        docs = []
        for ns, update in self._updates:
            for name, dpos, dneg in zip(update.features, update.dpos.tolist(),
                                        update.dneg.tolist()):
                fid, gpos, gneg, pos, neg = rows[ns][name]
                feature = features.setdefault(name, [fid, gpos, gneg, 0])
                link = links.get((ns, name))
                if link is None:  # its stored counts (none: a link new to the namespace)
                    feature[3] += pos is None
                    link = links[(ns, name)] = [pos or 0.0, neg or 0.0]
                link[0], link[1] = link[0] + dpos, link[1] + dneg
                if not name.startswith(OWN_PREFIX):  # (a document's stays its namespace's)
                    feature[1], feature[2] = feature[1] + dpos, feature[2] + dneg
            docs += [(ns, d, update.time) for d in update.used]
        if links:
            conn.executemany(_WRITE_LINK, [(ns, features[name][0], pos, neg)
                                           for (ns, name), (pos, neg) in links.items()])
            conn.executemany(_WRITE_FEATURE, [tuple(row) for row in features.values()])
        if docs:
            conn.executemany(_WRITE_DOC, docs)


def _rows(conn: sqlite3.Connection, ns: int,
          names: list[str]) -> dict[str, tuple[int, float, float, float | None, float | None]]:
    """Each name's ``(feature id, pooled pos, pooled neg, link pos, link neg)`` in ``ns`` (the
    link's None where the namespace has none yet); names never seen get their feature rows
    first."""
    listed = json_array(names)
    found = conn.execute(_FEATURE_ROWS, (listed, ns)).fetchall()
    if len(found) < len(names):
        known = {names[at] for at, *_ in found}
        conn.executemany("INSERT INTO features (name) VALUES (?)",
                         [(f,) for f in names if f not in known])
        found = conn.execute(_FEATURE_ROWS, (listed, ns)).fetchall()
    out = {}
    for at, fid, gpos, gneg, pos, neg in found:
        numbers("features.pos/neg or links.pos/neg",
                (gpos, gneg) if pos is None else (gpos, gneg, pos, neg))
        out[names[at]] = (fid, gpos, gneg, pos, neg)
    return out
