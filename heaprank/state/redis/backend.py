"""Redis state: one learned state shared by many workers and hosts, on one server or a Cluster.

The modules of the backend: :mod:`.layout` (key names, hash tags, slots, URL options),
:mod:`.lua` (the scripts), :mod:`.edges` (co-use edges: their key and the scripts
wrapping READ_LOCAL and FEEDBACK), :mod:`.ops` (the hot-path operations, written once for
both clients), :mod:`.connect` (clients and the failure policy), this module (the sync
client, with the audit, forget and copy operations) and :mod:`.async_backend` (the async client
``Reranker.arerank``/``afeedback`` use).

Consistency: on one server a feedback script also reads the other global shards, so every
feedback sees the links exactly as they were. In a Cluster the other shards' counts are read by
the client just before the script (one round trip) and passed in: the pooled part of the credit
may miss feedbacks of other shards applied in that window (bounded staleness of one round trip);
the namespace's own counts and its shard are always exact, and no increment is ever lost or
doubled. A rerank reads in one round trip: one script on a server (which sums the global
shards), a pipeline in a Cluster (one request per node); with ``global_cache_ttl_s > 0`` the
pooled counts may be that many seconds old.

Every Redis error or timeout raises :class:`~heaprank.errors.StateUnavailableError`. Reads,
impression writes (the same impression written again completes the first write) and feedback
(idempotent per recall id and item) are retried with exponential backoff; forgetting is not.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from ..._flow import drive
from ...errors import FeedbackError, StateUnavailableError
from ...records import (
    DocStats,
    FeedbackBatch,
    FeedbackOutcome,
    Impression,
    LinkCounts,
    recall_born_s,
    recall_key,
)
from .. import codec
from ..base import OWN_PREFIX, CreditFn
from ..edges import EdgeRows
from . import edges as redis_assoc
from . import ops as redis_ops
from .async_backend import AsyncRedisState
from .connect import PRUNE_EVERY, RedisClientBase, RedisOptions, connect
from .layout import URL_OPTIONS, KeyLayout, key_slot, redis_options, shard_tags, unpack
from .ops import SCRIPTS, Request

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..copy import StateDump

__all__ = ["URL_OPTIONS", "RedisState", "key_slot", "redis_options", "shard_tags"]

#: Impressions the feedback log reads per round trip.
_LOG_PAGE = 512
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
        global_shards: N hashes the global layer is spread over (fixed for a state's lifetime).
        timeout_s: Socket connect and read timeout; past it a call raises StateUnavailableError.
        retries: Retries of idempotent calls (reads, impression writes, feedback) after a
            connection error, a timeout or a Cluster failing over.
        global_cache_ttl_s: Keep pooled counts read by a rerank this long in this process (0: off).
        max_impressions: Impressions that received feedback to keep (oldest dropped by prune).
        impression_ttl_s: Impressions without feedback expire after this long.
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
        self._attempt("open", lambda: drive(check, self._send), idempotent=True)
        # Loaded up front on every primary: redis-py leaks a connection when a cluster answers
        # NOSCRIPT, so that answer is kept for a server that restarted since.
        self._attempt("load scripts", lambda: [self.client.script_load(s) for s in SCRIPTS.values()],
                      idempotent=True)
        self._ready = True

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
        for attempt in itertools.count():
            try:
                return fn()
            except self.failures.errors as exc:
                time.sleep(self.failures.wait_s(what, exc, attempt, idempotent=idempotent))
        raise AssertionError("unreachable")

    def _send(self, request: Request) -> Any:
        try:
            return request.send(self.client)
        except self.failures.no_script:
            request.load(self.client)  # type: ignore[union-attr]  # only a Script says NOSCRIPT
            return request.send(self.client)

    def _run(self, what: str, flow: Callable[[], redis_ops.Op], *, idempotent: bool) -> Any:
        """Run an operation of :mod:`.ops` (a fresh flow for every attempt)."""
        return self._call(what, lambda: drive(flow(), self._send), idempotent=idempotent)

    def async_backend(self) -> AsyncRedisState | None:
        """The ``redis.asyncio`` twin of this state for the running event loop (same URL,
        layout, options and pooled-count cache; its own connection pool per loop), or None when
        this state was given a client instead of a URL."""
        if self.url is None:
            return None
        loop = asyncio.get_running_loop()
        with self._async_lock:
            twin = self._async.get(loop)
            if twin is None:
                twin = AsyncRedisState(self.url, _cache=self.cache, **self.settings.options())
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
        found: tuple[LinkCounts, DocStats, EdgeRows] = self._run("read", lambda: redis_ops.read(
            self.layout, self.cache, self.cluster, namespace, features, ids, with_edges),
            idempotent=True)
        return found

    def list_edges(self, namespace: str) -> list[tuple[str, str, float, float, float]]:
        """Every co-use edge of ``namespace``: ``(a, b, strength, count, last)``, ``a < b``."""
        return self._call("list_edges", lambda: redis_assoc.list_edges(
            self.client, redis_assoc.key(self.layout, namespace)), idempotent=True)

    def read_links(self, namespace: str, features: Sequence[str]) -> LinkCounts:
        return self.read(namespace, features, [])[0]

    def read_docs(self, namespace: str, ids: Sequence[str]) -> DocStats:
        return self.read(namespace, [], ids)[1]

    # ------------------------------------------------------------- impressions

    def put_impression(self, impression: Impression, *, feedback_id: str | None = None) -> str | None:
        held: str | None = self._run("put_impression", lambda: redis_ops.put_impression(
            self.layout, self.cluster, impression, feedback_id, self.impression_ttl_s),
            idempotent=True)
        return held

    def get_impression(self, recall_id: str) -> Impression | None:
        found: Impression | None = self._run("get_impression", lambda: redis_ops.get_impression(
            self.layout, self.cluster, recall_id), idempotent=True)
        return found

    def prune(self) -> None:
        """Drop the oldest impressions with feedback past ``max_impressions`` (those without
        feedback expire by themselves)."""
        self._run("prune", lambda: redis_ops.prune(self.layout, self.max_impressions),
                  idempotent=True)

    def feedback_log(self, namespace: str | None = None) -> Iterator[Impression]:
        """Impressions with feedback of ``namespace`` (``None``: all), oldest recall first: the
        shards' feedback sets (``P:{t}:f``) read in pages and merged by age."""
        tags = self.layout.tags if namespace is None else [self.layout.tag(namespace)]
        pages = [self._fed_pages(tag, namespace) for tag in tags]
        for _, rid, name, body in heapq.merge(*pages):
            yield codec.decode_impression(rid, name, body)

    def _fed_pages(self, tag: str, namespace: str | None) -> Iterator[tuple[float, str, str, bytes]]:
        """``(age score, recall id, namespace, body)`` of one shard's impressions with feedback,
        by score then recall id; paged by score so that pruning meanwhile skips nothing still
        there."""
        fed = self.layout.key(tag, "f")
        low: float | str = "-inf"
        seen_at_low = 0  # members already read with score == low (ties are ordered by member)
        tied: list[tuple[float, str, str, bytes]] = []  # of score `low`, yielded by recall id
        while True:
            def run(low: float | str = low, skip: int = seen_at_low) -> tuple[list[Any], list[Any]]:
                members = self.client.zrange(fed, low, "+inf", byscore=True, offset=skip,
                                             num=_LOG_PAGE, withscores=True)
                pipe = self.client.pipeline(transaction=False)
                for member, _ in members:
                    pipe.get(member)
                return members, (pipe.execute() if members else [])
            members, bodies = self._call("feedback_log", run, idempotent=True)
            for (member, score), body in zip(members, bodies):
                if score != low:
                    yield from sorted(tied)
                    tied, low, seen_at_low = [], score, 0
                seen_at_low += 1
                name, rid = KeyLayout.split_body_key(member)
                if body is not None and (namespace is None or name == namespace):
                    tied.append((score, rid, name, body))
            if len(members) < _LOG_PAGE:
                yield from sorted(tied)
                return

    # ---------------------------------------------------------------- feedback

    def apply_feedback(self, batch: FeedbackBatch, credit: CreditFn) -> FeedbackOutcome:
        """Apply one feedback in one Lua script (``credit`` is not called: the script computes
        the same credit from ``batch.a0``, ``b0``, ``kappa`` and ``em`` next to the data).

        After a connection error the call is retried; if the first attempt had been applied
        before the reply was lost, its items come back as ``already_recorded``: the evidence is
        counted once either way.
        """
        if recall_key(batch.recall_id) is None:
            raise FeedbackError(f"recall_id {batch.recall_id!r}: unknown (never recorded, "
                                f"expired or pruned)")
        reply = self._run("feedback", lambda: redis_ops.feedback(self.layout, self.cluster, batch),
                          idempotent=True)
        outcome = redis_ops.feedback_outcome(batch, reply)
        if outcome.applied and next(self._feedbacks) % PRUNE_EVERY == 1:
            self.prune()
        return outcome

    # ------------------------------------------------------------------ audit

    def list_links(self, namespace: str | None) -> tuple[list[str], np.ndarray, np.ndarray]:
        def run() -> tuple[list[str], np.ndarray, np.ndarray]:
            if namespace is not None:
                rows = self.client.hgetall(self.layout.ns_key("l", namespace))
                names = sorted(rows)
                arr = unpack([rows[f] for f in names], 2)
                return [f.decode("utf-8") for f in names], arr[:, 0].copy(), arr[:, 1].copy()
            total: dict[bytes, np.ndarray] = {}
            pipe = self.client.pipeline(transaction=False)
            for key in self.layout.shard_keys("g"):
                pipe.hgetall(key)
            for rows in pipe.execute():
                for f, v in rows.items():
                    value = unpack([v], 3)[0]
                    total[f] = total[f] + value if f in total else value
            names = sorted(f for f, v in total.items() if v[2] > 0)
            arr = np.array([total[f][:2] for f in names], dtype=np.float64).reshape(-1, 2)
            return [f.decode("utf-8") for f in names], arr[:, 0].copy(), arr[:, 1].copy()
        return self._call("list_links", run, idempotent=True)

    def namespaces(self) -> list[str]:
        def run() -> list[str]:
            pipe = self.client.pipeline(transaction=False)
            for t in self.layout.tags:
                pipe.smembers(self.layout.key(t, "n"))
            return sorted(n.decode("utf-8") for members in pipe.execute() for n in members)
        return self._call("namespaces", run, idempotent=True)

    def _scan(self, pattern: str) -> list[bytes]:
        return list(self.client.scan_iter(match=pattern, count=1000))

    def forget_namespace(self, namespace: str, *, scrub_global: bool = True) -> None:
        """Remove the namespace's keys in one script in its slot (links, documents, explicit
        ids, impressions found by SCAN, its global-shard contribution with ``scrub_global``),
        then the recall-id pointers, then the global fields no namespace holds anywhere. An
        impression written while this runs may survive until its TTL."""
        tag = self.layout.tag(namespace)
        pattern = self.layout.bodies_of(namespace)

        def run() -> None:
            bodies = self._scan(pattern)
            self.client.delete(redis_assoc.key(self.layout, namespace))  # co-use edges, first
            keys: list[str | bytes] = [self.layout.key(tag, k, namespace) for k in ("l", "d", "x")]
            keys += [self.layout.key(tag, kind) for kind in ("g", "n", "f", "c")]
            keys += bodies
            gone = self._send(redis_ops.Script("FORGET", keys, [namespace, "1" if scrub_global else "0"]))
            if bodies:
                pipe = self.client.pipeline(transaction=False)
                for body in bodies:
                    pipe.delete(self.layout.pointer_key(KeyLayout.split_body_key(body)[1]))
                pipe.execute()
            if gone:
                pipe = self.client.pipeline(transaction=False)
                for key in self.layout.shard_keys("g"):
                    pipe.hmget(key, gone)
                held = sum((unpack(r, 3)[:, 2] for r in pipe.execute()), np.zeros(len(gone)))
                unheld = [f for f, count in zip(gone, held.tolist()) if count <= 0]
                if unheld:
                    for key in self.layout.shard_keys("g"):
                        self._send(redis_ops.Script("DROP_UNHELD", [key], unheld))
            self.cache.clear()
        self._call("forget_namespace", run, idempotent=False)

    def stats(self) -> dict[str, int]:
        def run() -> dict[str, int]:
            names = self.namespaces()
            pipe = self.client.pipeline(transaction=False)
            for ns in names:
                tag = self.layout.tag(ns)
                pipe.hlen(self.layout.key(tag, "l", ns))
                pipe.hlen(self.layout.key(tag, "d", ns))
                pipe.hexists(self.layout.key(tag, "d", ns), "")  # its feedback count
            for t in self.layout.tags:
                pipe.get(self.layout.key(t, "c"))
            for t in self.layout.tags:
                pipe.zcard(self.layout.key(t, "f"))
            replies = pipe.execute()
            counts, at = replies[:3 * len(names)], 3 * len(names)
            fed = sum(replies[at + len(self.layout.tags):])
            impressions = len(self._scan(self.layout.every_body()))
            return {
                "namespaces": len(names),
                "links": sum(counts[0::3]),
                "global_links": len(self.list_links(None)[0]),
                "documents": sum(counts[1::3]) - sum(map(bool, counts[2::3])),
                "impressions": impressions,
                "feedbacks": sum(int(c or 0) for c in replies[at:at + len(self.layout.tags)]),
                # (no cap: each expires on its own after impression_ttl_s)
                "open_impressions": max(impressions - fed, 0),
            }
        return self._call("stats", run, idempotent=True)

    def memory_usage(self, namespace: str) -> dict[str, int | str]:
        """Bytes Redis uses (``MEMORY USAGE``, key included) for a namespace's links hash and
        its used documents' hash, with their field counts and encodings (``listpack`` while
        small)."""
        def run() -> dict[str, int | str]:
            out: dict[str, int | str] = {}
            for kind, name in (("l", "links"), ("d", "documents")):
                key = self.layout.ns_key(kind, namespace)
                encoding = self.client.object("encoding", key) or b""
                label = "" if name == "links" else "doc_"
                out[f"{label}bytes"] = int(self.client.memory_usage(key, samples=0) or 0)
                out[name] = int(self.client.hlen(key)) - (
                    name == "documents" and bool(self.client.hexists(key, "")))
                out[f"{label}encoding"] = encoding.decode() if isinstance(encoding, bytes) \
                    else str(encoding)
            return out
        return self._call("memory_usage", run, idempotent=True)

    def clear(self) -> int:
        """Delete every key under this state's prefix (tests and ``state copy`` targets)."""
        def run() -> int:
            keys = self._scan(self.layout.every_key())
            for key in keys:
                self.client.delete(key)
            return len(keys)
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
        def run() -> list[tuple[str, str, bytes]]:
            keys = sorted(self._scan(self.layout.every_body()))
            pipe = self.client.pipeline(transaction=False)
            for key in keys:
                pipe.get(key)
            out = []
            for key, body in zip(keys, pipe.execute()):
                if body is not None:
                    ns, rid = KeyLayout.split_body_key(key)
                    out.append((rid, ns, body))
            return out
        return self._call("iter_impressions", run, idempotent=True)

    def import_state(self, dump: StateDump) -> None:
        """Write a whole state (from :func:`heaprank.state.copy.export_state`) into this empty one.

        Each global shard gets the sums of its own namespaces' links; evidence no namespace holds
        any more (left by a forget without scrub) goes to the shard of the first namespace with
        the feature, so the shards still add up to the copied global layer.
        """
        shard_sums: dict[str, dict[str, list[float]]] = {t: {} for t in self.layout.tags}
        for ns, (features, pos, neg) in sorted(dump.links.items()):
            sums = shard_sums[self.layout.tag(ns)]
            for f, p, n in zip(features, pos.tolist(), neg.tolist()):
                if f.startswith(OWN_PREFIX):  # a document's feature stays its namespace's
                    continue
                row = sums.setdefault(f, [0.0, 0.0, 0.0])
                row[0] += p
                row[1] += n
                row[2] += 1
        gf, gpos, gneg = dump.global_links
        first = {f: t for t in self.layout.tags for f in shard_sums[t]}
        for f, p, n in zip(gf, gpos.tolist(), gneg.tolist()):
            t = first.get(f, self.layout.tags[0])
            row = shard_sums[t].setdefault(f, [0.0, 0.0, 0.0])
            held = [shard_sums[u][f] for u in self.layout.tags if f in shard_sums[u]]
            row[0] += p - sum(h[0] for h in held)
            row[1] += n - sum(h[1] for h in held)
        now_ms = time.time() * 1000

        def run() -> None:
            pipe = self.client.pipeline(transaction=False)
            for t, sums in shard_sums.items():
                if sums:
                    pipe.hset(self.layout.key(t, "g"), mapping={
                        f: np.array(v, dtype="<f8").tobytes() for f, v in sums.items()})
            for ns, (features, pos, neg) in dump.links.items():
                tag = self.layout.tag(ns)
                if features:
                    packed = np.column_stack([pos, neg]).astype("<f8")
                    pipe.hset(self.layout.key(tag, "l", ns), mapping={
                        f: packed[j].tobytes() for j, f in enumerate(features)})
                pipe.sadd(self.layout.key(tag, "n"), ns)
            for ns, rows in dump.docs.items():
                if rows:
                    pipe.hset(self.layout.ns_key("d", ns), mapping={
                        i: np.array([last, uses], dtype="<f8").tobytes() for i, last, uses in rows})
            for ns, edge_rows in dump.edges.items():
                pipe.hset(redis_assoc.key(self.layout, ns), mapping=redis_assoc.adjacency(edge_rows))
            for rid, ns, body in dump.impressions:
                fed = any(codec.verdicts_of(body))
                expire_ms = int((recall_born_s(rid) + self.impression_ttl_s) * 1000)
                if not fed and expire_ms <= now_ms:
                    continue
                tag, ttl, body_key = self.layout.tag(ns), None if fed else expire_ms, \
                    self.layout.body_key(ns, rid)
                pipe.set(body_key, body, pxat=ttl)
                pipe.set(self.layout.pointer_key(rid), f"{tag}:{ns}", pxat=ttl)
                if fed:
                    pipe.zadd(self.layout.key(tag, "f"), {body_key: int(recall_born_s(rid) * 1000)})
            pipe.set(self.layout.key(self.layout.tags[0], "c"), dump.feedbacks)
            pipe.execute()
        self._call("import_state", run, idempotent=True)

    def close(self) -> None:
        """Release the connection pool (an async twin: :meth:`aclose_loop` on its loop)."""
        self.client.close()

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
