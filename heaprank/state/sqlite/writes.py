"""The link and document writes of one SQLite feedback transaction, held until its commit.

A group commit (``SQLiteState.apply_feedback_many``) applies several feedbacks in one write
transaction, and their feedbacks mostly credit the same few dozen shape features. Writing each
feedback's increments as it goes rewrites the same link and feature rows once per feedback;
holding the running counts here instead reads each row once per transaction, updates it in
Python, and writes it once, just before the commit.

The numbers are the same to the last bit: each count is updated by the same float additions, in
the same order, as the per-feedback ``pos = pos + ?`` statements would make (the transaction
holds the write lock, so nobody else changes the rows in between), and the final values are
written as they are. A feedback's changes join the held counts only once it has succeeded: a
feedback rolled back to its savepoint leaves them as they were.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...records import FeedbackBatch, LinkCounts
from ..base import LAST_USED_SKEW_S, OWN_PREFIX, CreditFn
from .failures import numbers

#: A feature's row in the transaction: ``(id, global pos, global neg, namespaces gained)``,
#: the parameters of its write as they are.
FeatureRow = tuple[int, float, float, int]
#: A link's row in the transaction, ``(ns, feature id, pos, neg)``: its write's parameters.
LinkRow = tuple[int, int, float, float]

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


class TransactionWrites:
    """The counts one write transaction has changed, not yet written (see the module doc)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        # Every row held has been credited (so is written at the end); a link held has a row.
        self._features: dict[str, FeatureRow] = {}
        self._links: dict[tuple[int, int], LinkRow] = {}
        self._docs: list[tuple[int, str, float]] = []
        self._pending: tuple[dict[str, FeatureRow], dict[tuple[int, int], LinkRow],
                             list[tuple[int, str, float]]] | None = None

    def _rows(self, ns: int, names: list[str]) -> tuple[dict[str, FeatureRow],
                                                         dict[str, tuple[float, float] | None]]:
        """Each name's feature row and its link's ``(pos, neg)`` in ``ns`` (None: no row yet),
        as this transaction has them: held ones from here, the others read (names never
        credited anywhere get their rows first). What is read joins the held rows only through
        :meth:`commit_feedback`."""
        features: dict[str, FeatureRow] = {}
        links: dict[str, tuple[float, float] | None] = {}
        held_features, held_links = self._features, self._links
        if not held_features:  # the transaction's first feedback: read them all
            missing = names
        else:
            missing = []
            for name in names:
                row = held_features.get(name)
                link = None if row is None else held_links.get((ns, row[0]))
                if row is None or link is None:
                    missing.append(name)
                else:
                    features[name], links[name] = row, (link[2], link[3])
        if missing:
            conn, listed = self._conn, json_array(missing)
            found = conn.execute(_FEATURE_ROWS, (listed, ns)).fetchall()
            if len(found) < len(missing):
                known = {missing[at] for at, *_ in found}
                conn.executemany("INSERT INTO features (name) VALUES (?)",
                                 [(f,) for f in missing if f not in known])
                found = conn.execute(_FEATURE_ROWS, (listed, ns)).fetchall()
            for at, fid, gpos, gneg, pos, neg in found:
                numbers("features.pos/neg or links.pos/neg",
                        (gpos, gneg) if pos is None else (gpos, gneg, pos, neg))
                name = missing[at]
                row = held_features.get(name)  # newer than the table's copy when held
                features[name] = (fid, gpos, gneg, 0) if row is None else row
                links[name] = None if pos is None else (pos, neg)
        return features, links

    def apply(self, ns: int, batch: FeedbackBatch, todo: Sequence[Any], credit: CreditFn) -> None:
        """One feedback's credit on the held counts (held only once :meth:`commit_feedback`
        takes it)."""
        wanted = sorted({f for item in todo for f in item.features})
        features, links = self._rows(ns, wanted)

        def read(names: Sequence[str]) -> LinkCounts:
            counts = []
            for name in names:
                link, feature = links[name], features[name]
                own = (0.0, 0.0) if link is None else link
                counts.append((own[0], own[1], feature[1], feature[2]))
            arr = np.array(counts, dtype=np.float64).reshape(-1, 4)
            return LinkCounts(arr[:, 0].copy(), arr[:, 1].copy(), arr[:, 2].copy(),
                              arr[:, 3].copy())

        names, dpos, dneg = credit(read, todo)
        new_features: dict[str, FeatureRow] = {}
        new_links: dict[tuple[int, int], LinkRow] = {}
        for name, p, n in zip(names, dpos.tolist(), dneg.tolist()):
            fid, gpos, gneg, gained = features[name]
            link = links[name]
            # What `pos = pos + ?` would store; an absent row is inserted with the increment.
            if link is None:
                new_links[(ns, fid)] = (ns, fid, p, n)
                gained += 1
            else:
                new_links[(ns, fid)] = (ns, fid, link[0] + p, link[1] + n)
            # (a document's feature stays the namespace's: its pooled counts are never written)
            new_features[name] = (fid, gpos, gneg, gained) if name.startswith(OWN_PREFIX) \
                else (fid, gpos + p, gneg + n, gained)
        self._pending = (new_features, new_links,
                         [(ns, item.id, batch.time) for item in todo if item.used])

    def commit_feedback(self) -> None:
        """The last :meth:`apply` succeeded: its rows become the held counts."""
        if self._pending is not None:
            features, links, used = self._pending
            self._pending = None
            self._features.update(features)
            self._links.update(links)
            self._docs.extend(used)

    def drop_feedback(self) -> None:
        """The last :meth:`apply` was rolled back: forget its rows (its new feature ids too)."""
        self._pending = None

    def write(self) -> None:
        """Write the held counts, each row once, at the end of the transaction (the object is
        done with then)."""
        conn = self._conn
        if self._links:
            conn.executemany(_WRITE_LINK, self._links.values())
        if self._features:
            conn.executemany(_WRITE_FEATURE, self._features.values())
        if self._docs:
            conn.executemany(_WRITE_DOC, self._docs)
        self._features, self._links, self._docs = {}, {}, []
