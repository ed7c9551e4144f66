"""``heaprank state reshard URL --shards N``: move the pooled layer of a Redis state from its G
shards to N, while writers keep running (in a Cluster: :mod:`.reshard_cluster`).

``P:meta`` says where the pooled rows are: ``2:G@e`` (epoch e: the shards' tags carry it), and
during a reshard ``2:G@e>N:k``: old shards below ``k`` have moved to the N shards of epoch
e + 1, the others not yet. A feature's row is in exactly one place, which every process
computes from the meta (:meth:`~.layout.KeyLayout.shard_of`). On one server each old shard
moves in one script (RESHARD_MOVE: its rows to the new shards, the old shard deleted, the meta
advanced, at once), and every script that touches a pooled shard first checks the meta its
caller placed the shards by (GUARD): a caller whose meta is behind gets HEAPRANK_EPOCH, reloads
the meta and runs again. So no increment is lost or doubled, and a resharder killed at any
point is simply run again: it goes on from the meta's ``k``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, cast

from ...errors import ConfigError
from .flow import drive
from .layout import KeyLayout, Placement
from .ops import load_placement
from .wire import Script

#: The sync client (``RedisState``; not imported here).
RedisState = Any


def _placement(state: RedisState) -> Placement:
    placement: Placement = state.call("reshard", lambda: drive(load_placement(state.layout),
                                                               state.send), idempotent=True)
    state.adopt(placement)
    return placement


def _begin(state: RedisState, shards: int) -> Placement:
    """The reshard to ``shards`` under way (begun here if none is): its placement."""
    while True:
        now = _placement(state)
        if now.target is not None:
            if now.target != shards:
                raise ConfigError(f"state reshard: a reshard to {now.target} shards is under "
                                  f"way; finish it first (--shards {now.target})")
            return now
        if now.shards == shards:
            return now
        pending = Placement(now.shards, now.epoch, shards, 0)
        swap = Script("META_SWAP", [state.layout.meta], [now.text(), pending.text()])
        swapped = state.call("reshard", lambda s=swap: state.send(s), idempotent=True)
        if swapped:
            return pending


def _after(placement: Placement, step: int = 1) -> Placement:
    """The placement once the next ``step`` old shards moved."""
    assert placement.target is not None
    if placement.moved + step < placement.shards:
        return Placement(placement.shards, placement.epoch, placement.target,
                         placement.moved + step)
    return Placement(placement.target, placement.epoch + 1)


def _move_local(state: RedisState, placement: Placement) -> int:
    """One server: the next old shard, in one script -> rows moved (-1: moved meanwhile)."""
    assert placement.target is not None
    layout = KeyLayout(state.layout.prefix, placement.shards, placement)
    k, after = placement.order()[placement.moved], _after(placement)
    keys = [layout.meta, layout.pooled[k], layout.markers[k], *layout.pooled[placement.shards:]]
    move = Script("RESHARD_MOVE", keys, [placement.text(), placement.target, after.text()])
    done, count = state.call("reshard", lambda: state.send(move), idempotent=True)
    return int(count) if done else -1


def reshard(state: RedisState, shards: int, pause_s: float = 0.0,
            on_move: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Move the pooled layer of ``state`` to ``shards`` shards: on one server one old shard per
    script, in a Cluster (where the new count must divide or be a multiple of the old) one
    group of old shards at a time (:mod:`.reshard_cluster`); ``pause_s`` between two moves
    (to spread the load); ``on_move(k)`` after each. Returns ``{"from", "to", "epoch",
    "moved", "rows", "seconds"}`` (``moved``: old shards moved by this run)."""
    from .reshard_cluster import check_counts, move_group

    KeyLayout(state.layout.prefix, shards)  # (checks the count)
    started = time.monotonic()
    current = _placement(state)
    if state.cluster and current.target is None and current.shards != shards:
        check_counts(current.shards, shards)
    placement = _begin(state, shards)
    first, moved, rows = placement.shards, 0, 0
    while placement.target is not None:
        k = placement.moved
        count, step = move_group(state, placement) if state.cluster else (
            _move_local(state, placement), 1)
        if count >= 0 and state.cluster:
            swap = Script("META_SWAP", [state.layout.meta],
                          [placement.text(), _after(placement, step).text()])
            count = count if state.call("reshard", lambda s=swap: state.send(s),
                                        idempotent=True) else -1
        if count >= 0:
            moved, rows = moved + step, rows + count
            if on_move is not None:
                on_move(k)
            if pause_s > 0 and k + step < placement.shards:
                time.sleep(pause_s)
        placement = _placement(state)  # (another resharder may have moved it meanwhile)
    return {"from": first, "to": placement.shards, "epoch": placement.epoch, "moved": moved,
            "rows": rows, "seconds": round(time.monotonic() - started, 3)}


def reshard_url(url: str, shards: int, pause_s: float = 0.0) -> dict[str, Any]:
    """:func:`reshard` of the state at ``url`` (its ``prefix=`` option names it)."""
    from .backend import RedisState as Client
    from .connect import Settings, connect
    from .layout import redis_options

    base, options = redis_options(url)
    client = connect(base, 5.0)
    try:  # (whatever G the state has: a reshard of a state resharded before opens it too)
        stored = client.get(f"{Settings.of('reshard', cast(Any, options)).prefix}:meta")
    finally:
        client.close()
    if stored is not None and b":" in stored:
        options.setdefault("global_shards", Placement.parse(stored.decode()).shards)
    state = Client(base, strict=True, **options)
    try:
        return reshard(state, shards, pause_s)
    finally:
        state.close()
