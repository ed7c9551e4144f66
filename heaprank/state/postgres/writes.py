"""The writes of one PostgreSQL feedback transaction (each update checked against its
impression, the link and document rows written once at its end), and the pruning of
impressions.

The arithmetic is the SQLite state's (:mod:`heaprank.state.sqlite.writes`): each row is read
once, the updates' increments are added to it in order, and it is written once, so both states
hold the same doubles after the same feedback. What PostgreSQL adds is locking: the feature
rows a transaction changes are locked (``FOR UPDATE``, in name order, so two writers never wait
on each other in a cycle) before they are read, so a concurrent writer of the same features
waits and then reads what this one wrote: no increment is lost.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from ...records import Update, recall_key
from .. import codec
from ..base import LAST_USED_SKEW_S, OWN_PREFIX, still_open, with_codes
from .edges import write_edges

_LOCK_FEATURES = ("SELECT name, id, pos, neg FROM features WHERE name = ANY(%s) ORDER BY name "
                  "FOR UPDATE")
_NEW_FEATURES = ("INSERT INTO features (name) SELECT unnest(%s::text[]) "
                 "ON CONFLICT (name) DO NOTHING")
_LINKS = "SELECT fid, pos, neg FROM links WHERE ns = %s AND fid = ANY(%s)"
_WRITE_LINK = ("INSERT INTO links (ns, fid, pos, neg) VALUES (%s, %s, %s, %s) ON CONFLICT (ns, fid) "
               "DO UPDATE SET pos = excluded.pos, neg = excluded.neg")
_WRITE_FEATURE = "UPDATE features SET pos = %s, neg = %s, nscount = nscount + %s WHERE id = %s"
_WRITE_DOC = ("INSERT INTO docs AS d (ns, id, last_used, use_count) VALUES (%s, %s, %s, 1) "
              "ON CONFLICT (ns, id) DO UPDATE SET use_count = d.use_count + 1, last_used = "
              f"CASE WHEN d.last_used > excluded.last_used + {LAST_USED_SKEW_S!r} "
              "THEN excluded.last_used ELSE GREATEST(d.last_used, excluded.last_used) END")


class Tally:
    """The updates one transaction applies, added to the stored counts at its end."""

    def __init__(self) -> None:
        self._updates: list[tuple[int, Update]] = []

    def add(self, ns: int, update: Update) -> None:
        """Count one applied update in (namespace id ``ns``)."""
        self._updates.append((ns, update))

    def write(self, conn: Any) -> None:
        """Lock the features the updates name, add the increments to the stored rows and
        write each row once (a feature new to a namespace counts one more namespace holding
        it); then the used documents, in (namespace, id) order."""
        if not self._updates:
            return
        held: dict[int, set[str]] = {}
        for ns, update in self._updates:
            held.setdefault(ns, set()).update(update.features)
        stored = _lock_features(conn, sorted(set().union(*held.values())))
        link_rows = {ns: _links(conn, ns, [stored[n][0] for n in names])
                     for ns, names in held.items()}
        features: dict[str, list[float]] = {}  # name -> [id, pooled pos, pooled neg, gained]
        links: dict[tuple[int, str], list[float]] = {}  # (ns, name) -> [pos, neg]
        docs: list[tuple[int, str, float]] = []
        for ns, update in self._updates:
            for name, dpos, dneg in zip(update.features, update.dpos.tolist(),
                                        update.dneg.tolist()):
                fid, gpos, gneg = stored[name]
                feature = features.setdefault(name, [fid, gpos, gneg, 0])
                link = links.get((ns, name))
                if link is None:  # its stored counts (none: a link new to the namespace)
                    old = link_rows[ns].get(fid)
                    feature[3] += old is None
                    link = links[(ns, name)] = list(old) if old else [0.0, 0.0]
                link[0], link[1] = link[0] + dpos, link[1] + dneg
                if not name.startswith(OWN_PREFIX):  # (a document's stays its namespace's)
                    feature[1], feature[2] = feature[1] + dpos, feature[2] + dneg
            docs += [(ns, d, update.time) for d in update.used]
        conn.cursor().executemany(_WRITE_LINK, sorted(
            (ns, features[name][0], pos, neg) for (ns, name), (pos, neg) in links.items()))
        conn.cursor().executemany(_WRITE_FEATURE, [(pos, neg, gained, fid) for fid, pos, neg, gained
                                                   in sorted(features.values())])
        if docs:  # (a stable sort: one document's uses stay in the order they were made)
            conn.cursor().executemany(_WRITE_DOC, sorted(docs, key=lambda d: (d[0], d[1])))


def apply_one(conn: Any, update: Update, ns: int | None, tally: Tally,
              applied: Counter[int]) -> bool:
    """Check one update of a feedback transaction against its impression (locked) and, if it
    still applies, record its verdicts and its edges and count it into ``tally`` and
    ``applied`` (per namespace id ``ns``; None: its namespace has no row): whether it did."""
    key = recall_key(update.recall_id)
    if key is None or ns is None:
        return False
    row = conn.execute("SELECT body FROM impressions WHERE key = %s AND ns = %s FOR UPDATE",
                       (key, ns)).fetchone()
    if row is None:
        return False
    body = bytes(row[0])
    verdicts = codec.verdicts_of(body)
    if not still_open(verdicts, update) or (
            update.edges is not None and not write_edges(conn, ns, update.edges)):
        return False
    tally.add(ns, update)
    body = codec.with_verdicts(body, with_codes(verdicts, len(verdicts), update))
    conn.execute("UPDATE impressions SET fed = true, body = %s WHERE key = %s", (body, key))
    applied[ns] += 1
    return True


def prune_rows(conn: Any, lock: int, cutoff: float, caps: dict[bool, int]) -> None:
    """Expire the impressions without feedback older than ``cutoff`` (wall clock), and keep
    ``caps[fed]`` of each kind, the newest (under the advisory lock ``lock``)."""
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock,))
    conn.execute("DELETE FROM impressions WHERE key < %s AND NOT fed",
                 (int(cutoff * 1000) << 20,))
    for fed, cap in sorted(caps.items()):
        row = conn.execute("SELECT key FROM impressions WHERE fed = %s ORDER BY key DESC "
                           "LIMIT 1 OFFSET %s", (fed, cap)).fetchone()
        if row is not None:
            conn.execute("DELETE FROM impressions WHERE fed = %s AND key <= %s", (fed, row[0]))
    conn.execute("DELETE FROM feedback_ids f WHERE NOT EXISTS "
                 "(SELECT 1 FROM impressions i WHERE i.key = f.key)")


def _lock_features(conn: Any, names: Sequence[str]) -> dict[str, tuple[int, float, float]]:
    """Each name's ``(feature id, pooled pos, pooled neg)``, its row locked; names never seen
    get their rows first."""
    found = {r[0]: tuple(r[1:]) for r in conn.execute(_LOCK_FEATURES, (list(names),))}
    if len(found) < len(names):
        conn.execute(_NEW_FEATURES, ([n for n in names if n not in found],))
        found = {r[0]: tuple(r[1:]) for r in conn.execute(_LOCK_FEATURES, (list(names),))}
    return found  # type: ignore[return-value]


def _links(conn: Any, ns: int, fids: list[int]) -> dict[int, tuple[float, float]]:
    """The stored ``(pos, neg)`` of the namespace's links of ``fids`` (absent: none yet)."""
    return {fid: (pos, neg) for fid, pos, neg in conn.execute(_LINKS, (ns, fids))}
