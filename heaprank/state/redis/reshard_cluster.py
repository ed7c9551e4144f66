"""``heaprank state reshard`` in a Redis Cluster, where the old and the new pooled shards sit in
other slots than each other and than ``P:meta``, so a move cannot be one script.

The old shards move in groups: those whose rows all go to one new shard (N divides G), or one
old shard at a time (G divides N); other counts are refused. For a group:

1. *freeze* its old shards (RESHARD_FREEZE: their version becomes -2; POOL_ADD refuses them
   with HEAPRANK_FROZEN, and a pusher waits, reloading the meta, up to 2 s, then leaves its
   entries in their outboxes);
2. *complete* every outbox entry still waiting: its rows for the group's old shards are applied
   to them (POOL_ADD forced, each at most once by its marker), so that for every entry the
   group's shards hold all of its rows or none (one made after the freeze touches none);
3. *copy* the rows and the markers into the new shards (RESHARD_PUT: rows set, markers united,
   watermark the highest: idempotent), which no pusher writes before the meta says so;
4. *tombstone* the old shards (RESHARD_TOMB: version -1; a late pusher gets HEAPRANK_EPOCH, a
   reader sees -1, and both reload the meta), then advance ``P:meta`` (reshard.py).

Killed anywhere, the resharder is run again and redoes the group the meta says is next:
freezing, completing and copying again change nothing; a tombstoned shard is copied as empty
(its rows were copied before it was tombstoned).
"""

from __future__ import annotations

from typing import Any

from ...errors import ConfigError
from . import pooled
from .flow import Call
from .layout import KeyLayout, Placement, crc
from .wire import Pipeline, Script

#: The sync client (``RedisState``; not imported here).
RedisState = Any
#: Rows per RESHARD_PUT script.
_CHUNK = 2_000


def check_counts(old: int, new: int) -> None:
    if old % new and new % old:
        raise ConfigError(f"state reshard: in a Cluster the new shard count must divide the old "
                          f"or be a multiple of it ({old} -> {new})")


def _group(placement: Placement) -> tuple[list[int], list[int]]:
    """The next old shards to move together, and the new shards that receive their rows."""
    g, n = placement.shards, placement.target
    assert n is not None
    order = placement.order()
    if n < g:
        group = order[placement.moved:placement.moved + g // n]
        return group, [group[0] % n]
    s = order[placement.moved]
    return [s], [t for t in range(n) if t % g == s]


def move_group(state: RedisState, placement: Placement) -> tuple[int, int]:
    """Freeze, complete, copy and tombstone the next group -> (rows copied, old shards)."""
    layout = KeyLayout(state.layout.prefix, placement.shards, placement)
    group, targets = _group(placement)

    def send(request: Any) -> Any:
        return state.call("reshard", lambda: state.send(request), idempotent=True)
    send(Pipeline(tuple(Script("RESHARD_FREEZE", [layout.pooled[s]], []) for s in group)))
    buckets = state.run_flow("reshard", lambda: pooled.buckets_in_use(layout), idempotent=True)
    waiting = state.run_flow("reshard", lambda: pooled.pending(layout, buckets), idempotent=True)
    state.run_flow("reshard", lambda: pooled.complete(layout, waiting, group), idempotent=True)
    replies = send(Pipeline(tuple(c for s in group for c in (
        Call("hgetall", (layout.pooled[s],)),
        Call("zrange", (layout.markers[s], 0, -1), {"withscores": True})))))
    rows: dict[int, list[Any]] = {t: [] for t in targets}
    marks: list[Any] = []
    mark = -1.0
    for held, markers in zip(replies[0::2], replies[1::2]):
        for f, v in held.items():
            if f:
                rows[crc(f.decode("utf-8")) % placement.target].extend((f, v))  # type: ignore[operator]
        for m, score in markers:
            if m:
                marks.extend((m, repr(score)))
            else:
                mark = max(mark, score)
    base = placement.shards
    for t, flat in rows.items():
        chunks = [flat[i:i + 2 * _CHUNK] for i in range(0, len(flat), 2 * _CHUNK)] or [[]]
        send(Pipeline(tuple(Script("RESHARD_PUT", [layout.pooled[base + t], layout.markers[base + t]],
                                   [repr(mark), len(chunk) // 2, *chunk, *(marks if i == 0 else [])])
                            for i, chunk in enumerate(chunks))))
    send(Pipeline(tuple(Script("RESHARD_TOMB", [layout.pooled[s], layout.markers[s]], [])
                        for s in group)))
    return sum(len(flat) // 2 for flat in rows.values()), len(group)
