"""Redis state: one learned state shared by many workers and hosts, on one server or a Cluster.

The modules of the backend: :mod:`.layout` (key names, hash tags, slots, URL options),
:mod:`.lua` (the scripts), :mod:`.edges` (co-use edges: their key and the scripts
wrapping READ_LOCAL and FEEDBACK), :mod:`.ops` (the hot-path operations, written once for
both clients), :mod:`.connect` (clients and the failure policy), this module (the sync
client, with the audit, forget and copy operations) and :mod:`.async_backend` (the async client
``Reranker.arerank``/``afeedback`` use).

Consistency: on one server a feedback script writes the pooled shards too, and a rerank and a
feedback's credit read the links as they are. In a Cluster
the pooled shards sit in other slots: a rerank reads the pooled counts from this process's
cache (checked against the shards' versions once per ``global_cache_ttl_s``, 1 s by default),
a feedback's credit is worked out from those counts, and its pooled deltas go to its bucket's
outbox in the same script, pushed by the client in batches (:mod:`.pooled`): the namespace's own counts are
always exact, the pooled layer catches up within the push delay, and no increment is ever lost
or doubled (a push is applied at most once per shard, an unpushed entry is pushed by the next
drain).

Every Redis error or timeout raises :class:`~heaprank.errors.StateUnavailableError`. Reads,
impression writes (the same impression written again completes the first write) and feedback
(idempotent per recall id and item) are retried with exponential backoff; forgetting is not.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from ...errors import ConfigError, StateUnavailableError
from ...model.evidence import DocStats, EdgeRows, LinkCounts
from ...records import EdgeState, Impression, Update
from . import admin, pooled
from . import edges as redis_assoc
from . import ops as redis_ops
from .async_backend import AsyncRedisState
from .connect import PRUNE_EVERY, RedisClientBase, RedisOptions, connect
from .flow import drive
from .layout import URL_OPTIONS, key_slot, redis_options, shard_tags, unpack
from .ops import SCRIPTS, Request

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..copy import StateDump

__all__ = ["URL_OPTIONS", "RedisState", "key_slot", "redis_options", "shard_tags"]

#: Eviction policies that may evict learned links (any key), and those that evict keys with a
#: time to live only (impressions without feedback, pointers of 16-digit ids, explicit ids).
_EVICTS_ANY = ("allkeys-lru", "allkeys-lfu", "allkeys-random")
_EVICTS_TTL = ("volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl")
T = TypeVar("T")
logger = logging.getLogger("heaprank")


class RedisState(RedisClientBase):
    """Learned state in Redis (a server, or a Cluster with ``redis+cluster://``).

    Args:
        url: ``redis://host:port/db``, ``rediss://...`` (TLS), ``unix:///path.sock`` or
            ``redis+cluster://host:port``; options of this class may be given in the query string.
        client: An existing ``redis.Redis`` or ``redis.cluster.RedisCluster`` (with
            ``decode_responses=False``) instead of ``url``; its own retry settings apply, and
            the async methods of a Reranker then run this client in a worker thread.
        prefix: Every key starts with it (several states may share a server).
        global_shards: G hashes the pooled layer is spread over, by feature (for a new state,
            default 32; ``heaprank state reshard`` changes it, and a state resharded before
            opens with its own count).
        timeout_s: Socket connect and read timeout; past it a call raises StateUnavailableError.
        retries: Retries of idempotent calls (reads, impression writes, feedback) after a
            connection error, a timeout or a Cluster failing over.
        global_cache_ttl_s: Check the versions of the pooled counts this process keeps at most
            this often (0: read them at every rerank; default 0 on a server, 1 s in a Cluster).
        max_impressions: Impressions that received feedback to keep (oldest dropped by prune).
        impression_ttl_s: Impressions without feedback expire after this long (an hour).
        replica_url: A replica of the server (``redis://replica:6379/0``) that reranks read
            from (their pooled and own counts may lag by the replication delay); writes go to
            ``url``. A Cluster: ``read_from_replicas``.
        read_from_replicas: A Cluster client reads from replicas too (redis-py's option).
        eviction: What to do when the server's ``maxmemory-policy`` may evict learned keys
            (``allkeys-*``): ``warn`` (log loudly, the default), ``strict`` (refuse to open)
            or ``ignore``.
        max_connections: Connections a client opens at most (per node in a Cluster; the
            async client of each event loop has as many): 100.
        pool_timeout_s: How long a call waits for a free connection when all are busy
            (URL ``pool_timeout``), then StateUnavailableError: 10 s.
        read_only: Open without writing (``?mode=ro``; the CLI's reading commands): a prefix
            without a state is then a StateError ("no heaprank state at ..."), never created,
            and every write raises StateReadOnlyError.
        strict: Raise StateUnavailableError here when the server cannot be reached. Without
            it (the default, as ``Reranker(strict=False)`` opens it) a worker can start
            during an outage: the layout check and the scripts wait for the first call,
            which fails like any call during an outage while the server is down (a rerank
            then ranks untracked, flagged in EXPLAIN). A Cluster client needs a node at
            construction either way.
    """

    def __init__(self, url: str | None = None, *, client: Any = None, strict: bool = False,
                 **options: Unpack[RedisOptions]) -> None:
        self._setup(url, client, connect, options)
        self._async: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncRedisState] = \
            weakref.WeakKeyDictionary()
        self._async_lock = threading.Lock()  # loops on several threads may ask at once
        self._ready = False
        self._prunes = itertools.count()
        try:
            self._open()
        except StateUnavailableError as exc:
            if strict:
                raise
            logger.warning("heaprank: Redis state %s unreachable at start-up, opened without "
                           "it (the first call checks again): %s", self.where(), exc)

    # ------------------------------------------------------------ connection

    def _open(self) -> None:
        """Check the key layout (read-only: that a state is there) and load the scripts."""
        check = redis_ops.check_layout(self.layout, "RedisState",
                                       self.where() if self.read_only else None)
        self.adopt(self._attempt("open", lambda: drive(check, self._send), idempotent=True))
        self._attempt("check eviction", self._check_eviction, idempotent=True)
        # Loaded up front on every primary: redis-py leaks a connection when a cluster answers
        # NOSCRIPT, so that answer is kept for a server that restarted since.
        self._attempt("load scripts", lambda: [self.client.script_load(s) for s in SCRIPTS.values()],
                      idempotent=True)
        self._ready = True

    def _check_eviction(self) -> None:
        """Warn (or refuse, ``eviction="strict"``) when the server may evict learned links."""
        if self.settings.eviction == "ignore":
            return
        try:
            found = self.client.config_get("maxmemory-policy")
        except self.failures.errors:  # CONFIG disabled (a managed service): nothing to check
            return
        policies = {v.decode() if isinstance(v, bytes) else str(v) for v in (
            found.values() if isinstance(found, dict) else [])}
        policies = {p for p in policies if p not in ("maxmemory-policy",)}
        risky = sorted(p for p in policies if p in _EVICTS_ANY)
        if risky:
            message = (f"Redis state {self.where()}: maxmemory-policy {risky[0]} may evict "
                       f"learned links and pooled counts when the server is full; use "
                       f"noeviction (or volatile-*, which evicts impressions only; see "
                       f"docs/redis.md)")
            if self.settings.eviction == "strict":
                raise ConfigError(message)
            logger.warning("heaprank: %s", message)
        elif policies & set(_EVICTS_TTL):
            logger.info("heaprank: Redis state %s: a volatile-* maxmemory-policy may evict "
                        "impressions without feedback early (their feedback is then unknown)",
                        self.where())

    def call(self, what: str, fn: Callable[[], T], *, idempotent: bool) -> T:
        """Run ``fn`` under the failure policy (see :meth:`_call`): for :mod:`.admin`."""
        return self._call(what, fn, idempotent=idempotent)

    def run_flow(self, what: str, flow: Callable[[], redis_ops.Op], *, idempotent: bool) -> Any:
        return self._run(what, flow, idempotent=idempotent)

    def send(self, request: Request) -> Any:
        return self._send(request)

    def _call(self, what: str, fn: Callable[[], T], *, idempotent: bool) -> T:
        """Run ``fn`` (opened first when the server was down at start-up, so an outage then
        fails this call like any later outage); map every Redis error to
        StateUnavailableError, retrying idempotent calls after connection errors and timeouts
        with exponential backoff."""
        self.refuse_writes(what)
        if not self._ready:
            self._open()
        return self._attempt(what, fn, idempotent=idempotent)

    def _attempt(self, what: str, fn: Callable[[], T], *, idempotent: bool) -> T:
        attempt, since = 0, time.monotonic()
        while True:
            try:
                return fn()
            except self.failures.caught as exc:
                if self.moved_on(exc):  # a reshard moved shards: placed again, run again
                    wait = self.placed_again(what, exc, since, drive(
                        redis_ops.load_placement(self.layout), self._send))
                    since = since if wait else time.monotonic()  # (it moved on: wait anew)
                    time.sleep(wait)
                    continue
                time.sleep(self.failures.wait_s(what, exc, attempt, idempotent=idempotent))
                attempt += 1

    def _send(self, request: Request, client: Any = None) -> Any:
        client = self.client if client is None else client
        try:
            return request.send(client)
        except self.failures.no_script:
            request.load(client)  # type: ignore[union-attr]  # only scripts say NOSCRIPT
            return request.send(client)

    def _run(self, what: str, flow: Callable[[], redis_ops.Op], *, idempotent: bool) -> Any:
        """Run an operation of :mod:`.ops` (a fresh flow for every attempt)."""
        return self._call(what, lambda: drive(flow(), self._send), idempotent=idempotent)

    def _read_from_replica(self, request: Request) -> Any:
        return self._send(request, self.reader)

    def async_backend(self) -> AsyncRedisState | None:
        """The ``redis.asyncio`` twin of this state for the running event loop (same URL,
        layout, options and pooled-count cache; its own connection pool per loop), or None when
        this state was given a client instead of a URL."""
        if self.url is None:
            return None
        loop = asyncio.get_running_loop()
        with self._async_lock:
            # Twins of loops that ended without aclose_loop(): their clients hold their loop,
            # so the weak keys alone never let them go.
            for ended in [old for old in self._async if old.is_closed()]:
                del self._async[ended]
            twin = self._async.get(loop)
            if twin is None:
                twin = AsyncRedisState(self.url, _cache=self.cache, _seen=self.seen,
                                       **self.settings.options())
                twin.checked = self._ready  # (else it checks the layout itself, first)
                self._async[loop] = twin
        return twin

    # ------------------------------------------------------------------ reads

    def read(self, namespace: str, features: Sequence[str],
             ids: Sequence[str]) -> tuple[LinkCounts, DocStats]:
        counts, docs, _ = self._read(namespace, features, ids, False)
        return counts, docs

    def read_with_edges(self, namespace: str, features: Sequence[str],
                        ids: Sequence[str]) -> tuple[LinkCounts, DocStats, EdgeRows]:
        """:meth:`read` plus the co-use edges among ``ids``, in the same round trip."""
        return self._read(namespace, features, ids, True)

    def _read(self, namespace: str, features: Sequence[str], ids: Sequence[str],
              with_edges: bool) -> tuple[LinkCounts, DocStats, EdgeRows]:
        def flow() -> redis_ops.Op:
            return redis_ops.read(self.layout, self.cache, self.cluster, namespace, features,
                                  ids, with_edges)
        send = self._send if self.reader is self.client else self._read_from_replica
        found: tuple[LinkCounts, DocStats, EdgeRows] = self._call(
            "read", lambda: drive(flow(), send), idempotent=True)
        return found

    def list_edges(self, namespace: str) -> list[tuple[str, str, float, float, float]]:
        """Every co-use edge of ``namespace``: ``(a, b, strength, count, last)``, ``a < b``."""
        found: list[tuple[str, str, float, float, float]] = self._run(
            "list_edges", lambda: redis_assoc.list_edges(self.layout, namespace), idempotent=True)
        return found

    def read_links(self, namespace: str, features: Sequence[str]) -> LinkCounts:
        return self.read(namespace, features, [])[0]

    def read_docs(self, namespace: str, ids: Sequence[str]) -> DocStats:
        return self.read(namespace, [], ids)[1]

    # ------------------------------------------------------------- impressions

    def put_impression(self, impression: Impression, *, feedback_id: str | None = None) -> str | None:
        held: str | None = self._run("put_impression", lambda: redis_ops.put_impression(
            self.layout, self.cluster, impression, feedback_id, self.impression_ttl_s, self.seen),
            idempotent=True)
        return held

    def get_impression(self, recall_id: str) -> Impression | None:
        found: Impression | None = self._run("get_impression", lambda: redis_ops.get_impression(
            self.layout, self.cluster, recall_id, self.impression_ttl_s), idempotent=True)
        return found

    def prune(self) -> None:
        """Drop the oldest impressions with feedback past ``max_impressions`` (those without
        feedback expire by themselves); in a Cluster, push the waiting pooled deltas."""
        self._run("prune", lambda: redis_ops.prune(self.layout, self.max_impressions),
                  idempotent=True)
        if self.cluster:  # (and a share of the entries other writers left)
            admin.drain(self, pooled.DRAIN_AFTER_MS, next(self._prunes))

    def feedback_log(self, namespace: str | None = None) -> Iterator[Impression]:
        """Impressions with feedback of ``namespace`` (``None``: all), oldest recall first."""
        return admin.feedback_log(self, namespace)

    # ---------------------------------------------------------------- feedback

    def apply(self, updates: Sequence[Update]) -> list[bool]:
        """Apply feedback updates, each in one Lua script (atomic on its own, one after the
        other: see :meth:`~heaprank.StateBackend.apply`).

        After a connection error an update is sent again; if the first attempt had been
        applied before the reply was lost, the second finds its items recorded and reports it
        stale: the caller then finds them recorded, and the evidence counts once either way.
        """
        return [self._apply(update) for update in updates]

    def _apply(self, update: Update) -> bool:
        applied, entry = self._run("feedback", lambda: redis_ops.apply_update(
            self.layout, self.cluster, update, self.cache, self.seen, self.impression_ttl_s),
            idempotent=True)
        if self.queue(entry, time.monotonic()):
            self.push()
        if applied and next(self._feedbacks) % PRUNE_EVERY == 1:
            self.prune()
        return bool(applied)

    def edge_state(self, namespace: str, docs: Sequence[str]) -> EdgeState:
        """The co-use edges of ``docs`` in ``namespace``, their version and count."""
        found: EdgeState = self._run("edge_state", lambda: redis_assoc.edge_state(
            self.layout, namespace, docs), idempotent=True)
        return found

    def push(self) -> None:
        """Push the pooled deltas of this process's feedbacks still waiting (a Cluster)."""
        entries = self.take_outbox()
        if entries:
            try:
                self.push_entries(entries)
            except StateUnavailableError:
                self.restore(entries)  # kept in the buckets' outboxes too: none is lost
                raise
            self.settled(entries)

    def push_entries(self, entries: list[pooled.Entry]) -> None:
        """Push outbox entries (each applied at most once)."""
        if entries:
            self._run("push", lambda: pooled.push(self.layout, entries, self.cluster),
                      idempotent=True)

    def drain(self) -> None:
        """Push every waiting outbox entry, this process's and any other writer's, whatever
        its age: the pooled deltas of a writer that died (SIGKILL, no ``close()``) a moment
        ago are on the server, in their buckets' outboxes, and counted here. An entry a live
        writer still holds a copy of counts once (the shards' markers)."""
        admin.drain(self, 0.0)

    # ------------------------------------------------------------------ audit

    def list_links(self, namespace: str | None) -> tuple[list[str], np.ndarray, np.ndarray]:
        if namespace is None:
            return admin.list_pooled(self)
        return admin.list_own(self, namespace)

    def namespaces(self) -> list[str]:
        found: list[str] = self._run("namespaces", lambda: admin.namespaces_flow(self.layout),
                                     idempotent=True)
        return found

    def forget_namespace(self, namespace: str, *, scrub_global: bool = True) -> None:
        """Remove the namespace's keys in one script in its slot (links, documents, explicit
        ids, impressions, its pooled contribution with ``scrub_global``, pushed through its
        bucket's outbox; its fields in the bucket's impression hashes too), then the pointers
        of its 16-digit recall ids; the pooled fields no namespace holds
        leave the pool. An impression written while this runs may survive until its TTL."""
        admin.forget(self, namespace, scrub_global)

    def stats(self) -> dict[str, int]:
        return admin.stats(self)

    def memory_usage(self, namespace: str) -> dict[str, int | str]:
        """Bytes Redis uses (``MEMORY USAGE``, key included) for a namespace's links (its links
        string, and its document features' hash) and its used documents' hash, with their
        counts and the encoding of the links string."""
        def run() -> dict[str, int | str]:
            links, own, docs = (self.layout.ns_key(k, namespace) for k in "led")
            size = lambda key: int(self.client.memory_usage(key, samples=0) or 0)  # noqa: E731
            encoding = self.client.object("encoding", links) or b""
            return {"bytes": size(links) + size(own),
                    "links": len(self.list_links(namespace)[0]),
                    "encoding": encoding.decode() if isinstance(encoding, bytes) else str(encoding),
                    "doc_bytes": size(docs),
                    "documents": int(self.client.hlen(docs)) - bool(self.client.hexists(docs, ""))}
        return self._call("memory_usage", run, idempotent=True)

    def clear(self) -> int:
        """Delete every key under this state's prefix (tests and ``state copy`` targets)."""
        def run() -> int:
            keys = list(self.client.scan_iter(match=self.layout.every_key(), count=1000))
            for key in keys:
                self.client.delete(key)
            return len(keys)
        self.outbox.clear()
        self.seen.clear()
        self.cache.clear()
        return self._call("clear", run, idempotent=True)

    # ------------------------------------------------------- export (state copy)

    def iter_docs(self, namespace: str) -> list[tuple[str, float, float]]:
        """``(id, last_used, use_count)`` of each used document of ``namespace``."""
        rows = self._call("iter_docs", lambda: self.client.hgetall(
            self.layout.ns_key("d", namespace)), idempotent=True)
        return [(i.decode("utf-8"), *map(float, unpack([v], 2)[0])) for i, v in sorted(rows.items())
                if i]  # (the field "" counts the namespace's feedbacks)

    def iter_impressions(self) -> list[tuple[str, str, bytes]]:
        """``(recall_id, namespace, codec bytes)`` of every live impression."""
        return admin.iter_impressions(self)

    def import_state(self, dump: StateDump) -> None:
        """Write a whole state (from :func:`heaprank.state.copy.export_state`) into this empty one."""
        admin.import_state(self, dump)

    def close(self) -> None:
        """Push the waiting pooled deltas, release the connection pool (an async twin:
        :meth:`aclose_loop` on its loop)."""
        try:
            if self.outbox:
                self.push()
        except StateUnavailableError as exc:  # they wait in their buckets' outboxes
            logger.warning("heaprank: pooled deltas left for the next drain: %s", exc)
        finally:
            self.client.close()
            if self.reader is not self.client:
                self.reader.close()

    async def aclose_loop(self) -> None:
        """Release the running event loop's async client (the sync client stays open); call it
        before the loop ends, or use ``await Reranker.aclose()``."""
        with self._async_lock:
            twin = self._async.pop(asyncio.get_running_loop(), None)
        if twin is not None:
            await twin.aclose()

    def __enter__(self) -> RedisState:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
