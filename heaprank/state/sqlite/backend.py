"""SQLite state: one file, WAL, safe for several processes on one host.

Each feedback is one ``BEGIN IMMEDIATE`` transaction: the credit is computed from the counts read
inside it, so concurrent writers serialise and no update is lost, and a process killed mid-write
leaves the last committed state (SQLite's journal rolls the rest back). A transaction writes each
row it changes once, at its end (:mod:`.writes`), however many feedbacks it groups. Feedback
commits with ``synchronous=FULL`` by default; impressions, which a power cut may cost without
harm, with ``NORMAL`` (no fsync on the rerank path). Deleted rows are overwritten
(``secure_delete``), so forgetting a namespace leaves none of its bytes. The layout (schema 3)
is in :mod:`.schema` and ``docs/design.md``, "State layout".
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Literal

import numpy as np

from ..._time import DAY_S
from ...errors import StateReadOnlyError
from ...model import co_use
from ...model.evidence import DocStats, EdgeRows, LinkCounts
from ...records import EdgeState, Impression, Update, recall_key
from .. import codec
from ..base import paged_log, still_open, with_codes
from .connection import open_connection
from .doc_cache import DocCache
from .edges import READ_EDGES, edge_state, write_edges
from .failures import numbers, state_error
from .forget import forget_rows, truncate_wal
from .reads import LIVE, NS_ID, POOLED, counts_of, doc_stats, link_counts
from .transfer import import_dump
from .writes import Tally, json_array

if TYPE_CHECKING:
    from ..copy import StateDump

_PRUNE_EVERY = 256
#: How long a forget waits for other readers to let go of the write-ahead log it truncates.
SCRUB_WAIT_S = 5.0
logger = logging.getLogger("heaprank")
#: Impressions per page of a feedback log read (:func:`~heaprank.state.base.paged_log`).
_LOG_PAGE = 512
_SYNC_LEVELS = ("OFF", "NORMAL", "FULL", "EXTRA")
_COUNT_NAMESPACE_FEEDBACKS = ("INSERT INTO meta VALUES (?1, CAST(?2 AS TEXT)) ON CONFLICT (key) "
                              "DO UPDATE SET value = CAST(value AS INTEGER) + ?2")

class SQLiteState:
    """Learned state in one SQLite file (``":memory:"`` for a private in-memory database).

    Args:
        path: The database file (``~`` is expanded). Created with its schema when missing; its
            folder must exist. A file of another application is refused, never altered.
        read_only: Open without writing (for inspection: ``links``, ``stats``, ``explain``).
        busy_timeout_s: How long a writer waits for another process's transaction.
        max_impressions: How many impressions with feedback to keep (oldest pruned first).
        impression_ttl_s: Impressions without feedback expire after this long (wall clock).
        max_open_impressions: How many impressions without feedback to keep (oldest pruned
            first), so tracked reranks that never get feedback cannot fill the disk within
            one ``impression_ttl_s``. Both bounds are applied every few hundred writes
            (:meth:`prune`); ``stats()`` shows ``open_impressions`` and this cap.
        synchronous: ``PRAGMA synchronous`` of feedback commits; ``FULL`` survives power loss.

    Raises:
        StateError: the folder is missing, the file belongs to another application, has a newer
            schema, or is unreadable.
    """

    #: It applies a list of updates in one transaction (a group commit; see
    #: :class:`~heaprank.state.capabilities.GroupCommit`).
    group_commit: Literal[True] = True

    def __init__(self, path: str | os.PathLike[str], *, read_only: bool = False,
                 busy_timeout_s: float = 30.0, max_impressions: int = 100_000,
                 impression_ttl_s: float = DAY_S, synchronous: str = "FULL",
                 max_open_impressions: int = 100_000) -> None:
        for name, value in (("max_impressions", max_impressions),
                            ("max_open_impressions", max_open_impressions)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}: must be an int >= 1")
        if not (isinstance(impression_ttl_s, (int, float)) and impression_ttl_s > 0):
            raise ValueError("impression_ttl_s: must be > 0")
        if not isinstance(synchronous, str) or synchronous.upper() not in _SYNC_LEVELS:
            raise ValueError(f"synchronous: expected OFF, NORMAL, FULL or EXTRA, got {synchronous!r}")
        raw = os.fspath(path)
        self.path = raw if raw == ":memory:" else os.path.expanduser(raw)
        self.read_only = read_only
        self.busy_timeout_s = busy_timeout_s
        self.max_impressions = max_impressions
        self.max_open_impressions = max_open_impressions
        self.impression_ttl_s = float(impression_ttl_s)
        self.synchronous = synchronous.upper()
        self._lock = threading.RLock()
        self._pid = -1
        self._conn: sqlite3.Connection | None = None
        self._sync = ""
        self._puts = 0
        self._connections = 0  # connections opened (one more after a fork)
        self._link_writes = 0  # this object's commits that may change link counts
        self._doc_rows = DocCache()  # the docs rows read, while no other connection commits
        self._connect()

    def __repr__(self) -> str:
        return f"SQLiteState({self.path!r}{', read_only=True' if self.read_only else ''})"

    # ------------------------------------------------------------ connection

    def _connect(self) -> sqlite3.Connection:
        # A connection must not cross a fork: reopen in a child process.
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        conn = open_connection(self.path, read_only=self.read_only,
                               busy_timeout_s=self.busy_timeout_s, owner=self)
        self._sync = ""
        self._conn, self._pid = conn, os.getpid()
        self._connections += 1
        return conn

    @property
    def version(self) -> tuple[int, int, int]:
        """Changes whenever the link counts may have changed: a commit by another connection
        (``PRAGMA data_version``, any process) or a feedback or forget through this one. A
        reader may keep what it derived from the counts while the version stands."""
        with self._lock:
            conn = self._connect()
            try:
                changed_elsewhere = conn.execute("PRAGMA data_version").fetchone()[0]
            except sqlite3.DatabaseError as exc:
                raise state_error(self.path, exc) from None
            return self._connections, int(changed_elsewhere), self._link_writes

    def _set_sync(self, conn: sqlite3.Connection, level: str) -> None:
        if self._sync != level:
            conn.execute(f"PRAGMA synchronous = {level}")
            self._sync = level

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self._connect()
            try:
                conn.execute("BEGIN")
                try:
                    yield conn
                finally:
                    if conn.in_transaction:  # (a failed statement may have ended it)
                        conn.execute("COMMIT")
            except sqlite3.DatabaseError as exc:
                raise state_error(self.path, exc) from None

    @contextmanager
    def _read_alone(self) -> Iterator[sqlite3.Connection]:
        """The connection for one statement read to its end (``fetchall``): on its own it reads
        from one snapshot, so it needs no BEGIN / COMMIT round trips around it."""
        with self._lock:
            conn = self._connect()
            try:
                yield conn
            except sqlite3.DatabaseError as exc:
                raise state_error(self.path, exc) from None

    @contextmanager
    def _write(self, sync: str | None = None) -> Iterator[sqlite3.Connection]:
        if self.read_only:
            raise StateReadOnlyError(f"SQLite state {self.path!r} is open read-only")
        with self._lock:
            conn = self._connect()
            try:
                self._set_sync(conn, sync or self.synchronous)
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.DatabaseError as exc:
                raise state_error(self.path, exc) from None
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException as exc:
                # SQLite has rolled back already after some failures (a full disk): a ROLLBACK
                # then fails, and would hide the failure that matters.
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.DatabaseError):
                    raise state_error(self.path, exc) from None
                raise

    @staticmethod
    def _ns_id(conn: sqlite3.Connection, namespace: str) -> int:
        row = conn.execute("INSERT INTO namespaces (name) VALUES (?) ON CONFLICT (name) DO UPDATE "
                           "SET name = excluded.name RETURNING id", (namespace,)).fetchone()
        return int(row[0])

    # ------------------------------------------------------------------ reads

    def read_links(self, namespace: str, features: Sequence[str]) -> LinkCounts:
        with self._read() as conn:
            return link_counts(conn, namespace, features)

    def read_docs(self, namespace: str, ids: Sequence[str]) -> DocStats:
        """The documents' stats, from the rows kept since this connection last saw another
        one commit where they are all there (:mod:`heaprank.state.sqlite.doc_cache`), else read."""
        with self._read_alone() as conn:
            key = (self._connections, conn.execute("PRAGMA data_version").fetchone()[0])
            kept = self._doc_rows.get(key, namespace, ids)
            if kept is not None:
                return kept
            # Read after the version: a commit in between is newer than the key, and the next
            # read sees its version change and starts again, so nothing kept is ever stale.
            docs = doc_stats(conn, namespace, ids)
            self._doc_rows.put(key, namespace, ids, docs)
            return docs

    def read(self, namespace: str, features: Sequence[str],
             ids: Sequence[str]) -> tuple[LinkCounts, DocStats]:
        with self._read() as conn:
            return link_counts(conn, namespace, features), doc_stats(conn, namespace, ids)

    def read_with_edges(self, namespace: str, features: Sequence[str],
                        ids: Sequence[str]) -> tuple[LinkCounts, DocStats, EdgeRows]:
        with self._read() as conn:
            where = json_array(ids)
            found = conn.execute(READ_EDGES.format(ns=NS_ID), (namespace, where, where))
            adj = co_use.adjacency(found)
            return (link_counts(conn, namespace, features), doc_stats(conn, namespace, ids),
                    co_use.among(ids, adj.get))

    def edge_state(self, namespace: str, docs: Sequence[str]) -> EdgeState:
        with self._read() as conn:
            return edge_state(conn, namespace, docs)

    def list_edges(self, namespace: str) -> list[tuple[str, str, float, float, float]]:
        with self._read() as conn:
            return [tuple(r) for r in conn.execute(  # type: ignore[misc]
                f"SELECT a, b, strength, count, last FROM edges WHERE ns = {NS_ID} "
                f"ORDER BY a, b", (namespace,))]

    # ------------------------------------------------------------- impressions

    def put_impression(self, impression: Impression, *, feedback_id: str | None = None) -> str | None:
        key = recall_key(impression.recall_id)
        if key is None:
            raise ValueError(f"recall_id: {impression.recall_id!r} is not a heaprank recall id")
        body = codec.encode_impression(impression)
        if feedback_id is None and self._put_alone(key, body, impression.namespace):
            return impression.recall_id
        with self._write(sync="NORMAL") as conn:
            ns = self._ns_id(conn, impression.namespace)
            if feedback_id is not None:
                row = conn.execute("SELECT key FROM feedback_ids WHERE ns = ? AND fid = ? AND key IN "
                                   "(SELECT key FROM impressions)", (ns, feedback_id)).fetchone()
                if row is not None:
                    return f"{row[0]:016x}"
            cur = conn.execute("INSERT OR IGNORE INTO impressions (key, ns, fed, body) "
                               "VALUES (?, ?, 0, ?)", (key, ns, body))
            if cur.rowcount == 0:
                return None
            if feedback_id is not None:
                conn.execute("INSERT OR REPLACE INTO feedback_ids VALUES (?, ?, ?)",
                             (ns, feedback_id, key))
            self._count_put(conn)
        return impression.recall_id

    def _put_alone(self, key: int, body: bytes, namespace: str) -> bool:
        """Store an impression of a namespace that exists already (the usual case) in one
        statement, its own transaction: whether it was stored (False: the namespace is new, or
        the key is taken, which the full path in put_impression sorts out).

        A writing statement outside BEGIN takes the write lock as BEGIN IMMEDIATE does (busy
        timeout included) and commits on its own; the namespace's row is only read (the upsert
        of _ns_id would rewrite it, a page more to commit per rerank)."""
        if self.read_only:
            raise StateReadOnlyError(f"SQLite state {self.path!r} is open read-only")
        with self._lock:
            conn = self._connect()
            try:
                self._set_sync(conn, "NORMAL")
                stored = conn.execute("INSERT OR IGNORE INTO impressions (key, ns, fed, body) "
                                      "SELECT ?, id, 0, ? FROM namespaces WHERE name = ?",
                                      (key, body, namespace)).rowcount == 1
            except sqlite3.DatabaseError as exc:
                raise state_error(self.path, exc) from None
            if stored:
                self._puts += 1
                if self._puts % _PRUNE_EVERY == 1:  # as _count_put, in a transaction of its own
                    self.prune()
        return stored

    def _count_put(self, conn: sqlite3.Connection) -> None:
        self._puts += 1
        if self._puts % _PRUNE_EVERY == 1:  # the first write of a connection, then every 256
            self._prune(conn)

    def _prune(self, conn: sqlite3.Connection) -> None:
        cutoff = int((time.time() - self.impression_ttl_s) * 1000) << 20
        conn.execute("DELETE FROM impressions WHERE key < ? AND fed = 0", (cutoff,))
        for fed, cap in ((1, self.max_impressions), (0, self.max_open_impressions)):
            row = conn.execute("SELECT key FROM impressions WHERE fed = ? ORDER BY key DESC "
                               "LIMIT 1 OFFSET ?", (fed, cap)).fetchone()
            if row is not None:
                conn.execute("DELETE FROM impressions WHERE fed = ? AND key <= ?", (fed, row[0]))
        conn.execute("DELETE FROM feedback_ids WHERE key NOT IN (SELECT key FROM impressions)")

    def prune(self) -> None:
        """Expire impressions now (normally done every few hundred writes)."""
        with self._write() as conn:
            self._prune(conn)

    def get_impression(self, recall_id: str) -> Impression | None:
        key = recall_key(recall_id)
        if key is None:
            return None
        with self._read_alone() as conn:
            found = conn.execute("SELECT n.name, i.body FROM impressions i JOIN namespaces n "
                                 "ON n.id = i.ns WHERE i.key = ?", (key,)).fetchall()
        if not found:
            return None
        return codec.decode_impression(recall_id, found[0][0], found[0][1])

    def feedback_log(self, namespace: str | None = None) -> Iterator[Impression]:
        """Impressions with feedback of ``namespace`` (``None``: all), oldest recall first.

        Read in pages of a few hundred, each in its own short read transaction, so a long log
        neither sits in memory at once nor holds the connection while the caller works."""
        where = "" if namespace is None else " AND n.name = ?"
        sql = (f"SELECT i.key, n.name, i.body FROM impressions i JOIN namespaces n ON n.id = i.ns "
               f"WHERE i.fed = 1 AND i.key > ?{where} ORDER BY i.key LIMIT {_LOG_PAGE}")

        def read_page(after: int) -> list[tuple[int, str, bytes]]:
            with self._read() as conn:
                return conn.execute(sql, (after,) if namespace is None
                                    else (after, namespace)).fetchall()

        return paged_log(read_page, _LOG_PAGE)

    # ---------------------------------------------------------------- feedback

    def apply(self, updates: Sequence[Update]) -> list[bool]:
        """Apply feedback updates (see :meth:`~heaprank.StateBackend.apply`) in ONE
        transaction: one commit, one fsync for the whole list (a group commit). Each update is
        checked on its own (a stale one writes nothing); the rows they change are written once
        each, at the end (:class:`~.writes.Tally`)."""
        with self._write() as conn:
            self._link_writes += 1
            tally, applied = Tally(), Counter[int]()
            done = [self._apply(conn, update, tally, applied) for update in updates]
            tally.write(conn)
            self._count_feedbacks(conn, applied)
        return done

    @staticmethod
    def _count_feedbacks(conn: sqlite3.Connection, applied: Counter[int]) -> None:
        """Count the feedbacks a transaction applied, once at its end: the total
        (``meta.feedbacks``) and each namespace's own (``meta.feedbacks:<namespace id>``, taken
        off the total when the namespace is forgotten); one row per namespace rewritten per
        transaction, not per feedback."""
        if applied:
            conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + ? "
                         "WHERE key = 'feedbacks'", (sum(applied.values()),))
            conn.executemany(_COUNT_NAMESPACE_FEEDBACKS,
                             [(f"feedbacks:{ns}", n) for ns, n in applied.items()])

    def _apply(self, conn: sqlite3.Connection, update: Update, tally: Tally,
               applied: Counter[int]) -> bool:
        key = recall_key(update.recall_id)
        row = None if key is None else conn.execute(
            "SELECT i.ns, i.body FROM impressions i JOIN namespaces n ON n.id = i.ns "
            "WHERE i.key = ? AND n.name = ?", (key, update.namespace)).fetchone()
        if row is None:
            return False
        ns, body = row
        verdicts = codec.verdicts_of(body)
        if not still_open(verdicts, update) or (
                update.edges is not None and not write_edges(conn, ns, update.edges)):
            return False
        tally.add(ns, update)
        self._doc_rows.drop(update.namespace, update.used)
        body = codec.with_verdicts(body, with_codes(verdicts, len(verdicts), update))
        conn.execute("UPDATE impressions SET fed = 1, body = ? WHERE key = ?", (body, key))
        applied[ns] += 1
        return True

    # ------------------------------------------------------------------ audit

    def list_links(self, namespace: str | None) -> tuple[list[str], np.ndarray, np.ndarray]:
        with self._read() as conn:
            if namespace is None:
                data = conn.execute(f"SELECT name, pos, neg FROM features WHERE {POOLED} "
                                    f"ORDER BY name").fetchall()
            else:
                data = conn.execute(f"SELECT f.name, l.pos, l.neg FROM links l JOIN features f "
                                    f"ON f.id = l.fid WHERE l.ns = {NS_ID} ORDER BY f.name",
                                    (namespace,)).fetchall()
        numbers("features.pos/neg" if namespace is None else "links.pos/neg",
                (v for r in data for v in r[1:]))
        arr = np.array([r[1:] for r in data], dtype=np.float64).reshape(-1, 2)
        return [r[0] for r in data], arr[:, 0].copy(), arr[:, 1].copy()

    def namespaces(self) -> list[str]:
        with self._read() as conn:
            return [r[0] for r in conn.execute(f"SELECT name FROM {LIVE} ORDER BY name")]

    def forget_namespace(self, namespace: str, *, scrub_global: bool = True) -> None:
        with self._write() as conn:
            self._link_writes += 1
            self._doc_rows.clear()
            if not forget_rows(conn, namespace, scrub_global=scrub_global):
                return
        self._checkpoint()

    def checkpoint(self) -> None:
        """Fold the write-ahead log into the file and truncate it (what ``forget_namespace``
        does last, so no older page image of the forgotten namespace survives in the log).

        Raises:
            ScrubIncompleteError: other connections kept the log's frames alive for
                ``SCRUB_WAIT_S``.
        """
        self._checkpoint()

    def _checkpoint(self) -> None:
        """Fold the WAL into the file and truncate it, so no older page image survives there.
        A reader holding a snapshot keeps the log's frames alive: the checkpoint waits for the
        readers (at most ``SCRUB_WAIT_S``, SQLite's busy handler), else
        :class:`ScrubIncompleteError`."""
        if self.path == ":memory:":
            return
        with self._lock:
            truncate_wal(self._connect(), self.path, self.busy_timeout_s, SCRUB_WAIT_S)

    def stats(self) -> dict[str, int]:
        with self._read() as conn:
            return {**counts_of(conn), "max_open_impressions": self.max_open_impressions}

    def integrity_check(self) -> str:
        """SQLite's ``PRAGMA integrity_check`` answer (``"ok"`` when the file is sound)."""
        with self._read() as conn:
            return str(conn.execute("PRAGMA integrity_check").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._doc_rows.clear()
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def __enter__(self) -> SQLiteState:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------- export (state copy)

    def iter_docs(self, namespace: str) -> list[tuple[str, float, float]]:
        """``(id, last_used, use_count)`` of each used document of ``namespace``."""
        with self._read() as conn:
            return [(i, last, uses) for i, last, uses in conn.execute(
                f"SELECT id, last_used, use_count FROM docs WHERE ns = {NS_ID} ORDER BY id",
                (namespace,))]

    def iter_impressions(self) -> list[tuple[str, str, bytes]]:
        """``(recall_id, namespace, codec bytes)`` of every stored impression."""
        with self._read() as conn:
            return [(f"{key:016x}", name, bytes(body)) for key, name, body in conn.execute(
                "SELECT i.key, n.name, i.body FROM impressions i JOIN namespaces n "
                "ON n.id = i.ns ORDER BY i.key")]

    def import_state(self, dump: StateDump) -> None:
        """Write a whole state (from :func:`heaprank.state.copy.export_state`) into this empty one."""
        with self._write() as conn:
            self._link_writes += 1
            self._doc_rows.clear()
            import_dump(conn, dump, self.path, self._ns_id)
