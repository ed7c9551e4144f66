"""The Redis backend's hot-path operations, written once for the sync and the async client.

Each operation is a flow (see :mod:`heaprank._flow`): a generator that yields the requests of
its round trips (:class:`Command`, :class:`Pipeline`, :class:`Script`) and gets their replies,
so :class:`~heaprank.state.redis.backend.RedisState` runs it on ``redis.Redis`` and
:class:`~heaprank.state.redis.async_backend.AsyncRedisState` on ``redis.asyncio``, with the same keys,
scripts, Cluster routing and reply parsing. A request's :meth:`send` returns the reply from a
sync client and an awaitable from an async one.

Cluster routing: on one server a read, a lookup and a feedback are one script each (the script
may touch every key); in a Cluster a script touches one slot, so a rerank reads with a pipeline
(one request per node), the recall-id pointer (its own slot) is claimed and read apart, and a
feedback gets the other global shards' counts from the client one round trip before its script.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..._flow import Call
from ...errors import ConfigError, FeedbackError, StateError
from ...records import (
    LABEL_OF,
    DocStats,
    FeedbackBatch,
    FeedbackOutcome,
    Impression,
    LinkCounts,
    recall_born_s,
    recall_key,
)
from .. import codec
from ..edges import EdgeRows
from . import edges as redis_assoc
from . import lua as redis_lua
from .layout import KeyLayout, unpack

#: Every script the backend runs, by name, with the SHA1 that EVALSHA names it by (the co-use
#: ones wrap READ_LOCAL and FEEDBACK: see :mod:`.edges`).
SCRIPTS = {**{name: getattr(redis_lua, name) for name in
              ("READ_LOCAL", "PUT", "GET_LOCAL", "FEEDBACK", "FORGET", "DROP_UNHELD", "DROP_FED")},
           **{name: getattr(redis_assoc, name) for name in ("READ_WITH_EDGES", "FEEDBACK_WITH_CO_USE")}}
SHAS = {name: hashlib.sha1(body.encode("utf-8")).hexdigest() for name, body in SCRIPTS.items()}


#: One command in its own round trip: a call of the client's method of that name.
Command = Call


@dataclass(frozen=True, slots=True)
class Pipeline:
    """Commands sent together, without a transaction: one round trip (per node in a Cluster)."""

    commands: tuple[Command, ...]

    def send(self, client: Any) -> Any:
        pipe = client.pipeline(transaction=False)
        for command in self.commands:
            command.send(pipe)
        return pipe.execute()


@dataclass(frozen=True, slots=True)
class Script:
    """One of :data:`SCRIPTS` run by its SHA1 on the node of its keys' slot."""

    name: str
    keys: Sequence[str | bytes]
    args: Sequence[Any]

    def send(self, client: Any) -> Any:
        return client.evalsha(SHAS[self.name], len(self.keys), *self.keys, *self.args)

    def load(self, client: Any) -> Any:
        """Load the script (a server that restarted since answers NOSCRIPT)."""
        return client.script_load(SCRIPTS[self.name])


Request = Command | Pipeline | Script
Op = Generator[Request, Any, Any]


class GlobalCache:
    """Pooled counts read by reranks, kept ``ttl_s`` seconds in this process (0: off)."""

    def __init__(self, ttl_s: float) -> None:
        self.ttl_s = float(ttl_s)
        self._rows: dict[str, tuple[float, float, float]] = {}
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.ttl_s > 0

    def fresh(self, features: Sequence[str], now: float) -> dict[str, tuple[float, float]]:
        """The cached counts of ``features`` still within their time to live."""
        if not self.enabled:
            return {}
        out = {}
        with self._lock:
            for f in features:
                hit = self._rows.get(f)
                if hit is not None and hit[2] > now:
                    out[f] = (hit[0], hit[1])
        return out

    def store(self, rows: dict[str, tuple[float, float]], now: float) -> None:
        if self.enabled:
            expires = now + self.ttl_s
            with self._lock:
                self._rows.update((f, (p, n, expires)) for f, (p, n) in rows.items())

    def clear(self) -> None:
        with self._lock:
            self._rows.clear()


def check_layout(layout: KeyLayout, owner: str, read_only: str | None = None) -> Op:
    """Record the number of global shards of a new state; refuse a prefix holding a state with
    another number (its namespaces would be looked for in the wrong shards). With
    ``read_only`` (where the state is, for the message) nothing is written: a prefix without a
    state is a StateError, "no heaprank state at ..."."""
    if read_only is None:
        yield Command("set", (layout.meta, str(layout.n_shards)), {"nx": True})
    stored = yield Command("get", (layout.meta,))
    if stored is None and read_only is not None:
        raise StateError(f"no heaprank state at {read_only} (prefix {layout.prefix!r} holds "
                         f"none)")
    if stored is not None and int(stored) != layout.n_shards:
        raise ConfigError(f"{owner}: prefix {layout.prefix!r} holds a state with "
                          f"global_shards={int(stored)}, not {layout.n_shards}")


def _counts(own: np.ndarray, pooled: np.ndarray) -> LinkCounts:
    return LinkCounts(own[:, 0].copy(), own[:, 1].copy(), pooled[:, 0].copy(), pooled[:, 1].copy())


def read(layout: KeyLayout, cache: GlobalCache, cluster: bool, namespace: str,
         features: Sequence[str], ids: Sequence[str], with_edges: bool = False) -> Op:
    """Everything a rerank reads, in one round trip -> ``(LinkCounts, DocStats, EdgeRows)``;
    the co-use edges among ``ids`` only ``with_edges`` (otherwise none are read)."""
    features, ids = list(features), list(ids)
    links, docs_key = layout.ns_key("l", namespace), layout.ns_key("d", namespace)
    adjacency = [redis_assoc.key(layout, namespace)] if with_edges else []
    if not cluster and not cache.enabled:  # one script sums the shards next to the data
        reply = yield Script("READ_WITH_EDGES" if with_edges else "READ_LOCAL",
                             [links, docs_key, *layout.shard_keys("g"), *adjacency],
                             [len(features), *features, *ids])
        own, pooled, docs = (np.frombuffer(b, dtype="<f8").reshape(-1, 2).astype(np.float64)
                             for b in reply[:3])
        return (_counts(own, pooled), DocStats(docs[:, 0].copy(), docs[:, 1].copy()),
                redis_assoc.edge_rows(ids, reply[3]) if with_edges else EdgeRows.empty())
    now = time.monotonic()
    fresh = cache.fresh(features, now)
    missing = sorted({f for f in features if f not in fresh})
    commands = []
    if features:
        commands.append(Command("hmget", (links, features)))
    if ids:
        commands.append(Command("hmget", (docs_key, ids)))
        commands += [Command("hmget", (key, ids)) for key in adjacency]
    if missing:
        commands += [Command("hmget", (key, missing)) for key in layout.shard_keys("g")]
    replies = (yield Pipeline(tuple(commands))) if commands else []
    own = unpack(replies.pop(0), 2) if features else np.zeros((0, 2))
    docs = replies.pop(0) if ids else []
    edges = redis_assoc.edge_rows(ids, replies.pop(0)) if adjacency and ids else EdgeRows.empty()
    if missing:
        total = sum((unpack(r, 3)[:, :2] for r in replies), np.zeros((len(missing), 2)))
        got = dict(zip(missing, map(tuple, total.tolist())))
        cache.store(got, now)
        fresh.update(got)
    pooled = np.array([fresh[f] for f in features], dtype=np.float64).reshape(-1, 2)
    last = np.array([np.nan if d is None else 0.0 for d in docs])
    stats = unpack(docs, 2)
    used = ~np.isnan(last)
    last[used] = stats[used, 0]
    return _counts(own, pooled), DocStats(last, stats[:, 1].copy()), edges


def put_impression(layout: KeyLayout, cluster: bool, impression: Impression,
                   feedback_id: str | None, impression_ttl_s: float) -> Op:
    """Record an impression -> the recall id holding it, or None if its id is taken.

    Idempotent: the same impression written again (after a lost reply, or after a failover
    lost the first write on one side of the Cluster) completes the first write."""
    rid, ns = impression.recall_id, impression.namespace
    if recall_key(rid) is None:
        raise ValueError(f"recall_id: {rid!r} is not a heaprank recall id")
    expire_ms = int((recall_born_s(rid) + impression_ttl_s) * 1000)
    if expire_ms <= time.time() * 1000:
        return rid  # already past its time to live: kept nowhere, as if expired at once
    body_key, pointer = layout.body_key(ns, rid), layout.pointer_key(rid)
    keys = [body_key, layout.ns_key("x", ns)] + ([] if cluster else [pointer])
    args = [codec.encode_impression(impression), expire_ms, feedback_id or "", body_key[:-len(rid)], rid,
            layout.pointer_value(ns)]
    claimed = False
    if cluster:  # claim the recall id first, in its own slot (a retry finds its own claim)
        value = layout.pointer_value(ns)
        claimed = bool((yield Command("set", (pointer, value), {"nx": True, "pxat": expire_ms})))
        if not claimed and (yield Command("get", (pointer,))) != value.encode("utf-8"):
            return None
    reply = yield Script("PUT", keys, args)
    outcome = reply[0].decode()
    if outcome != "new" and claimed:
        yield Command("delete", (pointer,))
    if outcome == "held":
        return str(reply[1].decode())
    return rid if outcome == "new" else None


def get_impression(layout: KeyLayout, cluster: bool, recall_id: str) -> Op:
    """The impression of a recall id -> :class:`Impression` or None."""
    if recall_key(recall_id) is None:
        return None
    pointer = layout.pointer_key(recall_id)
    if not cluster:
        found = yield Script("GET_LOCAL", [pointer], [layout.prefix, recall_id])
        if found is None:
            return None
        ns, body = found[0], found[1]
    else:
        at = yield Command("get", (pointer,))
        if at is None:
            return None
        ns = at.split(b":", 1)[1]
        body = yield Command("get", (layout.body_key(ns.decode("utf-8"), recall_id),))
        if body is None:
            return None
    return codec.decode_impression(recall_id, ns.decode("utf-8"), body)


def feedback(layout: KeyLayout, cluster: bool, batch: FeedbackBatch) -> Op:
    """Apply one feedback in the FEEDBACK script (with ``batch.co_use``: FEEDBACK_WITH_CO_USE,
    which also updates the co-use edges) -> its reply: ``[applied item indices, already recorded
    ones]``, or ``[error text]`` for :func:`feedback_outcome` to raise."""
    ns, rid = batch.namespace, batch.recall_id
    tag = layout.tag(ns)
    features = sorted({f for item in batch.items for f in item.features})
    index = {f: j for j, f in enumerate(features, start=1)}
    keys = [layout.body_key(ns, rid), layout.key(tag, "l", ns), layout.key(tag, "d", ns),
            *(layout.key(tag, kind) for kind in ("g", "n", "f", "c"))]
    others = [k for t, k in zip(layout.tags, layout.shard_keys("g")) if t != tag]
    if not cluster:
        keys += [layout.pointer_key(rid), *others]
    head: list[Any] = [ns, repr(float(batch.time)), repr(batch.a0), repr(batch.b0),
                       repr(batch.kappa), "1" if batch.em else "0", len(batch.items),
                       len(features), "0" if cluster else "1", 0 if cluster else len(others),
                       int(recall_born_s(rid) * 1000), *features]
    tail: list[Any] = []
    for item in batch.items:
        tail += [item.rank, str(item.code), repr(float(item.reject_weight)),
                 item.id, len(item.features), *(index[f] for f in item.features)]
    script = "FEEDBACK"
    if batch.co_use is not None:  # the same script, then the co-use edges (.edges)
        script = "FEEDBACK_WITH_CO_USE"
        keys.append(redis_assoc.key(layout, ns))
        tail += redis_assoc.feedback_extra(batch)
    pooled = np.zeros((len(features), 2))
    if cluster and others and batch.em and any(i.used for i in batch.items):
        # The other shards, read just before (bounded staleness of one round trip).
        replies = yield Pipeline(tuple(Command("hmget", (key, features)) for key in others))
        for reply in replies:
            pooled += unpack(reply, 3)[:, :2]
    try:
        reply = yield Script(script, keys, head + [repr(v) for v in pooled.ravel().tolist()] + tail)
    except Exception as exc:  # the script's own refusals, as a redis ResponseError
        if str(exc).startswith("HEAPRANK_"):
            return [str(exc)]
        raise
    if cluster and (reply[0] or reply[1]):  # again on a retry: idempotent
        yield Command("persist", (layout.pointer_key(rid),))
    return list(reply)


def feedback_outcome(batch: FeedbackBatch, reply: list[Any]) -> FeedbackOutcome:
    """The outcome of a FEEDBACK reply; the script's refusals as :class:`FeedbackError`."""
    if isinstance(reply[0], str):
        message = reply[0]
        if message.startswith("HEAPRANK_CONFLICT"):
            _, index, stored = message.split()
            was = LABEL_OF.get(int(stored), stored)
            raise FeedbackError(f"recall {batch.recall_id}: id {batch.items[int(index)].id!r} was "
                                f"already recorded as {was}; feedback for an impression cannot "
                                f"be changed")
        raise FeedbackError(f"recall_id {batch.recall_id!r}: unknown (never recorded, expired "
                            f"or pruned)")
    return FeedbackOutcome(batch.recall_id, tuple(batch.items[i].id for i in reply[0]),
                           tuple(batch.items[i].id for i in reply[1]))


def prune(layout: KeyLayout, max_impressions: int) -> Op:
    """Drop the oldest impressions with feedback past ``max_impressions`` (those without
    feedback expire by themselves)."""
    fed = layout.shard_keys("f")
    sizes = yield Pipeline(tuple(Command("zcard", (key,)) for key in fed))
    excess = sum(sizes) - max_impressions
    if excess <= 0:
        return
    rows = yield Pipeline(tuple(Command("zrange", (key, 0, excess - 1), {"withscores": True})
                                for key in fed))
    oldest = sorted((score, member, s) for s, shard in enumerate(rows)
                    for member, score in shard)[:excess]
    by_shard: dict[int, list[bytes]] = {}
    for _, member, s in oldest:
        by_shard.setdefault(s, []).append(member)
    for s, bodies in by_shard.items():
        yield Script("DROP_FED", [fed[s], *bodies], [])
    yield Pipeline(tuple(Command("delete", (layout.pointer_key(KeyLayout.split_body_key(member)[1]),))
                         for _, member, _ in oldest))
