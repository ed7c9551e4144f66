"""PostgreSQL state: the learned state in a schema of its own on a server you already run,
shared by every process and host that reaches it.

Each feedback (or group of feedbacks, :meth:`PostgresState.apply`) is one transaction at READ
COMMITTED. It first locks the rows of the namespaces it writes (``FOR UPDATE``, in name order),
then each impression it records verdicts on, then the feature rows it adds to (in name order),
so concurrent writers serialise where they meet and never lose an increment; a transaction the
server rolls back as a deadlock or a serialization failure is run again, whole. A process
killed mid-write leaves the last committed state. A feedback sent again (the same recall, or
the same explicit feedback id) finds its positions recorded and writes nothing.

Connections come from a psycopg_pool pool (``pool_size`` per process, opened again after a
fork). A connection lost (a server restart, ``pg_terminate_backend``) raises
:class:`~heaprank.errors.StateUnavailableError`: the pool drops every dead connection then, and
the next call connects again (a pool that could make none, the server down, is replaced by a
new one rather than left to back off). With row-level security on in the schema (:mod:`.rls`),
each call on a namespace first checks the role is granted it. There is no async twin (as for
SQLite): ``Reranker.arerank`` and ``afeedback`` run these sync calls in a worker thread.

The layout (schema version 1) is in :mod:`.schema`; operating it in docs/postgres.md.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import numpy as np

from ..._optional import require
from ..._time import DAY_S
from ...errors import StateReadOnlyError, StateUnavailableError
from ...model import co_use
from ...model.evidence import DocStats, EdgeRows, LinkCounts
from ...records import EdgeState, Impression, Update, recall_key
from .. import codec
from ..base import paged_log
from .failures import RETRY_SQLSTATES, redacted, state_error
from .forget import forget_rows
from .reads import LIVE, NS_ID, READ, READ_EDGES, counts_of, links_of, split_rows
from .rls import claim, rls_on
from .schema import check_schema, lock_key, schema_name
from .transfer import export_docs, export_impressions, import_dump
from .url import check_arguments
from .weights import swap_record
from .writes import Tally, apply_one, prune_rows

if TYPE_CHECKING:
    from ..copy import StateDump

logger = logging.getLogger("heaprank")
#: Impressions per page of a feedback log read (:func:`~heaprank.state.base.paged_log`).
_LOG_PAGE = 512
T = TypeVar("T")

#: Pools a forked child inherited: kept referenced until it exits, never closed or collected
#: there (closing a connection sends the server a goodbye on a socket the parent still uses).
_INHERITED: list[Any] = []
_PRUNE_EVERY = 256
#: How many times a write transaction the server rolled back (deadlock, serialization) runs.
_ATTEMPTS = 5
_PUT_ALONE = ("INSERT INTO impressions (key, ns, fed, body) SELECT %s, id, false, %s "
              "FROM namespaces WHERE name = %s ON CONFLICT (key) DO NOTHING")


class PostgresState:
    """Learned state in a PostgreSQL schema of its own.

    Args:
        url: A libpq URL, ``postgresql://user@host:5432/dbname`` (libpq's own query options,
            ``sslmode=`` and the like, pass through).
        schema: The schema that holds heaprank's tables (created with them when missing). A
            schema holding tables heaprank did not create is refused, never altered.
        read_only: Never write (nor create the schema); writes raise StateReadOnlyError.
        pool_size: At most this many connections per process (a thread holds one per call).
        timeout_s: How long a call waits for a connection (and a new one for the server).
        max_impressions: How many impressions with feedback to keep (oldest pruned first).
        impression_ttl_s: Impressions without feedback expire after this long (wall clock).
        max_open_impressions: How many impressions without feedback to keep.

    The constructor connects and checks (or creates) the schema; :meth:`lazy` opens a state
    whose server cannot be reached now, connecting on its first call.

    Raises:
        StateError: the schema belongs to another application or has a newer version.
        MissingDependencyError: psycopg is not installed (``pip install 'heaprank[postgres]'``).
    """

    #: It applies a list of updates in one transaction (see
    #: :class:`~heaprank.state.capabilities.GroupCommit`).
    group_commit: Literal[True] = True
    #: Whether a server that cannot be reached at construction is left for the first call
    #: (:meth:`lazy`) rather than raised.
    _lazy = False

    def __init__(self, url: str, *, schema: str = "heaprank", read_only: bool = False,
                 pool_size: int = 4, timeout_s: float = 5.0, max_impressions: int = 100_000,
                 impression_ttl_s: float = DAY_S, max_open_impressions: int = 100_000) -> None:
        require("psycopg", extra="postgres", feature="the PostgreSQL state")
        require("psycopg_pool", extra="postgres", feature="the PostgreSQL state")
        check_arguments(url, counts={"max_impressions": max_impressions, "pool_size": pool_size,
                                     "max_open_impressions": max_open_impressions},
                        spans={"impression_ttl_s": impression_ttl_s, "timeout_s": timeout_s})
        self.url = url
        self.schema = schema_name(schema)
        self.read_only = read_only
        self.pool_size = pool_size
        self.timeout_s = float(timeout_s)
        self.max_impressions = max_impressions
        self.max_open_impressions = max_open_impressions
        self.impression_ttl_s = float(impression_ttl_s)
        self._where = f"PostgreSQL state {redacted(url)} (schema {self.schema})"
        self._lock = threading.Lock()
        self._pool: Any = None
        self._pid, self._busy = -1, 0  # (connections this process's calls hold now)
        self._ready = False
        self._rls = False  # (the schema's row-level security: read with it)
        self._puts = 0
        try:
            with self._conn():
                pass  # connects and checks (or creates) the schema
        except StateUnavailableError:
            if not self._lazy:
                self.close()
                raise
            logger.warning("heaprank: %s cannot be reached now; its first call tries again",
                           self._where)
        except BaseException:
            self.close()
            raise

    @classmethod
    def lazy(cls, url: str, **options: Any) -> PostgresState:
        """The state of ``url`` even when its server cannot be reached now (a warning says
        so): its first call connects and checks the schema. What ``open_state`` opens."""
        state = cls.__new__(cls)
        state._lazy = True
        state.__init__(url, **options)  # type: ignore[misc]
        return state

    def __repr__(self) -> str:
        return (f"PostgresState({redacted(self.url)!r}, schema={self.schema!r}"
                f"{', read_only=True' if self.read_only else ''})")

    # ------------------------------------------------------------ connections

    def _pool_now(self) -> Any:
        """This process's pool (a new one after a fork: a connection must not cross it)."""
        with self._lock:
            if self._pool is not None and self._pid == os.getpid():
                return self._pool
            from psycopg_pool import ConnectionPool

            if self._pool is not None:  # (a fork's: the calls holding its connections are gone)
                _INHERITED.append(self._pool)
                self._busy = 0
            kwargs: dict[str, Any] = {"autocommit": True}
            if "connect_timeout" not in self.url:
                kwargs["connect_timeout"] = max(1, math.ceil(self.timeout_s))
            self._pool = ConnectionPool(self.url, min_size=1, max_size=self.pool_size,
                                        kwargs=kwargs, configure=self._configure,
                                        timeout=self.timeout_s, open=True,
                                        name=f"heaprank-{self.schema}")
            self._pid = os.getpid()
            return self._pool

    def _configure(self, conn: Any) -> None:
        """Every new connection: heaprank's schema first on its search path (its tables are
        named unqualified), commits that do not wait for the disk (an impression a server crash
        may cost without harm; feedback waits, :meth:`_write`), and read only when the state
        is."""
        conn.execute(f"SET search_path TO {self.schema}")
        conn.execute("SET synchronous_commit = off")
        if self.read_only:
            conn.execute("SET default_transaction_read_only = on")

    @contextmanager
    def _conn(self, *namespaces: str) -> Iterator[Any]:
        """A connection of the pool (autocommit), the schema checked on the first one, the
        role's grant of ``namespaces`` checked under row-level security (:mod:`.rls`); a
        psycopg failure leaves as the StateError that names it."""
        import psycopg
        from psycopg_pool import PoolTimeout

        pool = self._pool_now()
        try:
            with pool.connection() as conn, self._holding():
                if not self._ready:
                    check_schema(conn, self.schema, self._where, read_only=self.read_only)
                    self._rls, self._ready = rls_on(conn, self.schema), True
                if self._rls and namespaces:
                    claim(conn, namespaces, self._where)
                yield conn
        except (psycopg.Error, PoolTimeout) as exc:
            error = state_error(self._where, exc)
            if isinstance(error, StateUnavailableError):
                self._drop_dead(pool, none=isinstance(exc, PoolTimeout))
            raise error from None

    @contextmanager
    def _holding(self) -> Iterator[None]:
        with self._lock:
            self._busy += 1
        try:
            yield
        finally:
            with self._lock:
                self._busy -= 1

    def _drop_dead(self, pool: Any, *, none: bool) -> None:
        """After a lost connection, test the idle ones and drop those that are dead too (a
        server restart kills them all). When ``none`` could be had while no call held one (the
        server down, not the pool busy), retire the pool, whose reconnection backs off for
        seconds after failures: the next call connects at once with a new one."""
        try:
            with self._lock:
                retire = none and self._busy == 0 and self._pool is pool
                if retire:
                    self._pool = None
            pool.close(timeout=1.0) if retire else pool.check()
        except Exception:  # noqa: BLE001 - the pool reconnects in the background anyway
            logger.debug("heaprank: checking the pool of %s failed", self._where, exc_info=True)

    def _write(self, work: Callable[[Any], T], *, durable: bool = True,
               namespaces: Sequence[str] = ()) -> T:
        """``work`` in one transaction, run again (whole) when the server rolls it back as a
        deadlock or a serialization failure. A ``durable`` one returns once its commit is on
        the server's disk (``synchronous_commit`` as the server, database or role sets it)."""
        import psycopg

        if self.read_only:
            raise StateReadOnlyError(f"{self._where} is open read-only")
        for attempt in range(1, _ATTEMPTS + 1):
            with self._conn(*namespaces) as conn:
                try:
                    with conn.transaction():
                        if durable:
                            conn.execute("SET LOCAL synchronous_commit TO DEFAULT")
                        return work(conn)
                except psycopg.Error as exc:
                    if exc.sqlstate not in RETRY_SQLSTATES or attempt == _ATTEMPTS:
                        raise
                    time.sleep(0.005 * attempt)
        raise AssertionError("unreachable")  # (the last attempt returns or raises)

    @staticmethod
    def _ns_id(conn: Any, namespace: str) -> int:
        """The id of ``namespace``, its row made if missing (without locking an existing one)."""
        row = conn.execute("INSERT INTO namespaces (name) VALUES (%s) ON CONFLICT (name) "
                           "DO NOTHING RETURNING id", (namespace,)).fetchone()
        if row is None:
            row = conn.execute("SELECT id FROM namespaces WHERE name = %s", (namespace,)).fetchone()
        return int(row[0])

    # ------------------------------------------------------------------ reads

    def _read_rows(self, namespace: str, features: Sequence[str],
                   ids: Sequence[str]) -> tuple[LinkCounts, DocStats]:
        with self._conn(namespace) as conn:
            rows = conn.execute(READ, {"ns": namespace, "features": list(features),
                                        "ids": list(ids)}).fetchall()
        return split_rows(rows, len(features), len(ids))

    def read_links(self, namespace: str, features: Sequence[str]) -> LinkCounts:
        return self._read_rows(namespace, features, ())[0]

    def read_docs(self, namespace: str, ids: Sequence[str]) -> DocStats:
        """The documents' stats alone."""
        return self._read_rows(namespace, (), ids)[1]

    def read(self, namespace: str, features: Sequence[str],
             ids: Sequence[str]) -> tuple[LinkCounts, DocStats]:
        return self._read_rows(namespace, features, ids)

    def read_with_edges(self, namespace: str, features: Sequence[str],
                        ids: Sequence[str]) -> tuple[LinkCounts, DocStats, EdgeRows]:
        params = {"ns": namespace, "features": list(features), "ids": list(ids)}
        with self._conn(namespace) as conn, conn.transaction():  # (one snapshot for both)
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            rows = conn.execute(READ, params).fetchall()
            found = conn.execute(READ_EDGES, params).fetchall()
        counts, docs = split_rows(rows, len(features), len(ids))
        adj = co_use.adjacency(found)
        return counts, docs, co_use.among(ids, adj.get)

    def edge_state(self, namespace: str, docs: Sequence[str]) -> EdgeState:
        with self._conn(namespace) as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            row = conn.execute("SELECT id, edges_version FROM namespaces WHERE name = %s",
                               (namespace,)).fetchone()
            if row is None:
                return EdgeState(0, 0, {})
            ns, version = row
            around = conn.execute("SELECT a, b, strength, count, last FROM edges WHERE ns = %s "
                                  "AND (a = ANY(%s) OR b = ANY(%s))",
                                  (ns, list(docs), list(docs))).fetchall()
            total = conn.execute("SELECT count(*) FROM edges WHERE ns = %s", (ns,)).fetchone()[0]
        return EdgeState(int(version), int(total), co_use.adjacency(around))

    def list_edges(self, namespace: str) -> list[tuple[str, str, float, float, float]]:
        with self._conn(namespace) as conn:
            return [tuple(r) for r in conn.execute(  # type: ignore[misc]
                f"SELECT a, b, strength, count, last FROM edges WHERE ns = {NS_ID} "
                f"ORDER BY a, b", {"ns": namespace})]

    # ------------------------------------------------------------- impressions

    def put_impression(self, impression: Impression, *, feedback_id: str | None = None) -> str | None:
        key = recall_key(impression.recall_id)
        if key is None:
            raise ValueError(f"recall_id: {impression.recall_id!r} is not a heaprank recall id")
        body = codec.encode_impression(impression)
        if feedback_id is None and self._put_alone(key, body, impression.namespace):
            return impression.recall_id

        def work(conn: Any) -> str | None:
            ns = self._ns_id(conn, impression.namespace)
            if feedback_id is not None:  # one writer at a time per (namespace, feedback id)
                conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, %s))",
                             (f"{self.schema}:{ns}:{feedback_id}", lock_key(self.schema)))
                row = conn.execute("SELECT f.key FROM feedback_ids f JOIN impressions i ON "
                                   "i.key = f.key WHERE f.ns = %s AND f.fid = %s",
                                   (ns, feedback_id)).fetchone()
                if row is not None:
                    return f"{row[0]:016x}"
            stored = conn.execute("INSERT INTO impressions (key, ns, fed, body) VALUES "
                                  "(%s, %s, false, %s) ON CONFLICT (key) DO NOTHING",
                                  (key, ns, body)).rowcount
            if stored == 0:
                return None
            if feedback_id is not None:
                conn.execute("INSERT INTO feedback_ids (ns, fid, key) VALUES (%s, %s, %s) "
                             "ON CONFLICT (ns, fid) DO UPDATE SET key = excluded.key",
                             (ns, feedback_id, key))
            return impression.recall_id

        held = self._write(work, durable=False, namespaces=(impression.namespace,))
        if held == impression.recall_id:
            self._count_put()
        return held

    def _put_alone(self, key: int, body: bytes, namespace: str) -> bool:
        """Store an impression of a namespace that exists already (the usual case) in one
        statement, its own transaction: whether it was stored (False: the namespace is new,
        or the key is taken, which put_impression's transaction sorts out)."""
        if self.read_only:
            raise StateReadOnlyError(f"{self._where} is open read-only")
        with self._conn(namespace) as conn:
            stored = conn.execute(_PUT_ALONE, (key, body, namespace)).rowcount == 1
        if stored:
            self._count_put()
        return stored

    def _count_put(self) -> None:
        self._puts += 1
        if self._puts % _PRUNE_EVERY == 1:  # the first write of a process, then every 256
            self.prune()

    def prune(self) -> None:
        """Expire impressions now (normally done every few hundred writes)."""
        caps = {True: self.max_impressions, False: self.max_open_impressions}
        self._write(lambda conn: prune_rows(conn, lock_key(self.schema) + 2,
                                            time.time() - self.impression_ttl_s, caps),
                    durable=False)

    def get_impression(self, recall_id: str) -> Impression | None:
        key = recall_key(recall_id)
        if key is None:
            return None
        with self._conn() as conn:
            row = conn.execute("SELECT n.name, i.body FROM impressions i JOIN namespaces n "
                               "ON n.id = i.ns WHERE i.key = %s", (key,)).fetchone()
        if row is None:
            return None
        return codec.decode_impression(recall_id, row[0], bytes(row[1]))

    def feedback_log(self, namespace: str | None = None) -> Iterator[Impression]:
        """Impressions with feedback of ``namespace`` (``None``: all), oldest recall first, read
        in pages of a few hundred (a connection is held only while a page is read)."""
        where = "" if namespace is None else " AND n.name = %s"
        sql = (f"SELECT i.key, n.name, i.body FROM impressions i JOIN namespaces n ON n.id = i.ns "
               f"WHERE i.fed AND i.key > %s{where} ORDER BY i.key LIMIT {_LOG_PAGE}")

        def read_page(after: int) -> list[tuple[int, str, bytes]]:
            with self._conn(*(() if namespace is None else (namespace,))) as conn:
                return conn.execute(sql, (after,) if namespace is None
                                    else (after, namespace)).fetchall()

        return paged_log(read_page, _LOG_PAGE)

    # ---------------------------------------------------------------- feedback

    def apply(self, updates: Sequence[Update]) -> list[bool]:
        """Apply feedback updates (see :meth:`~heaprank.StateBackend.apply`) in ONE
        transaction. Each update is checked on its own (a stale one writes nothing); the rows
        they change are written once each, at the end (:class:`~.writes.Tally`)."""
        if not updates:
            return []

        def work(conn: Any) -> list[bool]:
            names = sorted({u.namespace for u in updates})
            locked = dict(conn.execute("SELECT name, id FROM namespaces WHERE name = ANY(%s) "
                                       "ORDER BY name FOR UPDATE", (names,)).fetchall())
            tally, applied = Tally(), Counter[int]()
            done = [apply_one(conn, u, locked.get(u.namespace), tally, applied)
                    for u in updates]
            tally.write(conn)
            if applied:
                conn.cursor().executemany(
                    "UPDATE namespaces SET feedbacks = feedbacks + %s WHERE id = %s",
                    [(n, ns) for ns, n in sorted(applied.items())])
            return done

        return self._write(work, namespaces=sorted({u.namespace for u in updates}))

    # ------------------------------------------------------------------ audit

    def list_links(self, namespace: str | None) -> tuple[list[str], np.ndarray, np.ndarray]:
        with self._conn(*(() if namespace is None else (namespace,))) as conn:
            return links_of(conn, namespace)

    def namespaces(self) -> list[str]:
        with self._conn() as conn:
            return [r[0] for r in conn.execute(f"SELECT name FROM {LIVE} ORDER BY name")]

    def forget_namespace(self, namespace: str, *, scrub_global: bool = True) -> None:
        """Remove every row of ``namespace`` in one transaction (its feedbacks leave the total
        with its row). The deleted rows' bytes stay in the table files until VACUUM reuses
        their space (docs/postgres.md)."""
        self._write(lambda conn: forget_rows(conn, namespace, scrub_global=scrub_global),
                    namespaces=(namespace,))

    def stats(self) -> dict[str, int]:
        with self._conn() as conn:
            return {**counts_of(conn), "max_open_impressions": self.max_open_impressions}

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
            if pool is not None and self._pid == os.getpid():
                pool.close()

    def __enter__(self) -> PostgresState:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ fitted weights

    def read_weights(self) -> str | None:
        """The fitted-weights record (:mod:`heaprank.state.weights`): the ``meta`` row
        ``weights``."""
        with self._conn() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = 'weights'").fetchone()
        return None if row is None else str(row[0])

    def swap_weights(self, expected: int, version: int, record: str) -> bool:
        """Store ``record`` if the stored one is still at version ``expected``."""
        return self._write(lambda conn: swap_record(conn, lock_key(self.schema) + 1, expected,
                                                    record))

    # ------------------------------------------------------- export (state copy)

    def iter_docs(self, namespace: str) -> list[tuple[str, float, float]]:
        """``(id, last_used, use_count)`` of each used document of ``namespace``."""
        with self._conn(namespace) as conn:
            return export_docs(conn, namespace)

    def iter_impressions(self) -> list[tuple[str, str, bytes]]:
        """``(recall_id, namespace, codec bytes)`` of every stored impression."""
        with self._conn() as conn:
            return export_impressions(conn)

    def import_state(self, dump: StateDump) -> None:
        """Write a whole state (from :func:`heaprank.state.copy.export_state`) into this empty
        one, in one transaction."""
        self._write(lambda conn: import_dump(conn, dump, self._where, self._ns_id))
