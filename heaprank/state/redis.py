"""Redis state: one learned state shared by many workers and hosts, on one server or a Cluster.

Key layout (``P`` the prefix, ``t`` the hash tag of global shard ``s = crc32(ns) mod N``)::

    P:{t}:l:<ns>          hash  feature -> <dd> pos, neg          (a namespace's links)
    P:{t}:d:<ns>          hash  doc id -> <dd> last used, uses    (used documents only)
    P:{t}:x:<ns>          hash  explicit feedback id -> recall id (expires with its newest)
    P:{t}:i:<ns>:<rid>    string  the codec bytes of an impression (TTL until its first feedback)
    P:{t}:a:<ns>          hash  doc id -> its co-use edges ("" -> their count; redis_assoc.py)
    P:{t}:g               hash  feature -> <ddd> pos, neg, namespaces holding it   (global shard s)
    P:{t}:n               set   the namespaces of shard s with evidence
    P:{t}:f               zset  impressions of shard s that received feedback, by age
    P:{t}:c               string  feedbacks applied in shard s
    P:r:{<rid>}           string  "<t>:<ns>": which namespace holds a recall id (TTL as its body)
    P:meta                string  N, so processes with another N are refused

A namespace's keys and its global shard share one slot, so a feedback is ONE Lua script that
reads the impression's verdicts, checks idempotence per item, computes the EM credit, and writes
the namespace's links, its shard of the global layer, the used documents and the verdict bytes.

Consistency: on one server the script also reads the other global shards, so every feedback sees
the links exactly as they were. In a Cluster the other shards' counts are read by the client just
before the script (one round trip) and passed in: the pooled part of the credit may miss
feedbacks of other shards applied in that window (bounded staleness of one round trip); the
namespace's own counts and its shard are always exact, and no increment is ever lost or doubled.
A rerank reads in one round trip: one script on a server (which sums the global shards), a
pipeline in a Cluster (one request per node); with
``global_cache_ttl_s > 0`` the pooled counts may be that many seconds old.

Every Redis error or timeout raises :class:`~heaprank.errors.StateUnavailableError`. Reads and
feedback (idempotent per recall id and item) are retried with exponential backoff; writing an
impression and forgetting are not. ``Reranker.arerank``/``afeedback`` run this client in a worker
thread, so an event loop never blocks on Redis.
"""

from __future__ import annotations

import binascii
import heapq
import re
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import numpy as np

from .._optional import require
from ..errors import ConfigError, FeedbackError, StateUnavailableError
from . import codec, redis_assoc, redis_lua
from .base import (
    CreditFn,
    DocStats,
    FeedbackBatch,
    FeedbackOutcome,
    Impression,
    LinkCounts,
    recall_born_s,
    recall_key,
)
from .edges import EdgeRows

if TYPE_CHECKING:
    from .copy import StateDump

DAY_S = 86_400.0
_SLOTS = 16_384
_PRUNE_EVERY = 256
_LOG_PAGE = 512
_ZERO2 = bytes(16)
_ZERO3 = bytes(24)
_GLOB = re.compile(r"([*?\[\]\\])")
T = TypeVar("T")

#: Options a URL may carry in its query string, with their types.
URL_OPTIONS = {"prefix": str, "global_shards": int, "timeout": float, "global_cache_ttl": float,
               "max_impressions": int, "impression_ttl": float}


def key_slot(key: str) -> int:
    """The Redis Cluster slot of a key (CRC16-XMODEM of its hash tag, mod 16384)."""
    start = key.find("{")
    if start >= 0:
        end = key.find("}", start + 1)
        if end > start + 1:
            key = key[start + 1:end]
    return binascii.crc_hqx(key.encode("utf-8"), 0) % _SLOTS


def shard_tags(n: int) -> list[str]:
    """One hash tag per global shard, each in its own 1/n of the slot range, so shards spread
    evenly over a Cluster's masters (which own contiguous slot ranges)."""
    tags = []
    for s in range(n):
        low, high = s * _SLOTS // n, (s + 1) * _SLOTS // n
        k = 0
        while not low <= key_slot(f"{{{s}.{k}}}") < high:
            k += 1
        tags.append(f"{s}.{k}")
    return tags


def _is_cluster(client: Any) -> bool:
    cluster = require("redis.cluster", extra="redis", feature="RedisState")
    return isinstance(client, cluster.RedisCluster)


def _unpack(values: Iterable[bytes | None], width: int) -> np.ndarray:
    """Packed doubles (missing values as zeros) as a (len, width) float64 array."""
    zero = bytes(8 * width)
    raw = b"".join(v or zero for v in values)
    return np.frombuffer(raw, dtype="<f8").reshape(-1, width).astype(np.float64)


class RedisState:
    """Learned state in Redis (a server, or a Cluster with ``redis+cluster://``).

    Args:
        url: ``redis://host:port/db``, ``rediss://...`` (TLS), ``unix:///path.sock`` or
            ``redis+cluster://host:port``; options of this class may be given in the query string.
        client: An existing ``redis.Redis`` or ``redis.cluster.RedisCluster`` (with
            ``decode_responses=False``) instead of ``url``; its own retry settings apply.
        prefix: Every key starts with it (several states may share a server).
        global_shards: N hashes the global layer is spread over (fixed for a state's lifetime).
        timeout_s: Socket connect and read timeout; past it a call raises StateUnavailableError.
        retries: Retries of idempotent calls (reads, feedback) after a connection error.
        global_cache_ttl_s: Keep pooled counts read by a rerank this long in this process (0: off).
        max_impressions: Impressions that received feedback to keep (oldest dropped by prune).
        impression_ttl_s: Impressions without feedback expire after this long.
    """

    def __init__(self, url: str | None = None, *, client: Any = None, prefix: str = "heaprank",
                 global_shards: int = 8, timeout_s: float = 2.0, retries: int = 2,
                 global_cache_ttl_s: float = 0.0, max_impressions: int = 100_000,
                 impression_ttl_s: float = DAY_S) -> None:
        if (url is None) == (client is None):
            raise ConfigError("RedisState: pass exactly one of url or client")
        if isinstance(global_shards, bool) or not isinstance(global_shards, int) \
                or not 1 <= global_shards <= 1024:
            raise ValueError("global_shards: must be an int in [1, 1024]")
        if isinstance(max_impressions, bool) or not isinstance(max_impressions, int) \
                or max_impressions < 1:
            raise ValueError("max_impressions: must be an int >= 1")
        if not (isinstance(impression_ttl_s, (int, float)) and impression_ttl_s > 0):
            raise ValueError("impression_ttl_s: must be > 0")
        if not prefix or any(c in prefix for c in "{}"):
            raise ValueError("prefix: must be non-empty, without { or }")
        self._redis = require("redis", extra="redis", feature="RedisState")
        self.prefix = prefix
        self.n_shards = global_shards
        self.timeout_s = float(timeout_s)
        self.retries = int(retries)
        self.global_cache_ttl_s = float(global_cache_ttl_s)
        self.max_impressions = max_impressions
        self.impression_ttl_s = float(impression_ttl_s)
        self.client = client if client is not None else self._connect(url or "")
        self.cluster = _is_cluster(self.client)
        if self.client.get_encoder().decode_responses:
            raise ConfigError("RedisState: the client must use decode_responses=False")
        self._tags = shard_tags(global_shards)
        self._cache: dict[str, tuple[float, float, float]] = {}
        self._cache_lock = threading.Lock()
        self._feedbacks = 0
        self._scripts = {name: self.client.register_script(getattr(redis_lua, name))
                         for name in ("READ_LOCAL", "PUT", "GET_LOCAL", "FEEDBACK", "FORGET", "DROP_UNHELD",
                                      "DROP_FED")}
        self._scripts.update({name: self.client.register_script(getattr(redis_assoc, name))
                              for name in ("READ_WITH_EDGES", "FEEDBACK_WITH_CO_USE")})
        self._check_meta()
        # Loaded up front on every primary: redis-py leaks a connection when a cluster answers
        # NOSCRIPT, so that answer is kept for a server that restarted since.
        self._call("load scripts", lambda: [self.client.script_load(s.script)
                                            for s in self._scripts.values()], idempotent=True)

    def __repr__(self) -> str:
        kind = "cluster" if self.cluster else "server"
        return f"RedisState({kind}, prefix={self.prefix!r}, global_shards={self.n_shards})"

    # ------------------------------------------------------------ connection

    def _connect(self, url: str) -> Any:
        retry = self._redis.retry.Retry(self._redis.backoff.NoBackoff(), 0)
        options = {"socket_timeout": self.timeout_s, "socket_connect_timeout": self.timeout_s,
                   "retry": retry, "decode_responses": False}
        if url.startswith("redis+cluster://"):
            cluster = require("redis.cluster", extra="redis", feature="RedisState")
            return cluster.RedisCluster.from_url("redis://" + url[len("redis+cluster://"):],
                                                 **options)
        options["retry_on_timeout"] = False
        return self._redis.Redis.from_url(url, **options)

    def _call(self, what: str, fn: Callable[[], T], *, idempotent: bool) -> T:
        """Run ``fn``; map every Redis error to StateUnavailableError, retrying idempotent
        calls after connection errors and timeouts with exponential backoff."""
        errors = self._redis.exceptions
        transient = (errors.ConnectionError, errors.TimeoutError, errors.ClusterDownError,
                     errors.TryAgainError, errors.ReadOnlyError)
        attempts = 1 + (self.retries if idempotent else 0)
        for attempt in range(attempts):
            try:
                return fn()
            except errors.RedisError as exc:
                if isinstance(exc, transient) and attempt + 1 < attempts:
                    time.sleep(min(0.05 * 2 ** attempt, self.timeout_s))
                    continue
                raise StateUnavailableError(f"Redis state: {what} failed: "
                                            f"{type(exc).__name__}: {exc}") from None
            except OSError as exc:  # a socket torn down mid-reply
                if attempt + 1 < attempts:
                    time.sleep(min(0.05 * 2 ** attempt, self.timeout_s))
                    continue
                raise StateUnavailableError(f"Redis state: {what} failed: "
                                            f"{type(exc).__name__}: {exc}") from None
        raise AssertionError("unreachable")

    def _check_meta(self) -> None:
        key = f"{self.prefix}:meta"

        def check() -> None:
            self.client.set(key, str(self.n_shards), nx=True)
            stored = self.client.get(key)
            if stored is not None and int(stored) != self.n_shards:
                raise ConfigError(f"RedisState: prefix {self.prefix!r} holds a state with "
                                  f"global_shards={int(stored)}, not {self.n_shards}")
        self._call("open", check, idempotent=True)

    # ------------------------------------------------------------------ keys

    def _tag(self, namespace: str) -> str:
        return self._tags[zlib.crc32(namespace.encode("utf-8")) % self.n_shards]

    def _key(self, tag: str, kind: str, namespace: str | None = None) -> str:
        base = f"{self.prefix}:{{{tag}}}:{kind}"
        return base if namespace is None else f"{base}:{namespace}"

    def _body_key(self, namespace: str, recall_id: str) -> str:
        return f"{self._key(self._tag(namespace), 'i', namespace)}:{recall_id}"

    def _pointer_key(self, recall_id: str) -> str:
        return f"{self.prefix}:r:{{{recall_id}}}"

    def _global_keys(self) -> list[str]:
        return [self._key(t, "g") for t in self._tags]

    # ------------------------------------------------------------------ reads

    def _pooled(self, pipe: Any, features: Sequence[str]) -> Callable[[list[Any]], np.ndarray]:
        """Queue the reads of the pooled counts of ``features`` (those not cached) on ``pipe``;
        return a function that turns the replies into (len, 2) sums."""
        now = time.monotonic()
        fresh: dict[str, tuple[float, float]] = {}
        if self.global_cache_ttl_s > 0:
            with self._cache_lock:
                for f in features:
                    hit = self._cache.get(f)
                    if hit is not None and hit[2] > now:
                        fresh[f] = (hit[0], hit[1])
        missing = sorted({f for f in features if f not in fresh})
        if missing:
            for key in self._global_keys():
                pipe.hmget(key, missing)

        def finish(replies: list[Any]) -> np.ndarray:
            if missing:
                total = sum((_unpack(r, 3)[:, :2] for r in replies), np.zeros((len(missing), 2)))
                got = dict(zip(missing, map(tuple, total.tolist())))
                if self.global_cache_ttl_s > 0:
                    expires = now + self.global_cache_ttl_s
                    with self._cache_lock:
                        self._cache.update((f, (p, n, expires)) for f, (p, n) in got.items())
                fresh.update(got)
            return np.array([fresh[f] for f in features], dtype=np.float64).reshape(-1, 2)
        return finish

    def read(self, namespace: str, features: Sequence[str],
             ids: Sequence[str]) -> tuple[LinkCounts, DocStats]:
        counts, docs, _ = self._read(namespace, features, ids, False)
        return counts, docs

    def read_with_edges(self, namespace: str, features: Sequence[str],
                        ids: Sequence[str]) -> tuple[LinkCounts, DocStats, EdgeRows]:
        return self._read(namespace, features, ids, True)

    def _read(self, namespace: str, features: Sequence[str], ids: Sequence[str],
              with_edges: bool) -> tuple[LinkCounts, DocStats, EdgeRows]:
        features, ids = list(features), list(ids)
        tag = self._tag(namespace)
        adjacency = [redis_assoc.key(self, namespace)] if with_edges else []

        if not self.cluster and self.global_cache_ttl_s <= 0:  # one script sums the shards
            keys = [self._key(tag, "l", namespace), self._key(tag, "d", namespace),
                    *self._global_keys(), *adjacency]
            script = self._scripts["READ_WITH_EDGES" if with_edges else "READ_LOCAL"]

            def run_local() -> tuple[LinkCounts, DocStats, EdgeRows]:
                reply = script(keys=keys, args=[len(features), *features, *ids])
                own, pooled, docs = (np.frombuffer(b, dtype="<f8").reshape(-1, 2).astype(np.float64)
                                     for b in reply[:3])
                return (LinkCounts(own[:, 0].copy(), own[:, 1].copy(), pooled[:, 0].copy(),
                                   pooled[:, 1].copy()),
                        DocStats(docs[:, 0].copy(), docs[:, 1].copy()),
                        redis_assoc.edge_rows(ids, reply[3]) if with_edges else EdgeRows.empty())
            return self._call("read", run_local, idempotent=True)

        def run() -> tuple[LinkCounts, DocStats, EdgeRows]:
            pipe = self.client.pipeline(transaction=False)
            if features:
                pipe.hmget(self._key(tag, "l", namespace), features)
            if ids:
                pipe.hmget(self._key(tag, "d", namespace), ids)
                for key in adjacency:
                    pipe.hmget(key, ids)
            finish = self._pooled(pipe, features) if features else None
            replies = pipe.execute()
            own = _unpack(replies.pop(0), 2) if features else np.zeros((0, 2))
            docs = replies.pop(0) if ids else []
            rows = redis_assoc.edge_rows(ids, replies.pop(0)) if adjacency and ids else \
                EdgeRows.empty()
            pooled = finish(replies) if finish else np.zeros((0, 2))
            last = np.array([np.nan if d is None else 0.0 for d in docs])
            stats = _unpack(docs, 2)
            used = ~np.isnan(last)
            last[used] = stats[used, 0]
            return (LinkCounts(own[:, 0].copy(), own[:, 1].copy(), pooled[:, 0].copy(),
                               pooled[:, 1].copy()),
                    DocStats(last, stats[:, 1].copy()), rows)
        return self._call("read", run, idempotent=True)

    def list_edges(self, namespace: str) -> list[tuple[str, str, float, float, float]]:
        return self._call("list_edges", lambda: redis_assoc.list_edges(
            self.client, redis_assoc.key(self, namespace)), idempotent=True)

    def read_links(self, namespace: str, features: Sequence[str]) -> LinkCounts:
        return self.read(namespace, features, [])[0]

    def read_docs(self, namespace: str, ids: Sequence[str]) -> DocStats:
        return self.read(namespace, [], ids)[1]

    # ------------------------------------------------------------- impressions

    def put_impression(self, impression: Impression, *, feedback_id: str | None = None) -> str | None:
        rid, ns = impression.recall_id, impression.namespace
        if recall_key(rid) is None:
            raise ValueError(f"recall_id: {rid!r} is not a heaprank recall id")
        expire_ms = int((recall_born_s(rid) + self.impression_ttl_s) * 1000)
        if expire_ms <= time.time() * 1000:
            return rid  # already past its time to live: kept nowhere, as if expired at once
        tag = self._tag(ns)
        body_key = self._body_key(ns, rid)
        keys = [body_key, self._key(tag, "x", ns)]
        if not self.cluster:
            keys.append(self._pointer_key(rid))
        args = [impression.encode(), expire_ms, feedback_id or "", body_key[:-len(rid)], rid,
                f"{tag}:{ns}"]

        def run() -> str | None:
            if self.cluster:  # claim the recall id first, in its own slot
                if not self.client.set(self._pointer_key(rid), f"{tag}:{ns}", nx=True,
                                       pxat=expire_ms):
                    return None
            reply = self._scripts["PUT"](keys=keys, args=args)
            outcome = reply[0].decode()
            if outcome != "new" and self.cluster:
                self.client.delete(self._pointer_key(rid))
            if outcome == "held":
                return str(reply[1].decode())
            return rid if outcome == "new" else None
        return self._call("put_impression", run, idempotent=False)

    def get_impression(self, recall_id: str) -> Impression | None:
        if recall_key(recall_id) is None:
            return None

        def run() -> tuple[bytes, bytes] | None:
            pointer = self._pointer_key(recall_id)
            if not self.cluster:
                found = self._scripts["GET_LOCAL"](keys=[pointer], args=[self.prefix, recall_id])
                return None if found is None else (found[0], found[1])
            at = self.client.get(pointer)
            if at is None:
                return None
            ns = at.split(b":", 1)[1]
            body = self.client.get(self._body_key(ns.decode("utf-8"), recall_id))
            return None if body is None else (ns, body)
        found = self._call("get_impression", run, idempotent=True)
        if found is None:
            return None
        return Impression.decode(recall_id, found[0].decode("utf-8"), found[1])

    def prune(self) -> None:
        """Drop the oldest impressions with feedback past ``max_impressions`` (those without
        feedback expire by themselves)."""
        def run() -> None:
            fed = [self._key(t, "f") for t in self._tags]
            pipe = self.client.pipeline(transaction=False)
            for key in fed:
                pipe.zcard(key)
            excess = sum(pipe.execute()) - self.max_impressions
            if excess <= 0:
                return
            pipe = self.client.pipeline(transaction=False)
            for key in fed:
                pipe.zrange(key, 0, excess - 1, withscores=True)
            oldest = sorted((score, member, s) for s, rows in enumerate(pipe.execute())
                            for member, score in rows)[:excess]
            by_shard: dict[int, list[bytes]] = {}
            for _, member, s in oldest:
                by_shard.setdefault(s, []).append(member)
            for s, bodies in by_shard.items():
                self._scripts["DROP_FED"](keys=[fed[s], *bodies])
            pipe = self.client.pipeline(transaction=False)
            for _, member, _ in oldest:
                pipe.delete(self._pointer_key(member.decode("utf-8")[-16:]))
            pipe.execute()
        self._call("prune", run, idempotent=True)

    def feedback_log(self, namespace: str | None = None) -> Iterator[Impression]:
        """Impressions with feedback of ``namespace`` (``None``: all), oldest recall first: the
        shards' feedback sets (``P:{t}:f``) read in pages and merged by age."""
        tags = self._tags if namespace is None else [self._tag(namespace)]
        pages = [self._fed_pages(tag, namespace) for tag in tags]
        for _, rid, name, body in heapq.merge(*pages):
            yield Impression.decode(rid, name, body)

    def _fed_pages(self, tag: str, namespace: str | None) -> Iterator[tuple[float, str, str, bytes]]:
        """``(age score, recall id, namespace, body)`` of one shard's impressions with feedback,
        by score then recall id; paged by score so that pruning meanwhile skips nothing still
        there."""
        fed, head = self._key(tag, "f"), len(self._key(tag, "i")) + 1
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
                key = member.decode("utf-8")
                name = key[head:-17]
                if body is not None and (namespace is None or name == namespace):
                    tied.append((score, key[-16:], name, body))
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
        ns, rid = batch.namespace, batch.recall_id
        if recall_key(rid) is None:
            raise FeedbackError(f"recall_id {rid!r}: unknown (never recorded, expired or pruned)")
        tag = self._tag(ns)
        features = sorted({f for item in batch.items for f in item.features})
        index = {f: j for j, f in enumerate(features, start=1)}
        keys = [self._body_key(ns, rid), self._key(tag, "l", ns), self._key(tag, "d", ns),
                self._key(tag, "g"), self._key(tag, "n"), self._key(tag, "f"), self._key(tag, "c")]
        others = [k for t, k in zip(self._tags, self._global_keys()) if t != tag]
        if not self.cluster:
            keys += [self._pointer_key(rid), *others]
        head: list[Any] = [ns, repr(float(batch.time)), repr(batch.a0), repr(batch.b0),
                           repr(batch.kappa), "1" if batch.em else "0", len(batch.items),
                           len(features), "0" if self.cluster else "1",
                           0 if self.cluster else len(others),
                           int(recall_born_s(rid) * 1000), *features]
        tail: list[Any] = []
        for item in batch.items:
            tail += [item.rank, "1" if item.used else "0", repr(float(item.reject_weight)),
                     item.id, len(item.features), *(index[f] for f in item.features)]
        needs_pool = self.cluster and len(others) > 0 and batch.em and any(i.used for i in batch.items)
        script = self._scripts["FEEDBACK"]
        if batch.co_use is not None:  # the same script, then the co-use edges (redis_assoc)
            script = self._scripts["FEEDBACK_WITH_CO_USE"]
            keys.append(redis_assoc.key(self, ns))
            tail += redis_assoc.feedback_extra(batch)

        def run() -> list[Any]:
            pooled = np.zeros((len(features), 2))
            if needs_pool:  # the other shards, read just before (bounded staleness)
                pipe = self.client.pipeline(transaction=False)
                for key in others:
                    pipe.hmget(key, features)
                for reply in pipe.execute():
                    pooled += _unpack(reply, 3)[:, :2]
            args = head + [repr(v) for v in pooled.ravel().tolist()] + tail
            try:
                reply = script(keys=keys, args=args)
            except self._redis.exceptions.ResponseError as exc:
                if str(exc).startswith("HEAPRANK_"):
                    return [str(exc)]
                raise
            if self.cluster and (reply[0] or reply[1]):  # again on a retry: idempotent
                self.client.persist(self._pointer_key(rid))
            return list(reply)
        reply = self._call("feedback", run, idempotent=True)
        if isinstance(reply[0], str):
            self._feedback_error(batch, reply[0])
        applied = tuple(batch.items[i].id for i in reply[0])
        done = tuple(batch.items[i].id for i in reply[1])
        if applied:
            self._feedbacks += 1
            if self._feedbacks % _PRUNE_EVERY == 1:
                self.prune()
        return FeedbackOutcome(rid, applied, done)

    @staticmethod
    def _feedback_error(batch: FeedbackBatch, message: str) -> None:
        if message.startswith("HEAPRANK_CONFLICT"):
            _, index, stored = message.split()
            was = "used" if int(stored) == codec.USED else "ignored"
            raise FeedbackError(f"recall {batch.recall_id}: id {batch.items[int(index)].id!r} was "
                                f"already recorded as {was}; feedback for an impression cannot "
                                f"be changed")
        raise FeedbackError(f"recall_id {batch.recall_id!r}: unknown (never recorded, expired "
                            f"or pruned)")

    # ------------------------------------------------------------------ audit

    def list_links(self, namespace: str | None) -> tuple[list[str], np.ndarray, np.ndarray]:
        def run() -> tuple[list[str], np.ndarray, np.ndarray]:
            if namespace is not None:
                rows = self.client.hgetall(self._key(self._tag(namespace), "l", namespace))
                names = sorted(rows)
                arr = _unpack([rows[f] for f in names], 2)
                return [f.decode("utf-8") for f in names], arr[:, 0].copy(), arr[:, 1].copy()
            total: dict[bytes, np.ndarray] = {}
            pipe = self.client.pipeline(transaction=False)
            for key in self._global_keys():
                pipe.hgetall(key)
            for rows in pipe.execute():
                for f, v in rows.items():
                    value = _unpack([v], 3)[0]
                    total[f] = total[f] + value if f in total else value
            names = sorted(f for f, v in total.items() if v[2] > 0)
            arr = np.array([total[f][:2] for f in names], dtype=np.float64).reshape(-1, 2)
            return [f.decode("utf-8") for f in names], arr[:, 0].copy(), arr[:, 1].copy()
        return self._call("list_links", run, idempotent=True)

    def namespaces(self) -> list[str]:
        def run() -> list[str]:
            pipe = self.client.pipeline(transaction=False)
            for t in self._tags:
                pipe.smembers(self._key(t, "n"))
            return sorted(n.decode("utf-8") for members in pipe.execute() for n in members)
        return self._call("namespaces", run, idempotent=True)

    def _scan(self, pattern: str) -> list[bytes]:
        return list(self.client.scan_iter(match=pattern, count=1000))

    def forget_namespace(self, namespace: str, *, scrub_global: bool = True) -> None:
        """Remove the namespace's keys in one script in its slot (links, documents, explicit
        ids, impressions found by SCAN, its global-shard contribution with ``scrub_global``),
        then the recall-id pointers, then the global fields no namespace holds anywhere. An
        impression written while this runs may survive until its TTL."""
        tag = self._tag(namespace)
        pattern = _GLOB.sub(r"\\\1", f"{self._key(tag, 'i', namespace)}:") + "?" * 16

        def run() -> None:
            bodies = self._scan(pattern)
            self.client.delete(redis_assoc.key(self, namespace))  # co-use edges, first
            keys: list[str | bytes] = [self._key(tag, k, namespace) for k in ("l", "d", "x")]
            keys += [self._key(tag, "g"), self._key(tag, "n"), self._key(tag, "f"), *bodies]
            gone = self._scripts["FORGET"](keys=keys, args=[namespace, "1" if scrub_global else "0"])
            if bodies:
                pipe = self.client.pipeline(transaction=False)
                for body in bodies:
                    pipe.delete(self._pointer_key(body.decode("utf-8")[-16:]))
                pipe.execute()
            if gone:
                pipe = self.client.pipeline(transaction=False)
                for key in self._global_keys():
                    pipe.hmget(key, gone)
                held = sum((_unpack(r, 3)[:, 2] for r in pipe.execute()), np.zeros(len(gone)))
                unheld = [f for f, count in zip(gone, held.tolist()) if count <= 0]
                if unheld:
                    for key in self._global_keys():
                        self._scripts["DROP_UNHELD"](keys=[key], args=unheld)
            with self._cache_lock:
                self._cache.clear()
        self._call("forget_namespace", run, idempotent=False)

    def stats(self) -> dict[str, int]:
        def run() -> dict[str, int]:
            names = self.namespaces()
            pipe = self.client.pipeline(transaction=False)
            for ns in names:
                tag = self._tag(ns)
                pipe.hlen(self._key(tag, "l", ns))
                pipe.hlen(self._key(tag, "d", ns))
            for t in self._tags:
                pipe.get(self._key(t, "c"))
            replies = pipe.execute()
            counts = replies[:2 * len(names)]
            impressions = len(self._scan(_GLOB.sub(r"\\\1", self.prefix) + ":{*}:i:*"))
            return {
                "namespaces": len(names),
                "links": sum(counts[0::2]),
                "global_links": len(self.list_links(None)[0]),
                "documents": sum(counts[1::2]),
                "impressions": impressions,
                "feedbacks": sum(int(c or 0) for c in replies[2 * len(names):]),
            }
        return self._call("stats", run, idempotent=True)

    def memory_usage(self, namespace: str) -> dict[str, int | str]:
        """Bytes Redis uses for a namespace's links hash (``MEMORY USAGE``), its link count and
        its encoding (``listpack`` while small)."""
        key = self._key(self._tag(namespace), "l", namespace)

        def run() -> dict[str, int | str]:
            encoding = self.client.object("encoding", key) or b""
            return {"bytes": int(self.client.memory_usage(key, samples=0) or 0),
                    "links": int(self.client.hlen(key)),
                    "encoding": encoding.decode() if isinstance(encoding, bytes) else str(encoding)}
        return self._call("memory_usage", run, idempotent=True)

    def clear(self) -> int:
        """Delete every key under this state's prefix (tests and ``state copy`` targets)."""
        def run() -> int:
            keys = self._scan(_GLOB.sub(r"\\\1", self.prefix) + ":*")
            for key in keys:
                self.client.delete(key)
            return len(keys)
        return self._call("clear", run, idempotent=True)

    # ------------------------------------------------------- export (state copy)

    def iter_docs(self, namespace: str) -> list[tuple[str, float, float]]:
        """``(id, last_used, use_count)`` of each used document of ``namespace``."""
        rows = self._call("iter_docs", lambda: self.client.hgetall(
            self._key(self._tag(namespace), "d", namespace)), idempotent=True)
        return [(i.decode("utf-8"), *map(float, _unpack([v], 2)[0])) for i, v in sorted(rows.items())]

    def iter_impressions(self) -> list[tuple[str, str, bytes]]:
        """``(recall_id, namespace, codec bytes)`` of every live impression."""
        def run() -> list[tuple[str, str, bytes]]:
            keys = sorted(self._scan(_GLOB.sub(r"\\\1", self.prefix) + ":{*}:i:*"))
            pipe = self.client.pipeline(transaction=False)
            for key in keys:
                pipe.get(key)
            out = []
            for key, body in zip(keys, pipe.execute()):
                name = key.decode("utf-8")
                head = name.index("}:i:") + 4
                if body is not None:
                    out.append((name[-16:], name[head:-17], body))
            return out
        return self._call("iter_impressions", run, idempotent=True)

    def import_state(self, dump: StateDump) -> None:
        """Write a whole state (from :func:`heaprank.state.copy.export_state`) into this empty one.

        Each global shard gets the sums of its own namespaces' links; evidence no namespace holds
        any more (left by a forget without scrub) goes to the shard of the first namespace with
        the feature, so the shards still add up to the copied global layer.
        """
        shard_sums: dict[str, dict[str, list[float]]] = {t: {} for t in self._tags}
        for ns, (features, pos, neg) in sorted(dump.links.items()):
            sums = shard_sums[self._tag(ns)]
            for f, p, n in zip(features, pos.tolist(), neg.tolist()):
                row = sums.setdefault(f, [0.0, 0.0, 0.0])
                row[0] += p
                row[1] += n
                row[2] += 1
        gf, gpos, gneg = dump.global_links
        first = {f: t for t in self._tags for f in shard_sums[t]}
        for f, p, n in zip(gf, gpos.tolist(), gneg.tolist()):
            t = first.get(f, self._tags[0])
            row = shard_sums[t].setdefault(f, [0.0, 0.0, 0.0])
            held = [shard_sums[u][f] for u in self._tags if f in shard_sums[u]]
            row[0] += p - sum(h[0] for h in held)
            row[1] += n - sum(h[1] for h in held)
        now_ms = time.time() * 1000

        def run() -> None:
            pipe = self.client.pipeline(transaction=False)
            for t, sums in shard_sums.items():
                if sums:
                    pipe.hset(self._key(t, "g"), mapping={
                        f: np.array(v, dtype="<f8").tobytes() for f, v in sums.items()})
            for ns, (features, pos, neg) in dump.links.items():
                tag = self._tag(ns)
                if features:
                    packed = np.column_stack([pos, neg]).astype("<f8")
                    pipe.hset(self._key(tag, "l", ns), mapping={
                        f: packed[j].tobytes() for j, f in enumerate(features)})
                pipe.sadd(self._key(tag, "n"), ns)
            for ns, rows in dump.docs.items():
                if rows:
                    pipe.hset(self._key(self._tag(ns), "d", ns), mapping={
                        i: np.array([last, uses], dtype="<f8").tobytes() for i, last, uses in rows})
            for ns, edge_rows in dump.edges.items():
                pipe.hset(redis_assoc.key(self, ns), mapping=redis_assoc.adjacency(edge_rows))
            for rid, ns, body in dump.impressions:
                fed = any(codec.verdicts_of(body))
                expire_ms = int((recall_born_s(rid) + self.impression_ttl_s) * 1000)
                if not fed and expire_ms <= now_ms:
                    continue
                tag, ttl = self._tag(ns), None if fed else expire_ms
                pipe.set(self._body_key(ns, rid), body, pxat=ttl)
                pipe.set(self._pointer_key(rid), f"{tag}:{ns}", pxat=ttl)
                if fed:
                    pipe.zadd(self._key(tag, "f"), {self._body_key(ns, rid): int(recall_born_s(rid) * 1000)})
            pipe.set(self._key(self._tags[0], "c"), dump.feedbacks)
            pipe.execute()
        self._call("import_state", run, idempotent=True)

    def close(self) -> None:
        """Release the connection pool."""
        self.client.close()

    def __enter__(self) -> RedisState:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def redis_options(url: str) -> tuple[str, dict[str, Any]]:
    """Split a Redis URL into the URL redis-py reads and the options of :class:`RedisState`."""
    parts = urlsplit(url)
    kept, ours = [], {}
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        kind = URL_OPTIONS.get(name)
        if kind is None:
            kept.append((name, value))
            continue
        try:
            parsed = kind(value)
        except ValueError:
            raise ConfigError(f"state: option {name}={value!r} is not a valid {kind.__name__}") from None
        target = {"timeout": "timeout_s", "global_cache_ttl": "global_cache_ttl_s",
                  "impression_ttl": "impression_ttl_s"}.get(name, name)
        ours[target] = parsed
    return urlunsplit(parts._replace(query=urlencode(kept))), ours

