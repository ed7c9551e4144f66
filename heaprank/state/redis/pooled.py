"""The pooled layer of the Redis backend: its per-process cache, and the outbox entries that
carry a Cluster feedback's (or any forget's) pooled deltas to the shards.

The pooled counts of a feature live in one of G shards (``crc32(feature) mod G``), each hash
carrying a version (field ``""``) that every write bumps. A reader keeps the counts it read with
the version they were read at; :class:`PooledCache` says which are still good: all of them
between two checks of the versions, at most ``check_s`` apart; at a check, those whose shard's
version moved are read again.

An outbox entry (written by the FEEDBACK or FORGET script in the namespace's slot, so it exists
exactly when the namespace's writes do, stamped with its creation time) is pushed by POOL_ADD,
which applies it to a shard at most once (its id goes to the shard's marker zset, scored by its
creation time, in the same script), then deleted from its outbox. Markers are not removed one by
one: a pusher may hold a copy of an entry read before another pusher applied and deleted it
(a writer's own batch, a drain's), and its push must still find the marker. Instead a full
drain (:func:`watermark`) reads every outbox and raises each shard's watermark (the marker
``""``'s score) to the creation time of the oldest entry still waiting (at most
:data:`CLOCK_SKEW_MS` before now): every entry older than it has been applied, so POOL_ADD
skips it, and its marker goes. A drain takes entries at least :data:`DRAIN_AFTER_MS` old, which
their writer has had every chance to push itself. On one server an entry is applied to all
its shards and deleted in one script (POOL_PUSH_LOCAL), without markers.
"""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any

from .flow import Call
from .layout import KeyLayout
from .wire import Pipeline, Script

#: The most two clocks (this process's, a master's TIME that stamps the entries) may differ:
#: a watermark stays this far behind this process's clock.
CLOCK_SKEW_MS = 10_000.0
#: Outbox entries younger than this are left to their writer by a drain.
DRAIN_AFTER_MS = 60_000
_NAME = struct.Struct("<H")
_ROW = struct.Struct("<dddd")


class LayoutChanged(Exception):
    """The pooled layer moved since this process read ``P:meta`` (a reshard): reload it and run
    the call again (:meth:`~.connect.RedisClientBase.adopt`)."""


def moved_on(exc: BaseException) -> bool:
    """Whether ``exc`` says the layout moved on: :class:`LayoutChanged`, or a script's
    HEAPRANK_EPOCH (GUARD in :mod:`.lua`, or POOL_ADD), or HEAPRANK_FROZEN (POOL_ADD: a shard
    being moved)."""
    return isinstance(exc, LayoutChanged) or "HEAPRANK_EPOCH" in str(exc) \
        or "HEAPRANK_FROZEN" in str(exc)


class PooledCache:
    """Pooled counts read by this process, each with its shard's version when read.

    ``check_s``: the versions are checked at most this often (0: at every read), so a reader
    sees the pooled layer as it was at most ``check_s`` seconds ago (plus, in a Cluster, the
    pushes still waiting in a writer's batch)."""

    def __init__(self, check_s: float) -> None:
        self.check_s = float(check_s)
        #: Feature -> (pos, neg, namespaces holding it, its shard's version when read).
        self._rows: dict[str, tuple[float, float, float, int]] = {}
        #: Feature -> its id (ids are never given to another feature).
        self.ids: dict[str, int] = {}
        self.versions: dict[int, int] = {}
        self.checked_at = -1e18
        #: This process's pooled deltas not pushed yet (a Cluster): added to what it reads.
        self.pending: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    @property
    def ttl_s(self) -> float:
        return self.check_s

    @property
    def enabled(self) -> bool:
        return self.check_s > 0

    def due(self, now: float) -> bool:
        return now - self.checked_at >= self.check_s

    def known(self, features: Sequence[str],
              shard_of: Any) -> dict[str, tuple[float, float, float]]:
        """The cached counts ``(pos, neg, namespaces)`` of ``features`` read at their shard's
        current known version."""
        out = {}
        with self._lock:
            for f in features:
                hit = self._rows.get(f)
                if hit is not None and self.versions.get(shard_of(f)) == hit[3]:
                    out[f] = hit[:3]
        return out

    def store(self, shard: int, version: int, rows: dict[str, tuple[float, ...]]) -> None:
        """Rows ``feature -> (pos, neg, namespaces, id)`` (a shard's ``<dddd``) read at
        ``version`` (id 0: no row)."""
        with self._lock:
            self.versions[shard] = version
            self._rows.update((f, (r[0], r[1], r[2], version)) for f, r in rows.items())
            self.ids.update((f, int(r[3])) for f, r in rows.items() if r[3] > 0)

    def learn_ids(self, ids: dict[str, int]) -> None:
        with self._lock:
            self.ids.update((f, i) for f, i in ids.items() if i > 0)

    def stale(self, shard: int, version: int) -> bool:
        """Whether the cached rows of ``shard`` were read at another version."""
        with self._lock:
            return self.versions.get(shard) != version

    def clear(self) -> None:
        with self._lock:
            self._rows.clear()
            self.ids.clear()
            self.versions.clear()
            self.checked_at = -1e18

    def add_pending(self, rows: Sequence[tuple[str, int, float, float, float]],
                    sign: float = 1.0) -> None:
        with self._lock:
            for f, _, p, n, c in rows:
                row = self.pending.setdefault(f, [0.0, 0.0, 0.0])
                row[0] += sign * p
                row[1] += sign * n
                row[2] += sign * c

    def settle(self, rows: Sequence[tuple[str, int, float, float, float]], shard_of: Any) -> None:
        """Pushed deltas: no longer added to reads; their shards are read again."""
        self.add_pending(rows, -1.0)
        with self._lock:
            for f, _, _, _, _ in rows:
                row = self.pending.get(f)
                if row is not None and max(map(abs, row)) < 1e-9:
                    del self.pending[f]
                self.versions.pop(shard_of(f), None)

    def overlay(self, counts: dict[str, tuple[float, float, float]]
                ) -> dict[str, tuple[float, float, float]]:
        """``counts`` with this process's unpushed deltas added (reading its own writes)."""
        if not self.pending:
            return counts
        with self._lock:
            out = dict(counts)
            for f, (p, n, c) in counts.items():
                extra = self.pending.get(f)
                if extra is not None:
                    out[f] = (p + extra[0], n + extra[1], c + extra[2])
            return out


Row = tuple[str, int, float, float, float]


def decode_entry(blob: bytes) -> list[Row]:
    """An outbox entry's ``(feature, id, pos, neg, namespaces)`` deltas (a feature "": named
    by its id alone, as a forget writes them)."""
    out, at = [], 8  # (after the entry's creation time, ms)
    while at < len(blob):
        (n,) = _NAME.unpack_from(blob, at)
        name = blob[at + 2:at + 2 + n].decode("utf-8")
        ident, p, q, c = _ROW.unpack_from(blob, at + 2 + n)
        out.append((name, int(ident), p, q, c))
        at += 2 + n + _ROW.size
    return out


def encode_entry(rows: Sequence[Row]) -> bytes:
    parts = [struct.pack("<d", time.time() * 1000)]
    for name, ident, p, q, c in rows:
        raw = name.encode("utf-8")
        parts += [_NAME.pack(len(raw)), raw, _ROW.pack(ident, p, q, c)]
    return b"".join(parts)


@dataclass(frozen=True, slots=True)
class Entry:
    """An outbox entry to push: where it waits, its id and deltas, and the recall-id pointer to
    persist once it is pushed (a Cluster feedback)."""

    outbox: str
    id: str
    blob: bytes
    pointer: str | None = None


def push(layout: KeyLayout, entries: Sequence[Entry],
         cluster: bool = True) -> Generator[Any, Any, None]:
    """Push outbox entries to their shards (one POOL_ADD per shard, all in one round trip),
    then delete them and persist their pointers (a second); features a shard dropped leave
    the id map (a third). Rows named by id alone are named first (a round trip before). On
    one server (not ``cluster``) one POOL_PUSH_LOCAL applies and deletes each entry at once."""
    decoded = yield from _named(layout, entries)
    if not cluster:
        gone = (yield from _push_local(layout, entries, decoded)) if entries else []
        if gone:
            yield from _forget_ids(layout, gone)
        return
    dropped = yield from _pool_add(layout, _by_shard(layout, entries, decoded), False)
    tail: list[Any] = [Call("hdel", (e.outbox, e.id)) for e in entries]
    tail += [Call("persist", (e.pointer,)) for e in entries if e.pointer]
    if tail:
        yield Pipeline(tuple(tail))
    if dropped:
        yield from _forget_ids(layout, dropped)


def complete(layout: KeyLayout, entries: Sequence[Entry],
             shards: Sequence[int]) -> Generator[Any, Any, None]:
    """The resharder's (a Cluster): apply ``entries``' rows that belong to ``shards`` (frozen)
    to them, each at most once, leaving the entries in their outboxes for their pushers."""
    decoded = yield from _named(layout, entries)
    by_shard = {s: v for s, v in _by_shard(layout, entries, decoded).items() if s in shards}
    dropped = yield from _pool_add(layout, by_shard, True)
    if dropped:
        yield from _forget_ids(layout, dropped)


def _named(layout: KeyLayout, entries: Sequence[Entry]) -> Generator[Any, Any, list[list[Row]]]:
    """The entries' rows, those named by id alone named from the id map."""
    decoded = [decode_entry(e.blob) for e in entries]
    unnamed = sorted({r[1] for rows in decoded for r in rows if not r[0]})
    if unnamed:
        names = yield Call("hmget", (layout.id_names, [str(i) for i in unnamed]))
        known = {i: n.decode("utf-8") for i, n in zip(unnamed, names) if n is not None}
        decoded = [[(r[0] or known.get(r[1], ""), *r[1:]) for r in rows] for rows in decoded]
    return decoded


Groups = dict[int, tuple[list[int], list[Any]]]


def _by_shard(layout: KeyLayout, entries: Sequence[Entry], decoded: list[list[Row]]) -> Groups:
    """POOL_ADD's arguments per shard (an entry count, then each entry's block)."""
    by_shard: Groups = {}
    for entry, rows in zip(entries, decoded):
        groups: dict[int, list[Row]] = {}
        for row in rows:
            if row[0]:  # (a name the map no longer has: the feature left the pool already)
                groups.setdefault(layout.shard_of(row[0]), []).append(row)
        for s, group in groups.items():
            count, args = by_shard.setdefault(s, ([0], []))
            count[0] += 1
            args += [entry.id, repr(created(entry.blob)), len(group), *(r[0] for r in group)]
            args += [repr(float(v)) for r in group for v in r[1:]]
    return by_shard


def _pool_add(layout: KeyLayout, by_shard: Groups, force: bool) -> Generator[Any, Any, list[Any]]:
    if not by_shard:
        return []
    replies = yield Pipeline(tuple(Script("POOL_ADD", [layout.pooled[s], layout.markers[s]],
                                          ["1" if force else "0", count[0], *args])
                                   for s, (count, args) in sorted(by_shard.items())))
    return [x for reply in replies for x in reply]


def _forget_ids(layout: KeyLayout, dropped: list[Any]) -> Generator[Any, Any, None]:
    """Features no namespace holds (``[name, id, ...]``) leave the id map."""
    yield Pipeline((Call("hdel", (layout.id_map, *dropped[0::2])),
                    Call("hdel", (layout.id_names, *dropped[1::2]))))


def _push_local(layout: KeyLayout, entries: Sequence[Entry],
                decoded: list[list[Row]]) -> Generator[Any, Any, list[Any]]:
    """One server: every entry in one POOL_PUSH_LOCAL (placed by ``layout``, checked by the
    script's GUARD), then the pointers persisted -> the fields the shards dropped."""
    keys: list[str] = []
    index: dict[str, int] = {}

    def at(key: str) -> int:
        if key not in index:
            keys.append(key)
            index[key] = len(keys)
        return index[key]
    args: list[Any] = [layout.meta, layout.meta_value, len(entries)]
    for entry, rows in zip(entries, decoded):
        named = [r for r in rows if r[0]]  # (a name gone from the map: it left the pool)
        args += [at(entry.outbox), entry.id, len(named)]
        for name, ident, p, q, c in named:
            args += [at(layout.pooled[layout.shard_of(name)]), name, ident,
                     repr(float(p)), repr(float(q)), repr(float(c))]
    dropped = yield Script("POOL_PUSH_LOCAL", keys, args)
    pointers = [Call("persist", (e.pointer,)) for e in entries if e.pointer]
    if pointers:
        yield Pipeline(tuple(pointers))
    return list(dropped)


def created(blob: bytes) -> float:
    """An outbox entry's creation time (ms, the clock of its bucket's master)."""
    return float(struct.unpack_from("<d", blob)[0])


def watermark(layout: KeyLayout, entries: Sequence[Entry], since_ms: float) -> Generator[Any, Any, None]:
    """Raise every shard's watermark to the oldest of ``entries`` (every entry waiting in every
    outbox, read after ``since_ms``, this process's clock) or ``since_ms`` less
    :data:`CLOCK_SKEW_MS`: an entry made after the read is younger than that."""
    mark = min([since_ms - CLOCK_SKEW_MS, *(created(e.blob) for e in entries)])
    yield Pipeline(tuple(Script("MARKS_TRIM", [key], [repr(mark)]) for key in layout.markers))


def pending(layout: KeyLayout, buckets: Sequence[int],
            min_age_ms: float = 0.0) -> Generator[Any, Any, list[Entry]]:
    """Every outbox entry waiting in ``buckets`` at least ``min_age_ms`` (one round trip)."""
    if not buckets:
        return []
    boxes = [layout.key(layout.bucket_tag(b), "q") for b in buckets]
    replies = yield Pipeline(tuple(Call("hgetall", (box,)) for box in boxes))
    oldest = time.time() * 1000 - min_age_ms
    return [Entry(box, k.decode("utf-8"), v) for box, rows in zip(boxes, replies)
            for k, v in rows.items() if created(v) <= oldest]


def buckets_in_use(layout: KeyLayout) -> Generator[Any, Any, list[int]]:
    """The bucket numbers the registry lists (a superset of those holding data)."""
    replies = yield Pipeline(tuple(Call("smembers", (key,)) for key in layout.registry))
    return sorted({int(b) for members in replies for b in members})
