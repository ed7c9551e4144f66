"""SQLite state: one file, WAL, safe for several processes on one host.

Each feedback is one ``BEGIN IMMEDIATE`` transaction: the credit is computed from the counts read
inside it, so concurrent writers serialise and no update is lost, and a process killed mid-write
leaves the last committed state (SQLite's journal rolls the rest back).
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from ..errors import StateError
from .base import (
    CreditFn,
    DocStats,
    FeedbackBatch,
    FeedbackOutcome,
    Impression,
    LinkCounts,
    check_resolution,
)

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS links (
    namespace TEXT NOT NULL, feature TEXT NOT NULL,
    pos REAL NOT NULL DEFAULT 0, neg REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (namespace, feature)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS global_links (
    feature TEXT PRIMARY KEY, pos REAL NOT NULL DEFAULT 0, neg REAL NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS docs (
    namespace TEXT NOT NULL, id TEXT NOT NULL, last_used REAL,
    use_count REAL NOT NULL DEFAULT 0, ignore_count REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (namespace, id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS impressions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, recall_id TEXT NOT NULL UNIQUE,
    namespace TEXT NOT NULL, time REAL NOT NULL, payload TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS impressions_ns ON impressions (namespace);
CREATE TABLE IF NOT EXISTS resolutions (
    recall_id TEXT NOT NULL, id TEXT NOT NULL, used INTEGER NOT NULL,
    PRIMARY KEY (recall_id, id)) WITHOUT ROWID;
"""

_CHUNK = 500  # stay well below SQLite's bound-parameter limit


def _chunks(items: Sequence[str]) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start:start + _CHUNK]


class SQLiteState:
    """Learned state in one SQLite file (``":memory:"`` for a private in-memory database).

    Args:
        path: The database file; created with its schema when missing.
        busy_timeout_s: How long a writer waits for another process's transaction.
        max_impressions: How many impressions to keep (oldest pruned first).
        synchronous: SQLite ``PRAGMA synchronous``; ``FULL`` survives power loss too.
    """

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout_s: float = 30.0,
                 max_impressions: int = 1_000_000, synchronous: str = "FULL") -> None:
        if max_impressions < 1:
            raise ValueError("max_impressions: must be >= 1")
        if synchronous.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise ValueError(f"synchronous: expected OFF, NORMAL, FULL or EXTRA, got {synchronous!r}")
        self.path = str(path)
        self.busy_timeout_s = busy_timeout_s
        self.max_impressions = max_impressions
        self.synchronous = synchronous.upper()
        self._lock = threading.RLock()
        self._pid = -1
        self._conn: sqlite3.Connection | None = None
        self._inserts = 0
        self._connect()

    def __repr__(self) -> str:
        return f"SQLiteState({self.path!r})"

    def _connect(self) -> sqlite3.Connection:
        # A connection must not cross a fork: reopen in a child process.
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = sqlite3.connect(self.path, timeout=self.busy_timeout_s, isolation_level=None,
                                   check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
            if self.path != ":memory:":
                conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(f"PRAGMA synchronous = {self.synchronous}")
            self._migrate(conn)
        except sqlite3.DatabaseError as exc:
            raise StateError(f"cannot open SQLite state at {self.path!r}: {exc}") from exc
        self._conn, self._pid = conn, os.getpid()
        return conn

    @staticmethod
    def _migrate(conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if row is None:
                conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
                conn.execute("INSERT INTO meta VALUES ('feedbacks', '0')")
            elif int(row[0]) > SCHEMA_VERSION:
                raise StateError(f"SQLite state has schema {row[0]}, newer than this heaprank "
                                 f"({SCHEMA_VERSION}); upgrade heaprank")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self._connect()
            try:
                yield conn
            except sqlite3.DatabaseError as exc:
                raise StateError(f"SQLite state {self.path!r}: {exc}") from exc

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self._connect()
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.DatabaseError as exc:
                raise StateError(f"SQLite state {self.path!r}: {exc}") from exc
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException as exc:
                conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.DatabaseError):
                    raise StateError(f"SQLite state {self.path!r}: {exc}") from exc
                raise

    @staticmethod
    def _counts(conn: sqlite3.Connection, namespace: str, features: Sequence[str]) -> LinkCounts:
        own: dict[str, tuple[float, float]] = {}
        glob: dict[str, tuple[float, float]] = {}
        for part in _chunks(list(features)):
            marks = ",".join("?" * len(part))
            for f, p, n in conn.execute(
                    f"SELECT feature, pos, neg FROM links WHERE namespace = ? AND feature IN ({marks})",
                    (namespace, *part)):
                own[f] = (p, n)
            for f, p, n in conn.execute(
                    f"SELECT feature, pos, neg FROM global_links WHERE feature IN ({marks})", part):
                glob[f] = (p, n)
        zero = (0.0, 0.0)
        arr = np.array([own.get(f, zero) for f in features], dtype=np.float64).reshape(-1, 2)
        garr = np.array([glob.get(f, zero) for f in features], dtype=np.float64).reshape(-1, 2)
        return LinkCounts(arr[:, 0].copy(), arr[:, 1].copy(), garr[:, 0].copy(), garr[:, 1].copy())

    def read_links(self, namespace: str, features: Sequence[str]) -> LinkCounts:
        with self._read() as conn:
            return self._counts(conn, namespace, features)

    def read_docs(self, namespace: str, ids: Sequence[str]) -> DocStats:
        found: dict[str, tuple[float, float, float]] = {}
        with self._read() as conn:
            for part in _chunks(list(ids)):
                marks = ",".join("?" * len(part))
                for i, last, uses, ignores in conn.execute(
                        f"SELECT id, last_used, use_count, ignore_count FROM docs "
                        f"WHERE namespace = ? AND id IN ({marks})", (namespace, *part)):
                    found[i] = (math.nan if last is None else last, uses, ignores)
        rows = np.array([found.get(i, (math.nan, 0.0, 0.0)) for i in ids],
                        dtype=np.float64).reshape(-1, 3)
        return DocStats(rows[:, 0].copy(), rows[:, 1].copy(), rows[:, 2].copy())

    def put_impression(self, impression: Impression) -> None:
        payload = json.dumps({
            "query": impression.query, "qtype": impression.qtype,
            "time_explicit": impression.time_explicit, "ids": impression.ids,
            "features": impression.features, "signal_names": impression.signal_names,
            "signals": impression.signals,
        }, separators=(",", ":"), ensure_ascii=False)
        with self._write() as conn:
            conn.execute("INSERT OR IGNORE INTO impressions (recall_id, namespace, time, payload) "
                         "VALUES (?, ?, ?, ?)",
                         (impression.recall_id, impression.namespace, impression.time, payload))
            self._inserts += 1
            if self._inserts % 256 == 1:  # first write of a connection, then every 256
                self._prune(conn)

    def _prune(self, conn: sqlite3.Connection) -> None:
        row = conn.execute("SELECT MAX(seq) FROM impressions").fetchone()
        cutoff = (row[0] or 0) - self.max_impressions
        if cutoff > 0:
            conn.execute("DELETE FROM resolutions WHERE recall_id IN "
                         "(SELECT recall_id FROM impressions WHERE seq <= ?)", (cutoff,))
            conn.execute("DELETE FROM impressions WHERE seq <= ?", (cutoff,))

    def get_impression(self, recall_id: str) -> Impression | None:
        with self._read() as conn:
            row = conn.execute("SELECT namespace, time, payload FROM impressions "
                               "WHERE recall_id = ?", (recall_id,)).fetchone()
            if row is None:
                return None
            resolved = {i: bool(u) for i, u in conn.execute(
                "SELECT id, used FROM resolutions WHERE recall_id = ?", (recall_id,))}
        try:
            data = json.loads(row[2])
            return Impression(
                recall_id=recall_id, namespace=row[0], query=data["query"], qtype=data["qtype"],
                time=row[1], time_explicit=data["time_explicit"], ids=tuple(data["ids"]),
                features=tuple(tuple(f) for f in data["features"]),
                signal_names=tuple(data["signal_names"]),
                signals=tuple(tuple(s) for s in data["signals"]), resolved=resolved)
        except (KeyError, TypeError, ValueError) as exc:
            raise StateError(f"impression {recall_id!r} is unreadable: {exc}") from exc

    def apply_feedback(self, batch: FeedbackBatch, credit: CreditFn) -> FeedbackOutcome:
        with self._write() as conn:
            resolved = {i: bool(u) for i, u in conn.execute(
                "SELECT id, used FROM resolutions WHERE recall_id = ?", (batch.recall_id,))}
            todo, done = check_resolution(batch, resolved)
            if todo:
                features, dpos, dneg = credit(
                    lambda fs: self._counts(conn, batch.namespace, fs), todo)
                rows = list(zip(features, dpos.tolist(), dneg.tolist()))
                conn.executemany(
                    "INSERT INTO links (namespace, feature, pos, neg) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (namespace, feature) DO UPDATE SET "
                    "pos = pos + excluded.pos, neg = neg + excluded.neg",
                    [(batch.namespace, f, p, n) for f, p, n in rows])
                conn.executemany(
                    "INSERT INTO global_links (feature, pos, neg) VALUES (?, ?, ?) "
                    "ON CONFLICT (feature) DO UPDATE SET "
                    "pos = pos + excluded.pos, neg = neg + excluded.neg", rows)
                conn.executemany(
                    "INSERT INTO docs (namespace, id, last_used, use_count, ignore_count) "
                    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (namespace, id) DO UPDATE SET "
                    "last_used = CASE WHEN excluded.last_used IS NULL THEN last_used "
                    "WHEN last_used IS NULL THEN excluded.last_used "
                    "ELSE MAX(last_used, excluded.last_used) END, "
                    "use_count = use_count + excluded.use_count, "
                    "ignore_count = ignore_count + excluded.ignore_count",
                    [(batch.namespace, item.id, batch.time if item.used else None,
                      1.0 if item.used else 0.0, 0.0 if item.used else 1.0) for item in todo])
                conn.executemany("INSERT INTO resolutions (recall_id, id, used) VALUES (?, ?, ?)",
                                 [(batch.recall_id, item.id, int(item.used)) for item in todo])
                conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 "
                             "WHERE key = 'feedbacks'")
        return FeedbackOutcome(batch.recall_id, tuple(i.id for i in todo), tuple(done))

    def list_links(self, namespace: str | None) -> tuple[list[str], np.ndarray, np.ndarray]:
        with self._read() as conn:
            if namespace is None:
                rows = conn.execute("SELECT feature, pos, neg FROM global_links ORDER BY feature")
            else:
                rows = conn.execute("SELECT feature, pos, neg FROM links WHERE namespace = ? "
                                    "ORDER BY feature", (namespace,))
            data = rows.fetchall()
        features = [r[0] for r in data]
        arr = np.array([r[1:] for r in data], dtype=np.float64).reshape(-1, 2)
        return features, arr[:, 0].copy(), arr[:, 1].copy()

    def namespaces(self) -> list[str]:
        with self._read() as conn:
            return [r[0] for r in conn.execute(
                "SELECT namespace FROM links UNION SELECT namespace FROM docs ORDER BY 1")]

    def forget_namespace(self, namespace: str, *, scrub_global: bool = True) -> None:
        with self._write() as conn:
            if scrub_global:
                conn.execute(
                    "UPDATE global_links SET "
                    "pos = MAX(pos - COALESCE((SELECT l.pos FROM links l WHERE l.namespace = ? "
                    "AND l.feature = global_links.feature), 0), 0), "
                    "neg = MAX(neg - COALESCE((SELECT l.neg FROM links l WHERE l.namespace = ? "
                    "AND l.feature = global_links.feature), 0), 0)", (namespace, namespace))
            conn.execute("DELETE FROM links WHERE namespace = ?", (namespace,))
            conn.execute("DELETE FROM docs WHERE namespace = ?", (namespace,))
            conn.execute("DELETE FROM resolutions WHERE recall_id IN "
                         "(SELECT recall_id FROM impressions WHERE namespace = ?)", (namespace,))
            conn.execute("DELETE FROM impressions WHERE namespace = ?", (namespace,))

    def stats(self) -> dict[str, int]:
        with self._read() as conn:
            one = lambda sql: int(conn.execute(sql).fetchone()[0])  # noqa: E731
            return {
                "namespaces": one("SELECT COUNT(*) FROM (SELECT namespace FROM links UNION "
                                  "SELECT namespace FROM docs)"),
                "links": one("SELECT COUNT(*) FROM links"),
                "global_links": one("SELECT COUNT(*) FROM global_links"),
                "documents": one("SELECT COUNT(*) FROM docs"),
                "impressions": one("SELECT COUNT(*) FROM impressions"),
                "feedbacks": one("SELECT value FROM meta WHERE key = 'feedbacks'"),
            }

    def integrity_check(self) -> str:
        """SQLite's ``PRAGMA integrity_check`` answer (``"ok"`` when the file is sound)."""
        with self._read() as conn:
            return str(conn.execute("PRAGMA integrity_check").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def __enter__(self) -> SQLiteState:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
