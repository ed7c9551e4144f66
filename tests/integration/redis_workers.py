"""Worker processes of the Redis concurrency tests (importable, so ``spawn`` can run them), and
the helpers the fault tests share.

Each worker applies a deterministic list of feedback updates (from its seed) straight to a
``RedisState``; the test replays the same lists serially on a ``MemoryState`` and compares.
Uniform credit (``em=False``) of items with four features adds multiples of 1/4, which sum
exactly in any order: so "equal to the serial result" can be checked with ``==``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from typing import Any

from heaprank import MemoryState, StateUnavailableError
from heaprank.model.links import Judged, Prior, increments
from heaprank.records import IGNORED, USED, Impression, Update
from heaprank.state.base import StateBackend
from heaprank.state.redis.layout import KeyLayout

NAMESPACES = ("ns-a", "ns-b", "ns-c", "ns-d", "ns-e")
KINDS = ("kind:fact", "kind:note", "kind:event")
LENGTHS = ("len:<=3", "len:<=10", "len:<=30")
PRIOR = Prior(mean=0.02, strength=2.0, kappa=50.0)


def plan(worker: int, count: int, born_ms: int,
         minted: bool = True) -> Iterator[tuple[Impression, Update]]:
    """``count`` impressions with their feedback, overlapping in namespaces and features; their
    recall ids as the Redis backend mints them (20 digits, the bucket last), or of 16 digits
    (its impressions then take a key and a pointer each, as before the hour hashes)."""
    rng = random.Random(worker)
    for j in range(count):
        rid = f"{(born_ms << 20) | (worker << 12) | j:016x}"
        ns = rng.choice(NAMESPACES)
        if minted:
            rid += f"{KeyLayout.bucket(ns):04x}"
        ids = tuple(f"doc{rng.randrange(20)}-{k}" for k in range(3))
        slots = tuple((rng.choice(KINDS), rng.choice(LENGTHS)) for _ in ids)
        imp = Impression(recall_id=rid, namespace=ns, qtype="when", time=1_750_000_000.0 + j,
                         time_explicit=True, ids=ids, slots=slots)
        yield imp, update_of(imp, [rng.random() < 0.4 for _ in ids])


def update_of(imp: Impression, used: list[bool]) -> Update:
    """The update of a feedback on every shown item of ``imp`` (``used[k]``: item ``k`` was
    used), worked out by heaprank's rule with uniform credit (no means to read)."""
    inc = increments([Judged(imp.features_of(k), u, 1.0) for k, u in enumerate(used)], {},
                     em=False)
    return Update(imp.recall_id, imp.namespace, imp.time, tuple(range(1, len(used) + 1)),
                  tuple(USED if u else IGNORED for u in used),
                  tuple(d for d, u in zip(imp.ids, used) if u), inc.features, inc.dpos, inc.dneg)


def apply(state: StateBackend, worker: int, count: int, born_ms: int,
          retry_every: int = 0, minted: bool = True) -> tuple[int, int]:
    """Apply a worker's plan; every ``retry_every``-th feedback is sent twice (a client retry)."""
    applied = repeated = 0
    for j, (imp, update) in enumerate(plan(worker, count, born_ms, minted)):
        assert state.put_impression(imp) == imp.recall_id
        assert state.apply([update]) == [True]
        applied += len(update.ranks)
        if retry_every and j % retry_every == 0:  # a retry finds its items recorded: stale
            assert state.apply([update]) == [False]
            repeated += len(update.ranks)
    return applied, repeated


def run_worker(url: str, prefix: str, worker: int, count: int, born_ms: int,
               retry_every: int, gate: Any = None, minted: bool = True) -> tuple[int, int, float, float]:
    """One process: open its own client, wait at ``gate`` (a barrier of every writer, so they
    all write at once however slowly the processes start), apply its plan, report counts and
    its time window."""
    from heaprank.state.redis import RedisState

    state = RedisState(url, prefix=prefix)
    try:
        if gate is not None:
            gate.wait(timeout=120)
        start = time.monotonic()
        applied, repeated = apply(state, worker, count, born_ms, retry_every, minted)
        return applied, repeated, start, time.monotonic()
    finally:
        state.close()


def snapshot(state: StateBackend) -> dict:
    """Every link of the global layer and of each namespace, as plain values."""
    out = {}
    for ns in [None, *state.namespaces()]:
        f, p, n = state.list_links(ns)
        out[ns] = (f, p.tolist(), n.tolist())
    return out


def serial_snapshot(pairs) -> dict:  # type: ignore[no-untyped-def]
    """:func:`snapshot` of ``(impression, update)`` pairs applied one by one in memory."""
    serial = MemoryState()
    for imp, update in pairs:
        serial.put_impression(imp)
        serial.apply([update])
    return snapshot(serial)


def until_available(what, failures: list[str], attempts: int = 400, pause_s: float = 0.025):  # type: ignore[no-untyped-def]
    """Call ``what`` until it stops raising StateUnavailableError (the server comes back),
    noting each failure in ``failures`` (proof that a test did hit one)."""
    for _ in range(attempts):
        try:
            return what()
        except StateUnavailableError as exc:
            failures.append(str(exc))
            time.sleep(pause_s)
    raise AssertionError("the state never came back")


def feed_until_applied(state: StateBackend, pairs, done: list, failures: list[str],  # type: ignore[no-untyped-def]
                       attempts: int = 400) -> None:
    """Write each impression and apply its feedback, retrying through outages; ``done`` gets
    each pair once its feedback was acknowledged."""
    for imp, update in pairs:
        def put(imp: Impression = imp) -> None:
            # A write whose reply was lost may have happened: then the impression is there.
            if state.put_impression(imp) is None and state.get_impression(imp.recall_id) is None:
                raise AssertionError(f"recall id {imp.recall_id} taken by something else")
        until_available(put, failures, attempts)
        # (a reply lost after the update was applied: the retry finds it stale, applied once)
        until_available(lambda u=update: state.apply([u]), failures, attempts)
        done.append((imp, update))
