"""The Redis backend's audit, forget and copy operations (the sync client's), without a scan of
the keyspace: the registry of buckets in use (``P:{b}:b``) and each bucket's namespace set,
open and fed impression zsets name every key these read.

Each function takes the :class:`~heaprank.state.redis.backend.RedisState` and runs its requests
through ``state.run_flow`` (a flow of :mod:`.ops` requests) or on ``state.client``.
"""

from __future__ import annotations

import heapq
import secrets
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from ...records import Impression, recall_born_ms, recall_born_s
from .. import codec
from ..base import OWN_PREFIX
from . import blob, pooled
from . import edges as redis_assoc
from .layout import SLOT_MS, KeyLayout, unpack
from .ops import Command, Op, Pipeline, Script

if TYPE_CHECKING:
    from ..copy import StateDump

#: The sync client (``RedisState``; not imported here, which imports this module).
RedisState = Any

#: A prune drains one of this many parts of the buckets (all of them every 64 prunes).
DRAIN_PARTS = 64
#: Impressions the feedback log reads per round trip.
_LOG_PAGE = 512


def bucket_keys(layout: KeyLayout, buckets: list[int], kind: str) -> list[str]:
    return [layout.key(layout.bucket_tag(b), kind) for b in buckets]


def namespaces_flow(layout: KeyLayout) -> Op:
    buckets = yield from pooled.buckets_in_use(layout)
    if not buckets:
        return []
    replies = yield Pipeline(tuple(Command("hkeys", (k,)) for k in bucket_keys(layout, buckets, "n")))
    return sorted(n.decode("utf-8") for members in replies for n in members if n)


def push_own(state: RedisState) -> None:
    """Push this process's waiting outbox entries and settle them (its reads stop adding
    their deltas); kept for the next push if it fails."""
    own = state.take_outbox()
    try:
        state.push_entries(own)
    except BaseException:
        state.restore(own)
        raise
    state.settled(own)


def drain(state: RedisState, min_age_ms: float = 2_000.0, part: int | None = None) -> None:
    """Push this process's waiting outbox entries, then the entries waiting in the buckets (a
    writer that died before its push) at least ``min_age_ms`` old (an audit call: 2 s; younger
    ones are their writers' to push): of every bucket, or of the ``part``-th 1/64 of them
    (every 64th part: all of them). Reading every bucket, it raises the shards' watermark
    (:func:`.pooled.watermark`)."""
    push_own(state)
    if part is not None and part % DRAIN_PARTS == DRAIN_PARTS - 1:
        part = None
    since = time.time() * 1000
    buckets = state.run_flow("drain", lambda: pooled.buckets_in_use(state.layout), idempotent=True)
    if part is not None:
        buckets = [b for b in buckets if b % DRAIN_PARTS == part % DRAIN_PARTS]
    waiting = state.run_flow("drain", lambda: pooled.pending(state.layout, buckets),
                             idempotent=True)
    state.push_entries([e for e in waiting if pooled.created(e.blob) <= since - min_age_ms])
    if part is None and state.cluster:
        state.run_flow("drain", lambda: pooled.watermark(state.layout, waiting, since),
                       idempotent=True)


def list_own(state: RedisState, namespace: str) -> tuple[list[str], np.ndarray, np.ndarray]:
    """A namespace's links: its links string (by id, named from the id map) and its document
    features."""
    layout = state.layout

    def run() -> tuple[list[str], np.ndarray, np.ndarray]:
        entries = blob.decode(state.client.get(layout.ns_key("l", namespace)))
        rows = {f.decode("utf-8"): tuple(unpack([v], 2)[0])
                for f, v in state.client.hgetall(layout.ns_key("e", namespace)).items()}
        if entries:
            ids = sorted(entries)
            names = state.client.hmget(layout.id_names, [str(i) for i in ids])
            rows.update((n.decode("utf-8"), entries[i]) for i, n in zip(ids, names) if n is not None)
        names_sorted = sorted(rows)
        arr = np.array([rows[f] for f in names_sorted], dtype=np.float64).reshape(-1, 2)
        return names_sorted, arr[:, 0].copy(), arr[:, 1].copy()
    return state.call("list_links", run, idempotent=True)


def list_pooled(state: RedisState) -> tuple[list[str], np.ndarray, np.ndarray]:
    drain(state)

    def run() -> tuple[list[str], np.ndarray, np.ndarray]:
        layout = state.layout
        pipe = state.client.pipeline(transaction=False)
        pipe.get(layout.meta)
        for key in layout.pooled:
            pipe.hgetall(key)
        pipe.get(layout.meta)
        replies = pipe.execute()
        if {replies[0], replies[-1]} != {layout.meta_value.encode()}:  # placed again meanwhile
            raise pooled.LayoutChanged(layout.meta_value)
        total: dict[bytes, np.ndarray] = {}
        for s, rows in enumerate(replies[1:-1]):
            for f, v in rows.items():  # ("" is the shard's version; a reshard: where it is)
                if f and layout.shard_of(f.decode("utf-8")) == s:
                    total[f] = unpack([v], 4)[0]
        names = sorted(f for f, v in total.items() if v[2] > 0)
        arr = np.array([total[f][:2] for f in names], dtype=np.float64).reshape(-1, 2)
        return [f.decode("utf-8") for f in names], arr[:, 0].copy(), arr[:, 1].copy()
    return state.call("list_links", run, idempotent=True)


def bodies_of(state: RedisState, namespace: str) -> list[bytes]:
    """The namespace's impression keys, from its bucket's open and fed zsets."""
    head = state.layout.body_key(namespace, "")
    members = state.client.zrange(state.layout.bucket_key(namespace, "o"), 0, -1)
    members += state.client.zrange(state.layout.bucket_key(namespace, "f"), 0, -1)
    return sorted({m for m in members if m.decode("utf-8")[:-16] == head})


def forget(state: RedisState, namespace: str, scrub_global: bool) -> None:
    """Remove the namespace's keys in one script in its slot (links, documents, explicit ids,
    impressions, counters) with an outbox entry of its pooled part, then push that entry and
    delete the recall-id pointers; features no namespace holds any more leave the pool."""
    layout = state.layout
    push_own(state)  # this process's own copies too: else its reads add them until its push

    def run() -> None:
        # Its bucket's waiting pooled deltas first (other writers' included): pushed after the
        # forget, they would bring its evidence back.
        bucket = layout.bucket(namespace)
        state.push_entries(state.run_flow("forget_pending", lambda: pooled.pending(
            layout, [bucket]), idempotent=True))
        bodies = bodies_of(state, namespace)
        state.client.delete(redis_assoc.key(layout, namespace))  # co-use edges, first
        keys: list[str | bytes] = [layout.ns_key(k, namespace) for k in ("l", "d", "x")]
        keys += [layout.bucket_key(namespace, kind) for kind in ("n", "f", "o", "n", "q")]
        keys += [layout.ns_key("e", namespace), layout.bucket_key(namespace, "ho"),
                 layout.bucket_key(namespace, "hf")]
        entry_id = f"forget:{secrets.token_hex(8)}"  # (no name: markers outlive the namespace)
        keys += bodies
        head = layout.key(layout.tag(namespace), "")
        box = state.send(Script("FORGET", keys,
                                [namespace, "1" if scrub_global else "0", entry_id, head]))
        if box:
            entry = pooled.Entry(layout.bucket_key(namespace, "q"), entry_id, box)
            state.push_entries([entry])
        if bodies:
            pipe = state.client.pipeline(transaction=False)
            for body in bodies:
                pipe.delete(layout.pointer_key(KeyLayout.split_body_key(body)[1]))
            pipe.execute()
        state.cache.clear()
    state.call("forget_namespace", run, idempotent=False)


def stats(state: RedisState) -> dict[str, int]:
    layout = state.layout

    def run() -> dict[str, int]:
        names = state.namespaces()
        buckets = state.run_flow("stats", lambda: pooled.buckets_in_use(layout), idempotent=True)
        pipe = state.client.pipeline(transaction=False)
        for ns in names:
            pipe.get(layout.ns_key("l", ns))
            pipe.hlen(layout.ns_key("e", ns))
            pipe.hlen(layout.ns_key("d", ns))
            pipe.hexists(layout.ns_key("d", ns), "")  # its feedback count
        now_ms = int(time.time() * 1000)
        for b in buckets:
            tag = layout.bucket_tag(b)
            pipe.hget(layout.key(tag, "n"), "")
            pipe.zcard(layout.key(tag, "f"))
            pipe.zcount(layout.key(tag, "o"), now_ms, "+inf")
        replies = pipe.execute()
        counts, rest = replies[:4 * len(names)], replies[4 * len(names):]
        hourly = hour_counts(state, buckets, now_ms)
        fed, open_ = sum(rest[1::3]) + hourly[1], sum(rest[2::3]) + hourly[0]
        return {
            "namespaces": len(names),
            "links": sum(len(blob.decode(b)) for b in counts[0::4]) + sum(counts[1::4]),
            "global_links": len(state.list_links(None)[0]),
            "documents": sum(counts[2::4]) - sum(map(bool, counts[3::4])),
            "impressions": fed + open_,
            "feedbacks": sum(int(c or 0) for c in rest[0::3]),
            # (no cap: each expires on its own after impression_ttl_s)
            "open_impressions": open_,
        }
    return state.call("stats", run, idempotent=True)


def hours_of(state: RedisState, buckets: list[int]) -> list[tuple[str, str, bytes]]:
    """``(tag, kind, hour)`` of every hash of impressions of ``buckets``: ``h`` open (by
    10-minute slot, while its zset entry stands: the hash ends at its entry's score), ``k`` fed
    (by hour)."""
    layout = state.layout
    tags = [layout.bucket_tag(b) for b in buckets]
    pipe = state.client.pipeline(transaction=False)
    for tag in tags:
        pipe.zrange(layout.key(tag, "ho"), 0, -1)
        pipe.zrange(layout.key(tag, "hf"), 0, -1)
    found = pipe.execute() if tags else []
    return [(tag, kind, hour) for q, tag in enumerate(tags)
            for kind, hours in (("h", found[2 * q]), ("k", found[2 * q + 1])) for hour in hours]


def hour_counts(state: RedisState, buckets: list[int], now_ms: int) -> tuple[int, int]:
    """``(open, fed)`` impressions in the hashes of ``buckets`` (an open one past its time to
    live, in a slot's hash not yet expired, is not counted)."""
    layout = state.layout
    hours = hours_of(state, buckets)
    since = now_ms - int(state.impression_ttl_s * 1000)  # an open one born before is expired
    pipe = state.client.pipeline(transaction=False)
    for tag, kind, hour in hours:
        key = layout.hour_key(tag, kind, hour)
        start = int(hour) * SLOT_MS
        if kind == "h" and start <= since:  # the slot may hold expired ones: count by id
            pipe.hkeys(key)
        else:
            pipe.hlen(key)
    counts = [0, 0]
    for (_, kind, _), found in zip(hours, pipe.execute() if hours else []):
        if isinstance(found, list):
            found = sum(recall_born_s(r.decode()) * 1000 > since for r in found)
        counts[kind == "k"] += found
    return counts[0], counts[1]


def feedback_log(state: RedisState, namespace: str | None) -> Iterator[Impression]:
    """Impressions with feedback of ``namespace`` (``None``: all), oldest recall first: the
    buckets' feedback sets read in pages and merged by age."""
    layout = state.layout
    if namespace is None:
        buckets = state.run_flow("feedback_log", lambda: pooled.buckets_in_use(layout),
                                 idempotent=True)
        tags = [layout.bucket_tag(b) for b in buckets]
    else:
        tags = [layout.tag(namespace)]
    pages = [_fed_pages(state, tag, namespace) for tag in tags]
    pages += [_fed_hours(state, tag, namespace) for tag in tags]
    for _, rid, name, body in heapq.merge(*pages):
        yield codec.decode_impression(rid, name, body)


def _fed_pages(state: RedisState, tag: str, namespace: str | None) -> Iterator[tuple[float, str, str, bytes]]:
    """``(age score, recall id, namespace, body)`` of one bucket's impressions with feedback,
    by score then recall id; paged by score so that pruning meanwhile skips nothing still
    there."""
    fed = state.layout.key(tag, "f")
    low: float | str = "-inf"
    seen_at_low = 0  # members already read with score == low (ties are ordered by member)
    tied: list[tuple[float, str, str, bytes]] = []  # of score `low`, yielded by recall id
    while True:
        def run(low: float | str = low, skip: int = seen_at_low) -> tuple[list[Any], list[Any]]:
            members = state.client.zrange(fed, low, "+inf", byscore=True, offset=skip,
                                          num=_LOG_PAGE, withscores=True)
            pipe = state.client.pipeline(transaction=False)
            for member, _ in members:
                pipe.get(member)
            return members, (pipe.execute() if members else [])
        members, bodies = state.call("feedback_log", run, idempotent=True)
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


def _fed_hours(state: RedisState, tag: str, namespace: str | None) -> Iterator[tuple[float, str, str, bytes]]:
    """As :func:`_fed_pages`, for the impressions in one bucket's fed hours' hashes: an hour
    at a time (HSCAN), by recall id (their age)."""
    layout = state.layout
    hours = state.call("feedback_log", lambda: state.client.zrange(layout.key(tag, "hf"), 0, -1),
                       idempotent=True)
    for hour in sorted(hours, key=int):
        key = layout.hour_key(tag, "k", hour)
        rows = state.call("feedback_log", lambda key=key: dict(
            state.client.hscan_iter(key, count=_LOG_PAGE)), idempotent=True)
        found = []
        for rid, value in rows.items():
            name, body = layout.split_stored(value)
            if namespace is None or name == namespace:
                found.append((recall_born_s(rid.decode()) * 1000, rid.decode(), name, body))
        yield from sorted(found)


def iter_impressions(state: RedisState) -> list[tuple[str, str, bytes]]:
    """``(recall_id, namespace, codec bytes)`` of every live impression."""
    layout = state.layout

    def run() -> list[tuple[str, str, bytes]]:
        buckets = state.run_flow("iter_impressions", lambda: pooled.buckets_in_use(layout),
                                 idempotent=True)
        pipe = state.client.pipeline(transaction=False)
        for b in buckets:
            pipe.zrange(layout.key(layout.bucket_tag(b), "o"), 0, -1)
            pipe.zrange(layout.key(layout.bucket_tag(b), "f"), 0, -1)
        keys = sorted({k for members in pipe.execute() for k in members})
        pipe = state.client.pipeline(transaction=False)
        for key in keys:
            pipe.get(key)
        out = []
        for key, body in zip(keys, pipe.execute() if keys else []):
            if body is not None:
                ns, rid = KeyLayout.split_body_key(key)
                out.append((rid, ns, body))
        for tag, kind, hour in hours_of(state, buckets):
            for rid, value in state.client.hscan_iter(layout.hour_key(tag, kind, hour), count=500):
                if kind == "k" or recall_born_s(rid.decode()) + state.impression_ttl_s > time.time():
                    ns, body = layout.split_stored(value)
                    out.append((rid.decode(), ns, body))
        return out
    return state.call("iter_impressions", run, idempotent=True)


def _interned(dump: StateDump) -> dict[str, int]:
    """Ids for every pooled feature of a copied state (1, 2, ... by name)."""
    names = set(dump.global_links[0])
    for features, _, _ in dump.links.values():
        names.update(f for f in features if not f.startswith(OWN_PREFIX))
    return {f: i for i, f in enumerate(sorted(names), start=1)}


def _pooled_rows(layout: KeyLayout, dump: StateDump, ids: dict[str, int]) -> list[dict[str, bytes]]:
    """Each pooled shard's fields for a copied state: the copied pooled counts, how many
    copied namespaces hold each feature, and its id."""
    holders: dict[str, int] = {}
    for features, _, _ in dump.links.values():
        for f in features:
            if not f.startswith(OWN_PREFIX):  # a document's feature stays its namespace's
                holders[f] = holders.get(f, 0) + 1
    shards: list[dict[str, bytes]] = [{} for _ in layout.pooled]
    gf, gpos, gneg = dump.global_links
    for f, p, n in zip(gf, gpos.tolist(), gneg.tolist()):
        if holders.get(f, 0) > 0:
            shards[layout.shard_of(f)][f] = np.array([p, n, holders[f], ids[f]], dtype="<f8").tobytes()
    return shards


def import_state(state: RedisState, dump: StateDump) -> None:
    """Write a whole state (from :func:`heaprank.state.copy.export_state`) into this empty one."""
    layout = state.layout
    ids = _interned(dump)
    shards = _pooled_rows(layout, dump, ids)
    now_ms = time.time() * 1000
    names = sorted(set(dump.links) | set(dump.docs) | {ns for _, ns, _ in dump.impressions}
                   | set(dump.edges))

    def run() -> None:
        pipe = state.client.pipeline(transaction=False)
        if ids:
            pipe.hset(layout.id_map, mapping={**ids, "": len(ids)})
            pipe.hset(layout.id_names, mapping={str(i): f for f, i in ids.items()})
        for key, fields in zip(layout.pooled, shards):
            if fields:
                pipe.hset(key, mapping={**fields, "": 1})
        for ns in names or [""]:
            b = layout.bucket(ns)
            pipe.sadd(layout.registry_key(b), b)
            state.seen.add(b)
        for ns, (features, pos, neg) in dump.links.items():
            rows = list(zip(features, pos.tolist(), neg.tolist()))
            shared = [(ids[f], p, n) for f, p, n in rows if not f.startswith(OWN_PREFIX)]
            if shared:
                pipe.set(layout.ns_key("l", ns), blob.encode(shared))
            mine = {f: np.array([p, n], dtype="<f8").tobytes() for f, p, n in rows
                    if f.startswith(OWN_PREFIX)}
            if mine:
                pipe.hset(layout.ns_key("e", ns), mapping=mine)
            pipe.hset(layout.bucket_key(ns, "n"), ns, "")
        for ns, doc_rows in dump.docs.items():
            if doc_rows:
                pipe.hset(layout.ns_key("d", ns), mapping={
                    i: np.array([last, uses], dtype="<f8").tobytes() for i, last, uses in doc_rows})
        for ns, edge_rows in dump.edges.items():
            pipe.hset(redis_assoc.key(layout, ns), mapping=redis_assoc.adjacency(edge_rows))
        for rid, ns, body in dump.impressions:
            _copy_impression(state, pipe, rid, ns, body, now_ms)
        pipe.hset(layout.bucket_key(names[0] if names else "", "n"), "", dump.feedbacks)
        pipe.execute()
    state.call("import_state", run, idempotent=True)


def _copy_impression(state: RedisState, pipe: Any, rid: str, ns: str, body: bytes,
                     now_ms: float) -> None:
    layout = state.layout
    fed = any(codec.verdicts_of(body))
    expire_ms = int((recall_born_s(rid) + state.impression_ttl_s) * 1000)
    if not fed and expire_ms <= now_ms:
        return
    if layout.id_bucket(rid) is not None:  # a field of its slot's or hour's hash
        open_key, fed_key = layout.impression_keys(rid)
        pipe.hset(fed_key if fed else open_key, rid, layout.stored(body, ns))
        if fed:
            hour = layout.hour(rid)
            pipe.zadd(layout.bucket_key(ns, "hf"), {hour: hour})
        else:
            slot = layout.hour(rid, SLOT_MS)
            ends = (slot + 1) * SLOT_MS + int(state.impression_ttl_s * 1000)
            pipe.pexpireat(open_key, ends)
            pipe.zadd(layout.bucket_key(ns, "ho"), {slot: ends}, gt=True)
        return
    body_key = layout.body_key(ns, rid)
    pipe.set(body_key, body, pxat=None if fed else expire_ms)
    pipe.set(layout.pointer_key(rid), layout.pointer_value(ns), pxat=None if fed else expire_ms)
    if fed:
        pipe.zadd(layout.bucket_key(ns, "f"), {body_key: recall_born_ms(rid)})
    else:
        pipe.zadd(layout.bucket_key(ns, "o"), {body_key: expire_ms})
