"""The Redis backend's hot-path operations, written once for the sync and the async client.

Each operation is a flow (see :mod:`heaprank._flow`): a generator that yields the requests of
its round trips (:class:`Command`, :class:`Pipeline`, :class:`Script`) and gets their replies,
so :class:`~heaprank.state.redis.backend.RedisState` runs it on ``redis.Redis`` and
:class:`~heaprank.state.redis.async_backend.AsyncRedisState` on ``redis.asyncio``, with the same keys,
scripts, Cluster routing and reply parsing. A request's :meth:`send` returns the reply from a
sync client and an awaitable from an async one.

Cluster routing: on one server a read, a lookup and a feedback are one script each (the script
may touch the pooled shards too); in a Cluster a script touches one slot, so a rerank reads its
namespace with a pipeline and the pooled counts from the process's cache (checked against the
shards' versions), the recall-id pointer (its own slot) is claimed apart, and a feedback's
pooled deltas wait in its bucket's outbox until the client pushes them (:mod:`.pooled`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import ConfigError, StateError
from ...model.evidence import DocStats, EdgeRows, LinkCounts
from ...records import (
    USED,
    Impression,
    Update,
    recall_born_ms,
    recall_born_s,
    recall_key,
)
from .. import codec
from ..base import OWN_PREFIX
from . import blob
from . import edges as redis_assoc
from .layout import HOUR_MS, SLOT_MS, KeyLayout, Placement, unpack
from .pooled import Entry, LayoutChanged, PooledCache, moved_on
from .wire import SCRIPTS, SHAS, Command, Op, Pipeline, Request, Script

__all__ = ["SCRIPTS", "SHAS", "Command", "LayoutChanged", "Op", "Pipeline", "Request", "Script",
           "moved_on"]


def guard(layout: KeyLayout, cluster: bool) -> list[str]:
    """GUARD's two leading arguments: the meta key and the value the shards were placed by."""
    return ["", ""] if cluster else [layout.meta, layout.meta_value]


def check_layout(layout: KeyLayout, owner: str, read_only: str | None = None) -> Op:
    """Record the layout (version 2, G pooled shards) of a new state; refuse a prefix holding a
    state with another G (unless it was resharded: then its placement is returned, for the
    caller to adopt), or a state of layout 1 (to be migrated). With ``read_only`` (where the
    state is, for the message) nothing is written: a prefix without a state is a StateError,
    "no heaprank state at ..."."""
    if read_only is None:
        yield Command("set", (layout.meta, layout.meta_value), {"nx": True})
    stored = yield Command("get", (layout.meta,))
    if stored is None and read_only is not None:
        raise StateError(f"no heaprank state at {read_only} (prefix {layout.prefix!r} holds "
                         f"none)")
    if stored is None:
        return None
    text = stored.decode()
    if ":" not in text:
        raise ConfigError(f"{owner}: prefix {layout.prefix!r} holds a state of Redis layout 1 "
                          f"(heaprank 0.1); convert it first: heaprank state migrate URL")
    if text == layout.meta_value:
        return None
    placement = Placement.parse(text)
    if placement.epoch == 0 and placement.target is None:
        raise ConfigError(f"{owner}: prefix {layout.prefix!r} holds a state with "
                          f"global_shards={placement.shards}, not {layout.n_shards}")
    return placement  # resharded: its shard count rules


def load_placement(layout: KeyLayout) -> Op:
    """The placement ``P:meta`` holds now (after :class:`LayoutChanged`)."""
    stored = yield Command("get", (layout.meta,))
    if stored is None or ":" not in stored.decode():
        raise StateError(f"Redis state: {layout.meta} is gone or not layout 2")
    return Placement.parse(stored.decode())


def register(layout: KeyLayout, seen: set[int], namespace: str) -> Op:
    """List the namespace's bucket in the registry of buckets, once per process (before any
    data goes there, so the registry is a superset)."""
    bucket = layout.bucket(namespace)
    if bucket not in seen:
        yield Command("sadd", (layout.registry_key(bucket), bucket))
        seen.add(bucket)


def _counts(own: np.ndarray, pooled: np.ndarray) -> LinkCounts:
    """Own rows (pos, neg) and pooled rows (pos, neg, namespaces holding the feature)."""
    return LinkCounts(own[:, 0].copy(), own[:, 1].copy(), pooled[:, 0].copy(), pooled[:, 1].copy(),
                      pooled[:, 2].copy())


def _pooled_keys(layout: KeyLayout, features: Sequence[str]) -> tuple[list[str], list[int]]:
    """The pooled shards of ``features`` (as KEYS) and each feature's 1-based index among them
    (0: a feature that is not pooled)."""
    keys: list[str] = []
    where: dict[int, int] = {}
    index = []
    for f in features:
        if f.startswith(OWN_PREFIX):
            index.append(0)
            continue
        s = layout.shard_of(f)
        if s not in where:
            keys.append(layout.pooled[s])
            where[s] = len(keys)
        index.append(where[s])
    return keys, index


def read(layout: KeyLayout, cache: PooledCache, cluster: bool, namespace: str,
         features: Sequence[str], ids: Sequence[str], with_edges: bool = False) -> Op:
    """Everything a rerank reads, in one round trip -> ``(LinkCounts, DocStats, EdgeRows)``;
    the co-use edges among ``ids`` only ``with_edges`` (otherwise none are read)."""
    features, ids = list(features), list(ids)
    links, docs_key = layout.ns_key("l", namespace), layout.ns_key("d", namespace)
    own_key = layout.ns_key("e", namespace)
    adjacency = [redis_assoc.key(layout, namespace)] if with_edges else []
    if not cluster and not cache.enabled:  # one script reads the shards next to the data
        pooled_keys, index = _pooled_keys(layout, features)
        reply = yield Script("READ_WITH_EDGES" if with_edges else "READ_LOCAL",
                             [links, docs_key, own_key, *pooled_keys, *adjacency],
                             [*guard(layout, False), len(features), *features, len(ids), *ids,
                              *index])
        return _local_reply(reply, ids, with_edges)
    shared = [f for f in features if not f.startswith(OWN_PREFIX)]
    mine = [f for f in features if f.startswith(OWN_PREFIX)]
    unknown = [f for f in shared if f not in cache.ids]
    commands: list[Command] = [Command("get", (layout.meta,)), Command("get", (links,))]
    commands += [Command("hmget", (own_key, mine))] if mine else []
    commands += [Command("hmget", (layout.id_map, unknown))] if unknown else []
    if ids:
        commands.append(Command("hmget", (docs_key, ids)))
        commands += [Command("hmget", (key, ids)) for key in adjacency]
    now = time.monotonic()
    check = cache.due(now)
    wanted = _by_shard(layout, shared)
    known = cache.known(features, layout.shard_of)
    asked = {s: fs if check else [f for f in fs if f not in known] for s, fs in wanted.items()}
    asked = {s: fs for s, fs in asked.items() if fs or check}
    commands += [Command("hmget", (layout.pooled[s], ["", *fs])) for s, fs in asked.items()]
    commands.append(Command("get", (layout.meta,)))  # (a move between the two: read again)
    replies = _placed(layout, (yield Pipeline(tuple(commands))), len(asked))
    entries = blob.decode(replies.pop(0))
    own_rows = dict(zip(mine, unpack(replies.pop(0), 2).tolist())) if mine else {}
    if unknown:
        cache.learn_ids({f: int(i) for f, i in zip(unknown, replies.pop(0)) if i is not None})
    docs = replies.pop(0) if ids else []
    edges = redis_assoc.edge_rows(ids, replies.pop(0)) if adjacency and ids else EdgeRows.empty()
    for (s, fs), reply in zip(asked.items(), replies):
        rows = unpack(reply[1:], 4)
        cache.store(s, int(reply[0] or 0), {f: tuple(r) for f, r in zip(fs, rows.tolist())})
    if check:
        cache.checked_at = now
    for f in shared:
        ident = cache.ids.get(f)
        if ident in entries:
            own_rows[f] = list(entries[ident])
    own = np.array([own_rows.get(f, (0.0, 0.0)) for f in features], dtype=np.float64).reshape(-1, 2)
    counts = cache.overlay({**known, **cache.known(features, layout.shard_of)})
    pooled = np.array([counts.get(f, (0.0, 0.0, 0.0)) for f in features],
                      dtype=np.float64).reshape(-1, 3)
    last = np.array([np.nan if d is None else 0.0 for d in docs])
    stats = unpack(docs, 2)
    used = ~np.isnan(last)
    last[used] = stats[used, 0]
    return _counts(own, pooled), DocStats(last, stats[:, 1].copy()), edges


def _placed(layout: KeyLayout, replies: list[Any], shards: int) -> list[Any]:
    """A pipelined read's replies without the meta read first and last; LayoutChanged if the
    meta moved on (a move between the two; no meta: a replica not synced yet, no check), or a
    shard read was a Cluster reshard's tombstone (version -1: its rows went elsewhere)."""
    want = layout.meta_value.encode()
    if {replies.pop(0) or want, replies.pop() or want} != {want} \
            or any(r[0] == b"-1" for r in replies[len(replies) - shards:]):
        raise LayoutChanged(layout.meta_value)
    return replies


def _local_reply(reply: list[Any], ids: list[str],
                 with_edges: bool) -> tuple[LinkCounts, DocStats, EdgeRows]:
    """READ_LOCAL's (or READ_WITH_EDGES's) reply, decoded."""
    own, pooled, docs = (np.frombuffer(b, dtype="<f8").reshape(-1, width).astype(np.float64)
                         for b, width in zip(reply[:3], (2, 3, 2)))
    return (_counts(own, pooled), DocStats(docs[:, 0].copy(), docs[:, 1].copy()),
            redis_assoc.edge_rows(ids, reply[3]) if with_edges else EdgeRows.empty())


def _by_shard(layout: KeyLayout, features: Sequence[str]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for f in features:
        out.setdefault(layout.shard_of(f), []).append(f)
    return out


def put_impression(layout: KeyLayout, cluster: bool, impression: Impression,
                   feedback_id: str | None, impression_ttl_s: float,
                   seen: set[int] | None = None) -> Op:
    """Record an impression -> the recall id holding it, or None if its id is taken.

    Idempotent: the same impression written again (after a lost reply, or after a failover
    lost the first write on one side of the Cluster) completes the first write."""
    rid, ns = impression.recall_id, impression.namespace
    if recall_key(rid) is None:
        raise ValueError(f"recall_id: {rid!r} is not a heaprank recall id")
    now_ms = int(time.time() * 1000)
    expire_ms = int((recall_born_s(rid) + impression_ttl_s) * 1000)
    if expire_ms <= now_ms:
        return rid  # already past its time to live: kept nowhere, as if expired at once
    if seen is not None:
        yield from register(layout, seen, ns)
    if layout.id_bucket(rid) is not None:
        return (yield from _put_hourly(layout, impression, feedback_id, impression_ttl_s, now_ms))
    body_key, pointer = layout.body_key(ns, rid), layout.pointer_key(rid)
    keys = [body_key, layout.ns_key("x", ns), layout.bucket_key(ns, "o")] + ([] if cluster else [pointer])
    args = [codec.encode_compact(impression), expire_ms, feedback_id or "", body_key[:-len(rid)], rid,
            layout.pointer_value(ns), now_ms]
    if cluster:
        return (yield from _put_in_cluster(layout, keys, args, pointer, expire_ms, feedback_id))
    reply = yield Script("PUT", keys, args)
    outcome = reply[0].decode()
    if outcome == "held":
        return str(reply[1].decode())
    return rid if outcome == "new" else None


def _put_hourly(layout: KeyLayout, impression: Impression, feedback_id: str | None,
                impression_ttl_s: float, now_ms: int) -> Op:
    """PUT_HOURLY: an impression of a minted recall id as a field of its 10-minute slot's open
    hash (in its bucket's Cluster slot: one script in a Cluster too)."""
    rid, ns = impression.recall_id, impression.namespace
    if layout.id_bucket(rid) != layout.bucket(ns):
        raise ValueError(f"recall_id: {rid!r} was not minted for namespace {ns!r}")
    ttl_ms = int(impression_ttl_s * 1000)
    slot = layout.hour(rid, SLOT_MS)
    open_key, fed_key = layout.impression_keys(rid)
    keys = [open_key, layout.ns_key("x", ns), layout.bucket_key(ns, "ho"), fed_key]
    args = [layout.stored(codec.encode_compact(impression), ns),
            recall_born_ms(rid) + ttl_ms, feedback_id or "",
            open_key[:open_key.index("}:") + 2], rid, slot, (slot + 1) * SLOT_MS + ttl_ms,
            now_ms, ttl_ms, layout.body_key(ns, "")]
    reply = yield Script("PUT_HOURLY", keys, args)
    outcome = reply[0].decode()
    if outcome == "held":
        return str(reply[1].decode())
    return rid if outcome == "new" else None


def _put_in_cluster(layout: KeyLayout, keys: list[str], args: list[Any], pointer: str,
                    expire_ms: int, feedback_id: str | None) -> Op:
    """PUT and the claim of the recall id (its own slot) in one round trip: the pointer is
    set if free, read back, and the body written; a pointer held by another namespace (a
    recall id taken) undoes the write."""
    value = args[5].encode("utf-8")
    claimed, held_by, reply = yield Pipeline((
        Command("set", (pointer, value), {"nx": True, "pxat": expire_ms}),
        Command("get", (pointer,)), Script("PUT", keys, args)))
    outcome = reply[0].decode()
    if held_by != value:  # taken elsewhere: our body (if written) goes
        if outcome == "new" and not claimed:
            undo = [Command("delete", (keys[0],)), Command("zrem", (keys[2], keys[0]))]
            if feedback_id:
                undo.append(Command("hdel", (keys[1], feedback_id)))
            yield Pipeline(tuple(undo))
        return None
    if outcome != "new" and claimed:
        yield Command("delete", (pointer,))
    if outcome == "held":
        return str(reply[1].decode())
    return str(args[4]) if outcome == "new" else None


def expired(recall_id: str, impression_ttl_s: float) -> bool:
    """Whether an impression without feedback of ``recall_id`` is past its time to live."""
    return recall_born_s(recall_id) + impression_ttl_s <= time.time()


def get_impression(layout: KeyLayout, cluster: bool, recall_id: str,
                   impression_ttl_s: float) -> Op:
    """The impression of a recall id -> :class:`Impression` or None (a minted id's: one round
    trip, its hour's fed and its slot's open hash; an earlier id's: through its pointer)."""
    if recall_key(recall_id) is None:
        return None
    if layout.id_bucket(recall_id) is not None:
        fed, held = yield Pipeline(tuple(Command("hget", (key, recall_id)) for key in
                                         reversed(layout.impression_keys(recall_id))))
        if fed is None and (held is None or expired(recall_id, impression_ttl_s)):
            return None
        ns_name, body = layout.split_stored(fed or held)
        return codec.decode_impression(recall_id, ns_name, body)
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


def _impression_keys(layout: KeyLayout, cluster: bool, namespace: str, rid: str,
                     impression_ttl_s: float) -> tuple[list[str], int, str | None]:
    """FEEDBACK's KEYS 1, 5, 7 and 8 for the impression of ``rid``, its ARGV 11 and the
    pointer to persist (see the script)."""
    tag = layout.tag(namespace)
    if layout.id_bucket(rid) is not None:  # a field of its slot's or hour's hash
        open_key, fed_key = layout.impression_keys(rid)
        return ([open_key, layout.key(tag, "hf"), fed_key, layout.key(tag, "q")],
                int((recall_born_s(rid) + impression_ttl_s) * 1000), None)
    pointer = layout.pointer_key(rid)
    return ([layout.body_key(namespace, rid), layout.key(tag, "f"), layout.key(tag, "o"),
             layout.key(tag, "q") if cluster else pointer], recall_born_ms(rid),
            pointer)


def apply_update(layout: KeyLayout, cluster: bool, update: Update,
                 cache: PooledCache | None = None, seen: set[int] | None = None,
                 impression_ttl_s: float = 3600.0) -> Op:
    """Apply one feedback update in the FEEDBACK script -> ``(applied, outbox entry or
    None)``: False when the update is stale (nothing written); the entry (a Cluster) for the
    caller to push."""
    ns, rid = update.namespace, update.recall_id
    if recall_key(rid) is None or layout.id_bucket(rid) not in (None, layout.bucket(ns)):
        return False, None  # not a recall of this namespace's bucket: unknown here
    if seen is not None:
        yield from register(layout, seen, ns)
    features = list(update.features)
    tag = layout.tag(ns)
    own_key = layout.key(tag, "e", ns)
    (held, fed, moved, extra), score, pointer = _impression_keys(layout, cluster, ns, rid,
                                                                  impression_ttl_s)
    keys = [held, layout.key(tag, "l", ns), layout.key(tag, "d", ns), layout.key(tag, "n"),
            fed, layout.key(tag, "n"), moved, extra, own_key,
            *((own_key, own_key) if cluster else (layout.id_map, layout.id_names))]
    pooled_keys, where = ([], [0] * len(features)) if cluster else _pooled_keys(layout, features)
    keys += pooled_keys
    ids = [0] * len(features)
    if cluster and cache is not None:
        ids = yield from _cluster_ids(layout, cache, features)
    args: list[Any] = [*guard(layout, cluster), ns, repr(float(update.time)), len(update.ranks),
                       len(features), "1" if cluster else "0", len(pooled_keys), score, rid,
                       "1" if update.edges is not None else "0", *features, *where, *ids]
    for p, n in zip(update.dpos.tolist(), update.dneg.tolist()):
        args += [repr(p), repr(n)]
    used = iter(update.used)  # (in shown order, as the ranks)
    for rank, code in zip(update.ranks, update.codes):
        args += [rank, str(code), next(used) if code == USED else ""]
    if update.edges is not None:
        keys.append(redis_assoc.key(layout, ns))
        args += redis_assoc.change_args(update.edges)
    reply = yield Script("FEEDBACK", keys, args)
    if not int(reply[0]):
        waiting = (yield from _waiting_entry(keys[7], update, pointer)) if cluster else None
        return False, waiting
    entry = None
    if cluster and reply[1]:
        entry = Entry(keys[7], reply[1].decode(), reply[2], pointer)
    elif cluster and pointer:  # nothing pooled (document features only): the pointer alone
        yield Command("persist", (pointer,))
    return True, entry


def _waiting_entry(outbox: str, update: Update, pointer: str | None) -> Op:
    """A stale update's outbox entry still waiting (a Cluster), or None: after a reply lost
    once the script ran, the retry finds the items recorded, and its writer pushes the entry
    the first run left, in its next batch, instead of leaving it to a drain."""
    if not update.ranks:
        return None
    entry_id = f"{update.recall_id}:{min(update.ranks)}"
    blob = yield Command("hget", (outbox, entry_id))
    return None if blob is None else Entry(outbox, entry_id, blob, pointer)


def _cluster_ids(layout: KeyLayout, cache: PooledCache, features: list[str]) -> Op:
    """The pooled ids of ``features`` for a Cluster feedback script (made first, in the id
    map's slot, for names never seen; 0 for a document feature)."""
    shared = [f for f in features if not f.startswith(OWN_PREFIX)]
    new = [f for f in shared if f not in cache.ids]
    if new:
        made = yield Script("INTERN", [layout.id_map, layout.id_names], new)
        cache.learn_ids({f: int(i) for f, i in zip(new, made)})
    return [0 if f.startswith(OWN_PREFIX) else cache.ids[f] for f in features]


def prune(layout: KeyLayout, max_impressions: int) -> Op:
    """Drop the oldest impressions with feedback past ``max_impressions`` (those without
    feedback expire by themselves): a fed hour's hash whole where all of it goes, else its
    oldest fields; layout 2's first impressions (a key each) one by one."""
    from .pooled import buckets_in_use

    buckets = yield from buckets_in_use(layout)
    tags = [layout.bucket_tag(b) for b in buckets]
    if not tags:
        return
    replies = yield Pipeline(tuple(c for t in tags for c in (
        Command("zcard", (layout.key(t, "f"),)), Command("zrange", (layout.key(t, "hf"), 0, -1)))))
    sizes, hours = replies[0::2], [(s, h) for s, found in enumerate(replies[1::2]) for h in found]
    counts = (yield Pipeline(tuple(Command("hlen", (layout.hour_key(tags[s], "k", h),))
                                   for s, h in hours))) if hours else []
    excess = sum(sizes) + sum(counts) - max_impressions
    if excess <= 0:
        return
    singles: list[tuple[int, int, int, bytes, int]] = []
    if sum(sizes):
        rows = yield Pipeline(tuple(Command("zrange", (layout.key(t, "f"), 0, excess - 1),
                                            {"withscores": True}) for t, n in zip(tags, sizes) if n))
        where = [s for s, n in enumerate(sizes) if n]
        singles = [(int(score), 0, where[q], member, 1) for q, found in enumerate(rows)
                   for member, score in found]
    wholes = sorted(singles + [(int(h) * HOUR_MS, 1, s, h, n) for (s, h), n in zip(hours, counts) if n])
    cut = _cut(wholes, excess)
    if cut is not None:  # the hour the cut falls in, by field: the oldest go, of any bucket
        split = [u for u in wholes if u[1] and u[3] == cut]
        found = yield Pipeline(tuple(Command("hkeys", (layout.hour_key(tags[u[2]], "k", u[3]),))
                                     for u in split))
        wholes = sorted([u for u in wholes if not (u[1] and u[3] == cut)] + [
            (recall_born_ms(r.decode()), 1, u[2], u[3], 1)
            for u, rids in zip(split, found) for r in rids])
    yield from _drop_oldest(layout, tags, wholes, excess)


def _cut(units: list[tuple[int, int, int, bytes, int]], excess: int) -> bytes | None:
    """The hour whose hashes the oldest ``excess`` impressions end inside of (None: they end
    at a whole hour or a key)."""
    for _, hourly, _, what, n in units:
        if excess < n:
            return what if hourly else None
        excess -= n
        if excess <= 0:
            return None
    return None


def _drop_oldest(layout: KeyLayout, tags: list[str],
                 oldest: list[tuple[int, int, int, bytes, int]], excess: int) -> Op:
    """Drop ``excess`` impressions with feedback from ``oldest`` (``(age, 0 a key / 1 an hour,
    bucket index, the key or hour, count)``, oldest first): keys with DROP_FED, hours' fields
    with TRIM_FED."""
    bodies: dict[int, list[bytes]] = {}
    trims: dict[int, dict[bytes, int]] = {}
    for _, hourly, s, what, n in oldest:
        if excess <= 0:
            break
        take = min(n, excess)
        excess -= take
        if not hourly:
            bodies.setdefault(s, []).append(what)
        else:
            by_hour = trims.setdefault(s, {})
            by_hour[what] = by_hour.get(what, 0) + take
    scripts = [Script("DROP_FED", [layout.key(tags[s], "f"), *keys], []) for s, keys in bodies.items()]
    scripts += [Script("TRIM_FED", [layout.key(tags[s], "hf"),
                                    *(layout.hour_key(tags[s], "k", h) for h in by_hour)],
                       [x for h, n in by_hour.items() for x in (h, n)])
                for s, by_hour in trims.items()]
    if scripts:
        yield Pipeline(tuple(scripts))
    pointers = [layout.pointer_key(KeyLayout.split_body_key(key)[1])
                for keys in bodies.values() for key in keys]
    if pointers:
        yield Pipeline(tuple(Command("delete", (p,)) for p in pointers))
